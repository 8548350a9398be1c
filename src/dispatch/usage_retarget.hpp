#pragma once
// What a usage manifest's kernels become on another target: each record is asked again of that
// target's heuristics, so a store warmed from a run on one GPU holds what a GPU of another
// architecture picks for the same calls (`moejit warmup --from-usage FILE --arch ...`).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "dispatch/spec_observer.hpp"
#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit::dispatch {

struct RetargetedUsage {
  std::vector<KernelSpec> specs;  // in record order, without repeats
  // Grouped GEMMs with decode tiles recorded without their call (manifests of older versions):
  // kept with their recorded tile, which the target's heuristic may not pick. (Prefill tiles do
  // not need the call: stand_in_call.)
  std::size_t gemms_without_call = 0;
  // Kernels of a fused layer (its routing align and GEMMs) in a manifest that records no layer
  // (older versions): kept with their recorded tile rows, which the target may weigh otherwise.
  std::size_t kernels_without_layer = 0;
};

// The kernels `records` need on `arch` (with `backend`, else each record's own). A record made
// on `arch` itself is kept as it is: it is what that run used. One made on another target is
// planned again on every device profile of `arch` (spec/device_profiles.hpp): a fused layer's
// call gets every kernel the target picks for the layer at the batch sizes it stands for (its
// align and GEMMs are planned from it alone, not from their own records: the tile rows depend on
// the device), a grouped GEMM the tile and split the target's heuristic picks for its recorded
// call, the routing align the warps that fit the target's shared memory, the quantization its
// own recipe. `extra_sms` (not 0):
// every record is also planned for a GPU of `arch` with that many SMs (one no profile has: a MIG
// slice, another SKU). Errors name the record and the target.
Result<RetargetedUsage> retarget_usage(const std::vector<UsageRecord>& records, Arch arch,
                                       std::optional<Backend> backend, std::uint32_t extra_sms = 0);

}  // namespace moejit::dispatch
