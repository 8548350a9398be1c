// The bf16 baselines' public entry points: prepare_bf16_grouped and prepare_bf16_dense check their
// arguments here, in every build, then call their kernel's translation unit (grouped_bf16.cu,
// dense_bf16.cu) when this library carries the kernels (MOEJIT_CUTLASS_KERNELS).

#include <string>
#include <utility>

#include "bench/cutlass/detail.hpp"

namespace moejit::bench::cutlass_baseline {

PlanResult prepare_bf16_grouped(const GroupedProblem& p) {
  constexpr const char* fn = "prepare_bf16_grouped";
  if (auto e = detail::check_grouped(fn, p, /*with_scales=*/false); !e.empty()) return {nullptr, e};
#if MOEJIT_CUTLASS_KERNELS
  return kernels::bf16_grouped(p);
#else
  return detail::not_built(fn, detail::kConfiguredOut);
#endif
}

PlanResult prepare_bf16_dense(int m, int n, int k, const void* a, const void* w, void* d) {
  constexpr const char* fn = "prepare_bf16_dense";
  const std::string f = fn;
  if (m <= 0) return {nullptr, f + ": m = " + std::to_string(m) + "; expected > 0"};
  if (n <= 0 || n % 8 != 0)
    return {nullptr, f + ": n = " + std::to_string(n) + "; expected a positive multiple of 8 (16-byte rows of D for TMA)"};
  if (k <= 0 || k % 8 != 0)
    return {nullptr, f + ": k = " + std::to_string(k) + "; expected a positive multiple of 8 (16-byte rows of A and W for TMA)"};
  for (auto [name, ptr] : {std::pair{"a", a}, std::pair{"w", w}, std::pair<const char*, const void*>{"d", d}})
    if (auto e = detail::check_pointer(fn, name, -1, ptr); !e.empty()) return {nullptr, e};
#if MOEJIT_CUTLASS_KERNELS
  return kernels::bf16_dense(m, n, k, a, w, d);
#else
  return detail::not_built(fn, detail::kConfiguredOut);
#endif
}

}  // namespace moejit::bench::cutlass_baseline
