// The int4 grouped kernel with 128-row activation tiles (CUTLASS example 55's tile): prefill, where
// 16-row tiles would convert each weight tile once per 16 rows.

#include "bench/cutlass/grouped_int4_impl.hpp"

namespace moejit::bench::cutlass_baseline::int4 {

#if defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)
PlanResult prepare_n128(const GroupedProblem& p, int group) {
  return GroupedInt4<Bf16Act, 128>::prepare(
      p, group, "prepare_int4_grouped",
      "cutlass_int4_grouped: mixed-input ptr-array TMA warp-specialized cooperative, int4 x bf16 scale-only, "
      "shuffled W, swapped (W as A), tile 128x128x64, cluster 1x1x1");
}
#endif

}  // namespace moejit::bench::cutlass_baseline::int4
