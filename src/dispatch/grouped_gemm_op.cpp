#include "dispatch/grouped_gemm_op.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "dispatch/tile_configs.hpp"
#include "quant/pack.hpp"
#include "spec/spec_fields.hpp"

namespace moejit::dispatch {
namespace {

bool is_act_and_mul(Epilogue e) { return e == Epilogue::silu_and_mul || e == Epilogue::swiglu_oai; }

}  // namespace

GemmWork gemm_work(const GroupedGemmRequest& r) {
  const PackedWeightsView& w = r.weights;
  GemmWork work;
  work.n = w.n;
  work.k = w.k;
  work.group_size = w.group_size;
  work.weight = w.format;
  work.scale = w.scale;
  work.act = r.act;
  work.act_scale = r.act_scale;
  work.first_ramp_hidden = r.layout == Layout::indexed && r.params.weights_before_dependency != 0;
  const double m = std::max(r.params.m, 1);
  const std::uint32_t experts = std::max(w.experts, 1u);
  switch (r.layout) {
    case Layout::indexed: {
      // Pairs routed over the global experts; this GEMM sees those of its local ones.
      const std::uint32_t global = std::max(r.global_experts_hint, experts);
      const RoutedRows rows = routed_rows(m, experts, global, r.topk_hint);
      work.busy_experts = rows.busy_experts;
      work.rows_per_expert = rows.per_busy_expert;
      work.routed_pairs = m;
      work.experts = experts;
      work.global_experts = global;
      work.topk = r.topk_hint;
      break;
    }
    case Layout::contiguous:
      if (r.rows_per_expert_hint > 0) {
        work.rows_per_expert = r.rows_per_expert_hint;
        work.busy_experts = std::clamp(m / r.rows_per_expert_hint, 1.0, static_cast<double>(experts));
      } else {
        work.busy_experts = expected_busy_experts(m, experts, experts, 0);
        work.rows_per_expert = m / work.busy_experts;
      }
      break;
    case Layout::masked:
    case Layout::none:
      work.busy_experts = experts;
      work.rows_per_expert = r.rows_per_expert_hint > 0 ? r.rows_per_expert_hint : m;
      break;
  }
  return work;
}

Result<KernelSpec> grouped_gemm_spec(const GroupedGemmRequest& r, Arch arch, Backend backend, std::uint32_t sms) {
  const PackedWeightsView& w = r.weights;  // shape and format only: workspace queries have no buffers
  if (is_act_and_mul(r.epilogue) && !w.act_and_mul)
    return error(Code::invalid_argument,
                 "argument 'epilogue' = {}: the weights were packed as plain rows; expected weights packed from a "
                 "gate/up row order (concatenated or interleaved)",
                 to_string(r.epilogue));
  if (!is_act_and_mul(r.epilogue) && w.act_and_mul)
    return error(Code::invalid_argument,
                 "argument 'epilogue' = {}: the weights interleave gate and up columns; expected silu_and_mul or "
                 "swiglu_oai",
                 to_string(r.epilogue));
  // Masked A holds experts x m rows, which the kernel indexes (and finds their scales) with
  // 32-bit row numbers.
  if (r.layout == Layout::masked && static_cast<std::int64_t>(w.experts) * r.params.m > 2147483647)
    return error(Code::invalid_argument,
                 "argument 'args->m' = {} with the masked layout over {} experts: expected experts x m at most 2^31 - 1 "
                 "(the rows of A)",
                 r.params.m, w.experts);
  if (w.order != quant::packed_order_for(r.act, w.format)) {
    return error(Code::invalid_argument,
                 "argument 'act_dtype' = {}: the {} weights were packed for {} activations; expected weights packed with "
                 "act_dtype {} (pack them again for this activation type)",
                 to_string(r.act), to_string(w.format), quant::packed_for_name(w.order, w.format),
                 quant::packed_act_option_name(quant::packed_order_for(r.act, w.format), w.format));
  }
  KernelSpec s{};
  s.op = Op::grouped_gemm;
  s.arch = arch;
  s.backend = backend;
  s.weight = w.format;
  s.scale = w.scale;
  s.group_size = w.group_size;
  s.act = r.act;
  s.act_scale = r.act_scale;
  s.out = r.out;
  s.layout = r.layout;
  s.epilogue = r.epilogue;
  s.n = w.n;
  s.k = w.k;
  s.experts = w.experts;
  const GemmWork work = gemm_work(r);
  std::uint16_t bm = pick_block_rows(work.rows_per_expert);
  if (r.layout == Layout::indexed) {
    const auto* it = std::find(kGemmBlockRows.begin(), kGemmBlockRows.end(), r.block_size);
    if (it == kGemmBlockRows.end())
      return error(Code::invalid_argument, "argument 'block_size' = {}: expected the moe_align block size of a tile: {}",
                   r.block_size, fmt::join(kGemmBlockRows, ", "));
    bm = *it;
  }
  return with_plan(s, plan_gemm(work, bm, arch, sms));
}

GemmCall gemm_call(const GroupedGemmRequest& r) {
  // A request with negative m never launches (prepare_grouped_gemm refuses it), so is never recorded.
  return {static_cast<std::uint32_t>(r.params.m), r.rows_per_expert_hint, r.topk_hint, r.global_experts_hint,
          r.params.weights_before_dependency, r.fused_layer ? 1u : 0u};
}

namespace {

// The request a recorded grouped GEMM stands for: its shapes and formats, and the call.
GroupedGemmRequest request_for(const KernelSpec& recorded, const GemmCall& call) {
  GroupedGemmRequest r;
  r.weights.format = recorded.weight;
  r.weights.group_size = recorded.group_size;
  r.weights.scale = recorded.scale;
  r.weights.experts = recorded.experts;
  r.weights.n = recorded.n;
  r.weights.k = recorded.k;
  r.weights.act_and_mul = is_act_and_mul(recorded.epilogue);
  r.weights.order = quant::packed_order_for(recorded.act, recorded.weight);
  r.act = recorded.act;
  r.act_scale = recorded.act_scale;
  r.out = recorded.out;
  r.layout = recorded.layout;
  r.epilogue = recorded.epilogue;
  r.params.m = static_cast<std::int32_t>(std::min<std::uint32_t>(call.m, 2147483647));
  r.params.weights_before_dependency = call.weights_before_dependency;
  r.block_size = recorded.bm;  // indexed: the align's block size, which the target keeps
  r.rows_per_expert_hint = call.rows_per_expert_hint;
  r.topk_hint = call.topk_hint;
  r.global_experts_hint = call.global_experts_hint;
  return r;
}

}  // namespace

std::optional<GemmCall> stand_in_call(const KernelSpec& recorded, const std::optional<GemmCall>& call) {
  if (recorded.op != Op::grouped_gemm) return std::nullopt;
  if (!plan_depends_on_call(recorded.bm)) {
    // bm rows per expert: every layout's tile rows come out as the recorded ones (the indexed
    // layout keeps them anyway).
    GemmCall stand_in;
    stand_in.m = recorded.bm;
    stand_in.rows_per_expert_hint = recorded.bm;
    stand_in.fused_layer = call ? call->fused_layer : 0;
    return stand_in;
  }
  // A decode tile chosen below the rows its call routes to each expert (the fused layer's
  // half-height tiles at prefill sizes): no split and one column candidate, so the same kernel
  // for every such call. It stands in with twice its rows per expert, pairs landing
  // independently on its experts (only the indexed layout keeps a tile below its rows).
  const std::uint64_t stand_in_pairs = 2ull * recorded.bm * recorded.experts;
  if (!call || recorded.layout != Layout::indexed || call->m > 2147483647 || stand_in_pairs == 0 ||
      stand_in_pairs > 2147483647)
    return std::nullopt;
  if (!plan_fixed_for_rows(recorded.bm, gemm_work(request_for(recorded, *call)).rows_per_expert)) return std::nullopt;
  GemmCall stand_in;
  stand_in.m = static_cast<std::uint32_t>(stand_in_pairs);
  stand_in.fused_layer = call->fused_layer;
  return stand_in;
}

Result<KernelSpec> grouped_gemm_spec_for(const KernelSpec& recorded, const GemmCall& call, Arch arch, Backend backend,
                                         std::uint32_t sms) {
  if (recorded.op != Op::grouped_gemm)
    return error(Code::invalid_argument, "spec field 'op' = {}: expected grouped_gemm", to_string(recorded.op));
  if (call.m > 2147483647)
    return error(Code::invalid_argument, "gemm call field 'm' = {}: expected 0 to 2^31 - 1", call.m);
  return grouped_gemm_spec(request_for(recorded, call), arch, backend, sms);
}

Result<std::uint64_t> grouped_gemm_workspace(const GroupedGemmRequest& r, Arch arch, Backend backend,
                                             std::uint32_t sms) {
  MOEJIT_ASSIGN_OR_RETURN(KernelSpec spec, grouped_gemm_spec(r, arch, backend, sms));
  MOEJIT_TRY(validate_spec(spec));  // a size only for a GEMM whose kernel exists
  const GemmTiles tiles = grouped_gemm_tiles(spec, r.params.m);
  MOEJIT_TRY(grouped_gemm_grid(tiles).status());  // and one launch can cover
  return grouped_gemm_partial_bytes(spec, tiles) + grouped_gemm_counter_count(spec, tiles) * sizeof(std::uint32_t);
}

Result<PreparedGemm> prepare_grouped_gemm(const GroupedGemmRequest& r, Arch arch, Backend backend,
                                          std::uint32_t sms) {
  if (r.weights.qweight == nullptr || r.weights.scales == nullptr)
    return error(Code::invalid_argument, "argument 'weights': qweight and scales must be set (packed weights)");
  PreparedGemm g;
  MOEJIT_ASSIGN_OR_RETURN(g.spec, grouped_gemm_spec(r, arch, backend, sms));
  GroupedGemmParams& p = g.params;
  p = r.params;
  p.b = static_cast<const u8*>(r.weights.qweight);
  p.b_scales = r.weights.scales;
  p.b_scale_ranges = r.weights.format == WeightFormat::mxfp4
                         ? mxfp4_scale_ranges(r.weights.scales, r.weights.experts, r.weights.n, r.weights.k)
                         : nullptr;
  p.b_zeros = static_cast<const u8*>(r.weights.zeros);
  p.bias = r.weights.bias;
  const GemmTiles tiles = grouped_gemm_tiles(g.spec, p.m);
  const std::uint64_t partial_bytes = grouped_gemm_partial_bytes(g.spec, tiles);
  const std::uint64_t counter_bytes = grouped_gemm_counter_count(g.spec, tiles) * sizeof(std::uint32_t);
  const std::uint64_t need = partial_bytes + (r.counters != nullptr ? 0 : counter_bytes);
  if (r.workspace_bytes < need)
    return error(Code::invalid_argument, "argument 'workspace_bytes' = {}: this problem needs {}", r.workspace_bytes, need);
  if (partial_bytes > 0) {
    p.workspace = static_cast<float*>(r.workspace);
    p.tile_counters = r.counters != nullptr
                          ? r.counters
                          : reinterpret_cast<u32*>(static_cast<unsigned char*>(r.workspace) + partial_bytes);
  }
  MOEJIT_TRY(check_grouped_gemm_params(g.spec, p));
  MOEJIT_ASSIGN_OR_RETURN(g.grid, grouped_gemm_grid(tiles));
  return g;
}

Status run_grouped_gemm(OpContext& ctx, const GroupedGemmRequest& r, void* stream) {
  MOEJIT_ASSIGN_OR_RETURN(PreparedGemm g, prepare_grouped_gemm(r, ctx.launcher.arch(), ctx.launcher.backend(),
                                                               ctx.launcher.sm_count()));
  // No rows, no launch; the call is still refused if it could never build its kernel.
  if (g.grid.empty()) return validate_spec(g.spec);
  return run_kernel(ctx, g.spec, g.grid, &g.params, sizeof g.params, stream,
                    Decision{"grouped_gemm", g.params.m,
                             static_cast<std::int64_t>(std::lround(gemm_work(r).rows_per_expert)), gemm_call(r)});
}

}  // namespace moejit::dispatch
