// The int4 grouped kernel with 16-row activation tiles (CUTLASS example 69's tile): decode, where
// each expert has a few rows and a wider tile would only multiply padding.

#include "bench/cutlass/grouped_int4_impl.hpp"

namespace moejit::bench::cutlass_baseline::int4 {

#if defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)
PlanResult prepare_n16(const GroupedProblem& p, int group) {
  return GroupedInt4<Bf16Act, 16>::prepare(
      p, group, "prepare_int4_grouped",
      "cutlass_int4_grouped: mixed-input ptr-array TMA warp-specialized cooperative, int4 x bf16 scale-only, "
      "shuffled W, swapped (W as A), tile 128x16x64, cluster 1x1x1");
}
#endif

}  // namespace moejit::bench::cutlass_baseline::int4
