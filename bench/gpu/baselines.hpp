#pragma once
// The CUTLASS baselines of the grouped GEMM benchmark (bench/cutlass): for one case, the same
// problem (the same routings, the same dequantized weight values) run by CUTLASS's Hopper bf16
// grouped GEMM and, for INT4 g128 cases, by CUTLASS's Hopper mixed-input int4 grouped GEMM (its
// int4 x bf16 form for W4A16 cases, its int4 x e4m3 form for W4A8 ones); each timed like
// moejit's kernel and its output checked against an fp64 reference. And the
// device's dense bf16 GEMM rate, the FLOP ceiling of the floor.
//
// The baselines compute plain D = A . W^T per expert over rows already grouped by expert (what
// an engine calling CUTLASS runs after permuting its tokens): no fused activation, no top-k
// weight, the gather not counted. Their A rows are a random [pairs, K] buffer (bf16, or e4m3 for
// the int4 x e4m3 kernel, which has no activation scale): all experts hold the same weights, so
// any row's output is its own row times W^T, whatever the grouping.

#include <nlohmann/json.hpp>

#include <memory>
#include <random>
#include <span>
#include <string>

#include "bench/gpu/gemm_cases.hpp"
#include "bench/gpu/gpu_timer.hpp"
#include "bench/gpu/routing.hpp"
#include "quant/quantized_weights.hpp"
#include "runtime/device_buffer.hpp"

namespace moejit::bench {

using Json = nlohmann::ordered_json;

enum class Baseline : std::uint8_t {
  cutlass_bf16_grouped,  // bf16 weights (the dequantized values): the dense upper baseline
  cutlass_int4_grouped,  // int4 weights, bf16 scales per group of 128: INT4 g128 W4A16 cases
  // int4 weights, e4m3 scales per group of 128 (lookup tables), e4m3 activations: INT4 g128 W4A8
  // cases. CUTLASS's e4m3 scales differ from moejit's bf16 ones, so its weights are the same
  // int4 values with each bf16 scale rounded to a power of two and the whole block shifted by one
  // power of two into e4m3's range (timing does not depend on the values; the output check uses
  // the values the kernel holds).
  cutlass_int4_fp8_grouped,
};
inline constexpr Baseline kBaselines[] = {Baseline::cutlass_bf16_grouped, Baseline::cutlass_int4_grouped,
                                          Baseline::cutlass_int4_fp8_grouped};
std::string_view to_string(Baseline b);

// Why `b` has no run for `c` on `arch` (empty when it has one): the CUTLASS kernels are built for
// sm_90a alone (wgmma, TMA), so other targets have none.
std::string not_applicable(Baseline b, const GemmCase& c, Arch arch);

// One baseline's weights for one (model, format, projection) run of cases, in CUTLASS's layout,
// on the device, replicated over experts and rotation copies like moejit's.
class BaselineWeights {
 public:
  // `block` holds one expert's first `block.n` rows (repeated across N, as moejit's are).
  static Result<std::unique_ptr<BaselineWeights>> create(DeviceLauncher& l, CUstream stream, Baseline kind,
                                                         const GemmCase& c, const quant::QuantizedWeights& block,
                                                         std::uint64_t rotate_bytes);
  // Times the baseline on `routings` (moejit's, for the same token count) and checks its
  // output: timings, bytes, output check, or `error`.
  Json run(const GemmCase& c, std::span<const Routing> routings, const TimingOptions& options,
           std::mt19937_64& rng);

 private:
  BaselineWeights(DeviceLauncher& l, CUstream stream, Baseline kind) : l_(l), stream_(stream), kind_(kind) {}
  Result<Json> try_run(const GemmCase& c, std::span<const Routing> routings, const TimingOptions& options,
                       std::mt19937_64& rng);

  DeviceLauncher& l_;
  CUstream stream_;
  Baseline kind_;
  std::uint32_t block_ = 0;          // distinct weight rows, repeated across N
  std::vector<double> reference_w_;  // [block][k]: the values the baseline's weights hold
  DeviceBuffer weights_, scales_;
  std::uint64_t expert_weight_bytes_ = 0, expert_scale_bytes_ = 0;
  std::uint32_t copies_ = 1;
};

// The dense bf16 GEMM rate: a `size`^3 CUTLASS GEMM timed like the cases, a few outputs checked
// against fp64. Null `tflops` (and a `reason`) when the CUTLASS kernels are not in this build.
Result<Json> measure_bf16_gemm_rate(DeviceLauncher& l, CUstream stream, std::uint32_t size,
                                    const TimingOptions& options, std::mt19937_64& rng);

}  // namespace moejit::bench
