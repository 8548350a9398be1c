#pragma once
// The grouped GEMM op: from a request (packed weights, activations, layout, epilogue) to a
// kernel spec with a tile picked for the problem, and a launch on the context's backend.

#include <cstdint>
#include <optional>

#include "dispatch/op_context.hpp"
#include "dispatch/tile_configs.hpp"
#include "kernels/grouped_gemm.hpp"
#include "spec/kernel_spec.hpp"

namespace moejit::dispatch {

// Packed weights as the ops see them (moejit_packed_weights_t without the ABI wrapper).
struct PackedWeightsView {
  WeightFormat format = WeightFormat::none;
  std::uint32_t group_size = 0;
  DType scale = DType::none;
  std::uint32_t experts = 0, n = 0, k = 0;
  bool act_and_mul = false;
  const void* qweight = nullptr;
  const void* scales = nullptr;
  const void* zeros = nullptr;
  const float* bias = nullptr;
  PackedOrder order = PackedOrder::a16;  // the activations the tiles were packed for (quant::packed_order_for)
};

struct GroupedGemmRequest {
  PackedWeightsView weights;
  DType act = DType::bf16;
  ActScale act_scale = ActScale::none;  // e4m3 / e2m1 activations: their scales' granularity
  DType out = DType::bf16;
  Layout layout = Layout::indexed;
  Epilogue epilogue = Epilogue::none;
  // m, a, lda, c, ldc and the layout's pointers; the weight fields are filled from `weights`.
  GroupedGemmParams params{};
  std::uint32_t block_size = 0;            // indexed: the align block size, = the tile's rows
  std::uint32_t rows_per_expert_hint = 0;  // contiguous / masked: 0 estimates it from m
  // indexed: how the pairs were routed, for the planner's estimate of busy experts (0: unknown,
  // pairs taken as landing independently on the weights' experts).
  std::uint32_t topk_hint = 0;
  std::uint32_t global_experts_hint = 0;
  void* workspace = nullptr;
  std::uint64_t workspace_bytes = 0;
  // Non-null: the split-K counters live here (zero at launch: the fused layer's align clears
  // them) and the workspace holds the partial sums only. Null: the workspace holds the partial
  // sums and then the counters.
  u32* counters = nullptr;
  // One of a fused layer's GEMMs (recorded as such in usage manifests: GemmCall::fused_layer).
  bool fused_layer = false;
};

// Where the planner thinks the request's rows fall: experts busy and rows each.
GemmWork gemm_work(const GroupedGemmRequest& request);

// The spec the request runs with on `arch` / `backend` on a device of `sms` multiprocessors;
// errors name the bad argument.
Result<KernelSpec> grouped_gemm_spec(const GroupedGemmRequest& request, Arch arch, Backend backend, std::uint32_t sms);

// The request's inputs to its tile choice that its spec does not hold (usage manifests record
// them with the spec).
GemmCall gemm_call(const GroupedGemmRequest& request);

// A call that stands for every call of the grouped GEMM `recorded` when its tile does not depend
// on the call (tiles that never split K, plan_depends_on_call; with `call`, also a decode tile
// smaller than the rows that call gives each expert, plan_fixed_for_rows): grouped_gemm_spec_for
// gives every such call the same spec on any target. None for other specs.
std::optional<GemmCall> stand_in_call(const KernelSpec& recorded, const std::optional<GemmCall>& call = std::nullopt);

// What a grouped GEMM recorded as `recorded` (a spec some target's heuristic picked for `call`)
// runs with on `arch` / `backend` with `sms` multiprocessors: the same problem, with the tile and
// split that target's heuristic picks. Warm-up re-targets usage manifests with it.
Result<KernelSpec> grouped_gemm_spec_for(const KernelSpec& recorded, const GemmCall& call, Arch arch,
                                         Backend backend, std::uint32_t sms);

// Workspace the request needs (split-K partial sums and counters).
Result<std::uint64_t> grouped_gemm_workspace(const GroupedGemmRequest& request, Arch arch, Backend backend,
                                             std::uint32_t sms);

// A request made ready to launch: its kernel spec, the kernel's parameters (weights and
// workspace filled in and checked) and its grid (grouped_gemm_grid), empty when there are no
// rows (nothing to launch).
struct PreparedGemm {
  KernelSpec spec{};
  GroupedGemmParams params{};
  LaunchGrid grid;
};
Result<PreparedGemm> prepare_grouped_gemm(const GroupedGemmRequest& request, Arch arch, Backend backend,
                                          std::uint32_t sms);

Status run_grouped_gemm(OpContext& ctx, const GroupedGemmRequest& request, void* stream);

}  // namespace moejit::dispatch
