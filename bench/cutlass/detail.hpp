#pragma once
// Internal to bench/cutlass: argument checks, device buffers and the Plan implementation shared
// by the kernel translation units. Host code; included only by this directory's .cu files.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/cutlass/cutlass_baselines.hpp"

namespace moejit::bench::cutlass_baseline::detail {

inline std::string cuda_error(const std::string& what, cudaError_t e) {
  return what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

// Device memory owned by a plan, freed with it.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)) {}
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }

  std::string allocate(std::size_t bytes, const std::string& what) {
    if (bytes == 0) bytes = 1;  // a valid pointer even for an empty workspace
    cudaError_t e = cudaMalloc(&ptr_, bytes);
    if (e != cudaSuccess) {
      ptr_ = nullptr;
      return cuda_error("cudaMalloc(" + std::to_string(bytes) + " bytes for " + what + ")", e);
    }
    return {};
  }
  // Allocates and fills from host memory (synchronous: prepare time only).
  template <class T>
  std::string upload(const std::vector<T>& host, const std::string& what) {
    std::size_t bytes = host.size() * sizeof(T);
    if (auto err = allocate(bytes, what); !err.empty()) return err;
    cudaError_t e = cudaMemcpy(ptr_, host.data(), bytes, cudaMemcpyHostToDevice);
    return e == cudaSuccess ? std::string() : cuda_error("cudaMemcpy(" + what + ")", e);
  }
  void* get() const { return ptr_; }
  template <class T>
  T as() const {
    return reinterpret_cast<T>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
};

// TMA reads and writes global memory at 16-byte aligned addresses.
inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// `group` < 0: a single matrix, named without an index.
inline std::string check_pointer(const char* fn, const char* name, long group, const void* p) {
  const std::string what = std::string(fn) + ": " + name + (group >= 0 ? "[" + std::to_string(group) + "]" : "");
  if (p == nullptr) return what + " is null";
  if (!aligned16(p)) return what + " must be 16-byte aligned (TMA)";
  return {};
}

// The checks every grouped problem passes: sizes, one entry per group, valid pointers, and the
// 16-byte row alignment TMA needs for bf16 rows of length k (A) and n (D): k and n multiples of 8.
inline std::string check_grouped(const char* fn, const GroupedProblem& p, bool with_scales) {
  const std::string f = fn;
  if (p.m.empty()) return f + ": no groups (m is empty); expected at least one group with m > 0";
  const std::size_t g = p.m.size();
  if (p.m.size() > 65536) return f + ": " + std::to_string(g) + " groups; expected at most 65536";
  auto size_check = [&](const char* name, std::size_t size) -> std::string {
    if (size == g) return {};
    return f + ": " + name + " has " + std::to_string(size) + " entries; expected one per group (" +
           std::to_string(g) + ", the size of m)";
  };
  for (auto [name, size] : {std::pair{"a", p.a.size()}, std::pair{"w", p.w.size()}, std::pair{"d", p.d.size()}})
    if (auto e = size_check(name, size); !e.empty()) return e;
  if (with_scales) {
    if (auto e = size_check("scales", p.scales.size()); !e.empty()) return e;
  } else if (!p.scales.empty()) {
    return f + ": scales has " + std::to_string(p.scales.size()) + " entries; expected none (bf16 weights)";
  }
  if (p.n <= 0 || p.n % 8 != 0)
    return f + ": n = " + std::to_string(p.n) + "; expected a positive multiple of 8 (16-byte rows of D for TMA)";
  if (p.k <= 0 || p.k % 8 != 0)
    return f + ": k = " + std::to_string(p.k) + "; expected a positive multiple of 8 (16-byte rows of A for TMA)";
  for (std::size_t i = 0; i < g; ++i) {
    if (p.m[i] <= 0)
      return f + ": m[" + std::to_string(i) + "] = " + std::to_string(p.m[i]) +
             "; expected > 0 (leave out groups without rows)";
    for (auto [name, ptr] : {std::pair{"a", p.a[i]}, std::pair{"w", p.w[i]}, std::pair<const char*, const void*>{"d", p.d[i]}})
      if (auto e = check_pointer(fn, name, long(i), ptr); !e.empty()) return e;
    if (with_scales)
      if (auto e = check_pointer(fn, "scales", long(i), p.scales[i]); !e.empty()) return e;
  }
  return {};
}

// The device of the context current on this thread; an error when there is none (no driver, no
// GPU).
inline std::string current_device(const char* fn, int& device) {
  cudaError_t e = cudaGetDevice(&device);
  if (e != cudaSuccess) return std::string(fn) + ": " + cuda_error("cudaGetDevice", e);
  return {};
}

// Why a prepare function has no kernel to run: this library was configured without the kernels
// (MOEJIT_CUTLASS_KERNELS=OFF, as the test build in CI is: nvcc spends about ten CPU-minutes on
// them and only the GPU check runs them), or the toolkit is too old for them.
inline constexpr const char* kConfiguredOut =
    "the CUTLASS kernels are not in this build (configured with -DMOEJIT_CUTLASS_KERNELS=OFF; the default, ON, "
    "compiles them)";
inline constexpr const char* kToolkitTooOld =
    "not built (the kernels need nvcc 12.3+: CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)";
inline PlanResult not_built(const char* fn, const char* why) { return {nullptr, std::string(fn) + ": " + why}; }

// A grouped kernel's epilogue arguments set to D = 1 * accumulator: the same scalars for every
// group, no beta (the kernels have no C operand).
template <typename Fusion>
void plain_product(Fusion& fusion) {
  fusion.alpha = 1.0f;
  fusion.beta = 0.0f;
  fusion.alpha_ptr = nullptr;
  fusion.beta_ptr = nullptr;
  fusion.alpha_ptr_array = nullptr;
  fusion.beta_ptr_array = nullptr;
}

}  // namespace moejit::bench::cutlass_baseline::detail

// The kernels, one translation unit each, compiled only when MOEJIT_CUTLASS_KERNELS is on: the
// public prepare functions (prepare_bf16.cu, int4_weights.cu) call them once the arguments pass
// their checks.
namespace moejit::bench::cutlass_baseline::kernels {
PlanResult bf16_grouped(const GroupedProblem& p);
PlanResult bf16_dense(int m, int n, int k, const void* a, const void* w, void* d);
}  // namespace moejit::bench::cutlass_baseline::kernels

namespace moejit::bench::cutlass_baseline::int4 {
// The int4 kernels for each activation type and tile width (grouped_int4_n*.cu,
// grouped_int4_fp8_n*.cu), likewise.
PlanResult prepare_n16(const GroupedProblem& p, int group);
PlanResult prepare_n128(const GroupedProblem& p, int group);
PlanResult prepare_fp8_n16(const GroupedProblem& p, int group);
PlanResult prepare_fp8_n128(const GroupedProblem& p, int group);
}  // namespace moejit::bench::cutlass_baseline::int4
