// The int4 x e4m3 grouped kernel with 128-row activation tiles: prefill, where 16-row tiles would
// read and convert the whole weight tile again for every 16 activation rows.

#include "bench/cutlass/grouped_int4_impl.hpp"

namespace moejit::bench::cutlass_baseline::int4 {

#if defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)
PlanResult prepare_fp8_n128(const GroupedProblem& p, int group) {
  return GroupedInt4<E4m3Act, 128>::prepare(
      p, group, "prepare_int4_fp8_grouped",
      "cutlass_int4_fp8_grouped: mixed-input ptr-array TMA warp-specialized cooperative, int4 x e4m3 scale-only "
      "(e4m3 lookup-table scales), shuffled W, swapped (W as A), tile 128x128x128, cluster 1x1x1");
}
#endif

}  // namespace moejit::bench::cutlass_baseline::int4
