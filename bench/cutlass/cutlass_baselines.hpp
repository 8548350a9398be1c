#pragma once
// Precompiled CUTLASS kernels that moejit's grouped GEMM is benchmarked against, compiled ahead
// of time by nvcc for sm_90a from the nvidia-cutlass wheel's headers (bench/cutlass/README.md):
//
//   - a Hopper bf16 x bf16 grouped GEMM: what an engine without 4-bit kernels runs (dense upper
//     baseline);
//   - CUTLASS's Hopper mixed-input grouped GEMM: int4 weights with bf16 group scales ("scale
//     only"), bf16 activations; and its W4A8 form: int4 weights with e4m3 group scales, e4m3
//     activations;
//   - a dense bf16 GEMM, for the device's bf16 matrix rate (the FLOP ceiling of the floor).
//
// This header is plain C++ (no CUTLASS, no CUDA runtime types): code compiled by the host
// compiler links the static library `moejit_cutlass_baselines`. Device pointers are `void*`;
// `stream` is a CUstream / cudaStream_t. The kernels run in the context current on the calling
// thread (bench_gemm makes the primary context current).
//
// Every problem is D[m, n] = A[m, k] . W[n, k]^T with A and D row-major (leading dimension k and
// n; A bf16, or e4m3 for the W4A8 kernel; D bf16), W row-major [n, k] (k contiguous: each output column's weights are one row, as
// engines store them). Errors are returned as text; an empty string means success.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace moejit::bench::cutlass_baseline {

// A prepared launch: device copies of the problem shapes, pointer arrays and strides, and the
// kernel's workspace, all allocated by `prepare`; `run` only enqueues (no allocation, no host
// synchronization: it can be captured in a CUDA graph).
class Plan {
 public:
  virtual ~Plan() = default;
  virtual std::string run(void* stream) = 0;
  virtual std::string name() const = 0;  // the kernel configuration, for the results JSON
};

// One group per expert that received rows; groups with m = 0 are left out by the caller.
struct GroupedProblem {
  int n = 0, k = 0;                 // shared by every group
  std::vector<int> m;               // rows of each group, each > 0
  std::vector<const void*> a;       // per group: bf16 (e4m3 for int4_fp8) [m_g, k], row-major
  std::vector<const void*> w;       // per group: weights (bf16 [n, k], or int4 as prepared below)
  std::vector<const void*> scales;  // per group, int4 only: scales as prepared below
  std::vector<void*> d;             // per group: bf16 [m_g, n], row-major
};

struct PlanResult {
  std::unique_ptr<Plan> plan;
  std::string error;  // empty when plan is set
};

// bf16 x bf16 grouped GEMM (ptr-array, TMA warp-specialized).
PlanResult prepare_bf16_grouped(const GroupedProblem& problem);

// int4 x bf16 grouped GEMM with bf16 group scales, group size `group` along k (128 in the
// benchmark): W and scales in the layout that the two functions below produce.
PlanResult prepare_int4_grouped(const GroupedProblem& problem, int group);

// One expert's int4 weights in the kernel's layout, from signed values in [-8, 7] stored one per
// int8_t as [n][k]: n * k / 2 bytes (reordered as the kernel reads them fastest).
std::string int4_weight_bytes(const std::int8_t* values, int n, int k, std::vector<std::uint8_t>& out);
// One expert's scales in the kernel's layout, from bf16 bit patterns [n][k / group]: the
// dequantized weight is values[n][k] * scales[n][k / group].
std::string int4_scale_bytes(const std::uint16_t* scales, int n, int k, int group, std::vector<std::uint16_t>& out);

// int4 x e4m3 grouped GEMM (W4A8): e4m3 activations, e4m3 group scales, group size `group` a
// multiple of 128 along k; bf16 D. No activation scale: D = A . (W * scale)^T exactly as above.
PlanResult prepare_int4_fp8_grouped(const GroupedProblem& problem, int group);

// Its weights, from signed values in [-8, 7] stored one per int8_t as [n][k]: n * k / 2 bytes,
// reordered for e4m3 wgmma and in the encoding its lookup table indexes.
std::string int4_fp8_weight_bytes(const std::int8_t* values, int n, int k, std::vector<std::uint8_t>& out);
// Its scales, from e4m3 bit patterns [n][k / group] (finite, magnitude at most 56): 8 bytes per
// scale (the e4m3 products of the scale with -8 .. -1 that the kernel looks values up in),
// [k / group][n]. The dequantized weight is values[n][k] * scales[n][k / group], rounded to e4m3.
std::string int4_fp8_scale_bytes(const std::uint8_t* scales, int n, int k, int group, std::vector<std::uint8_t>& out);

// Dense bf16 GEMM, D[m, n] = A[m, k] . W[n, k]^T, for the bf16 matrix-rate ceiling.
PlanResult prepare_bf16_dense(int m, int n, int k, const void* a, const void* w, void* d);

// Whether this build carries the kernels (false when CUTLASS_ARCH_MMA_SM90A is not enabled by the
// compiler, so the functions above return errors) and what they were built for.
bool available();
std::string build_info();  // e.g. "CUTLASS 4.2.0, nvcc 13.0, sm_90a"

}  // namespace moejit::bench::cutlass_baseline
