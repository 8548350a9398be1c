#include "dispatch/grouped_gemm_op.hpp"

#include "dispatch/grouped_gemm_launch.hpp"
#include "dispatch/tile_configs.hpp"
#include "spec/spec_fields.hpp"

namespace moejit::dispatch {
namespace {

bool is_act_and_mul(Epilogue e) { return e == Epilogue::silu_and_mul || e == Epilogue::swiglu_oai; }

std::uint32_t rows_per_expert(const GroupedGemmRequest& r) {
  if (r.rows_per_expert_hint > 0) return r.rows_per_expert_hint;
  if (r.layout == Layout::masked) return static_cast<std::uint32_t>(std::max(r.params.m, 1));
  const std::uint32_t experts = std::max(r.weights.experts, 1u);
  return static_cast<std::uint32_t>((std::max(r.params.m, 1) + experts - 1) / experts);
}

}  // namespace

Result<KernelSpec> grouped_gemm_spec(const GroupedGemmRequest& r, Arch arch, Backend backend) {
  const PackedWeightsView& w = r.weights;
  if (w.qweight == nullptr || w.scales == nullptr)
    return error(Code::invalid_argument, "argument 'weights': qweight and scales must be set (packed weights)");
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
  KernelSpec s{};
  s.op = Op::grouped_gemm;
  s.arch = arch;
  s.backend = backend;
  s.weight = w.format;
  s.scale = w.scale;
  s.group_size = w.group_size;
  s.act = r.act;
  s.out = r.out;
  s.layout = r.layout;
  s.epilogue = r.epilogue;
  s.n = w.n;
  s.k = w.k;
  s.experts = w.experts;
  if (r.layout == Layout::indexed) {
    for (const auto& tile : gemm_tile_configs(arch))
      if (tile.bm == r.block_size) return with_tile(s, tile);
    std::string sizes;
    for (const auto& tile : gemm_tile_configs(arch)) sizes += (sizes.empty() ? "" : ", ") + std::to_string(tile.bm);
    return error(Code::invalid_argument, "argument 'block_size' = {}: expected the moe_align block size of a tile: {}",
                 r.block_size, sizes);
  }
  return with_tile(s, pick_gemm_tile(arch, rows_per_expert(r)));
}

Result<std::uint64_t> grouped_gemm_workspace(const GroupedGemmRequest& r, Arch arch, Backend backend) {
  MOEJIT_ASSIGN_OR_RETURN(KernelSpec spec, grouped_gemm_spec(r, arch, backend));
  const LaunchShape shape = grouped_gemm_launch_shape(spec, r.params.m);
  return grouped_gemm_workspace_bytes(spec, shape) + grouped_gemm_counter_count(spec, shape) * sizeof(std::uint32_t);
}

Result<PreparedGemm> prepare_grouped_gemm(const GroupedGemmRequest& r, Arch arch, Backend backend) {
  PreparedGemm g;
  MOEJIT_ASSIGN_OR_RETURN(g.spec, grouped_gemm_spec(r, arch, backend));
  GroupedGemmParams& p = g.params;
  p = r.params;
  p.b = static_cast<const u8*>(r.weights.qweight);
  p.b_scales = r.weights.scales;
  p.b_zeros = static_cast<const u8*>(r.weights.zeros);
  p.bias = r.weights.bias;
  const LaunchShape shape = grouped_gemm_launch_shape(g.spec, p.m);
  const std::uint64_t partial_bytes = grouped_gemm_workspace_bytes(g.spec, shape);
  const std::uint64_t need = partial_bytes + grouped_gemm_counter_count(g.spec, shape) * sizeof(std::uint32_t);
  if (r.workspace_bytes < need)
    return error(Code::invalid_argument, "argument 'workspace_bytes' = {}: this problem needs {}", r.workspace_bytes, need);
  if (need > 0) {
    p.workspace = static_cast<float*>(r.workspace);
    p.tile_counters = reinterpret_cast<u32*>(static_cast<unsigned char*>(r.workspace) + partial_bytes);
  }
  MOEJIT_TRY(check_grouped_gemm_params(g.spec, p));
  g.dims.grid[0] = shape.grid[0];
  g.dims.grid[1] = shape.grid[1];
  g.dims.grid[2] = shape.grid[2];
  g.dims.block[0] = shape.block_threads;
  g.dims.dynamic_shared_bytes = shape.dynamic_shared_bytes;
  return g;
}

Status run_grouped_gemm(OpContext& ctx, const GroupedGemmRequest& r, void* stream) {
  MOEJIT_ASSIGN_OR_RETURN(PreparedGemm g, prepare_grouped_gemm(r, ctx.launcher.arch(), ctx.launcher.backend()));
  if (g.dims.grid[1] == 0) return {};  // no rows
  return run_kernel(ctx, g.spec, g.dims, &g.params, sizeof g.params, stream,
                    Decision{"grouped_gemm", g.params.m, static_cast<std::int64_t>(rows_per_expert(r))});
}

}  // namespace moejit::dispatch
