#include "bench/perf_model/evaluate.hpp"

#include <algorithm>

#include "spec/arch.hpp"

namespace moejit::perf {

CaseResult evaluate_case(const Case& c, const KernelAnalysis& analysis) {
  const KernelSpec& s = c.spec;
  const DeviceProfile& device = *c.profile;
  const store::EntryMeta& meta = analysis.kernel->meta;
  const MainLoopAnalysis& loop = *analysis.loop;
  CaseResult r;

  r.tiles = grouped_gemm_tiles(s, c.rows());
  r.block_threads = meta.block_threads;
  r.dynamic_shared_bytes = meta.dynamic_shared_bytes;
  r.expected_tiles = expected_active_tiles(c.tokens, c.topk(), c.experts(), s.bm);
  r.ctas = static_cast<double>(r.tiles.columns) * r.expected_tiles * r.tiles.splits;
  r.stages_per_cta = static_cast<double>(s.k / s.bk) / std::max<std::uint32_t>(1, r.tiles.splits);
  const std::uint32_t shared_bytes = meta.static_shared_bytes + r.dynamic_shared_bytes;
  r.occupancy = occupancy({meta.registers, r.block_threads, shared_bytes}, device);

  r.format = {s.group_size, s.scale == DType::e8m0 ? 1u : 2u, s.weight == WeightFormat::int4_asym};
  r.stage = stage_hbm_bytes(s.bn, s.bk, r.format);
  const double warps = std::max<std::uint32_t>(1, r.block_threads / 32);
  r.stages_per_iteration = loop.stages;
  r.instructions_per_iteration = static_cast<double>(loop.counts.total);
  r.weight_bytes_per_iteration = loop.stages * r.stage.weight / warps;
  r.scale_zero_bytes_per_iteration = loop.stages * (r.stage.scale + r.stage.zero) / warps;
  r.weight_bytes_per_instruction = r.weight_bytes_per_iteration / r.instructions_per_iteration;
  r.scale_zero_bytes_per_instruction = r.scale_zero_bytes_per_iteration / r.instructions_per_iteration;
  r.bytes_per_instruction = r.weight_bytes_per_instruction + r.scale_zero_bytes_per_instruction;

  BoundInputs in = dispatch::time_inputs_of(device);
  in.bytes_per_warp_instruction = r.bytes_per_instruction;
  in.stage_bytes = r.stage.total();
  in.stages = s.stages;
  in.stages_per_cta = r.stages_per_cta;
  in.split_k = std::max<std::uint32_t>(1, r.tiles.splits);
  // Only the rows that hold a token travel through the split-K workspace: the routed pairs over
  // the tiles with work, at most a tile.
  const double rows_per_tile = static_cast<double>(c.tokens) * c.topk() / std::max(r.expected_tiles, 1.0);
  in.split_partial_bytes = std::clamp(rows_per_tile, 1.0, static_cast<double>(s.bm)) * s.bn * sizeof(float);
  // The fused layer's down projection fetches its first weights before waiting for the gate/up
  // GEMM (programmatic dependent launch, sm_90 and later).
  in.first_ramp_hidden = c.gemm == Gemm::down && arch_info(s.arch).sm >= 90;
  in.warps_per_cta = static_cast<std::uint32_t>(warps);
  in.ctas_per_sm = r.occupancy.ctas_per_sm;
  in.ctas = r.ctas;
  // Every row of a tile goes through the mma's, rows without a token too. mma.sync counts per
  // instruction (the profile's rate says how many an SM completes per clock, whatever their k);
  // wgmma's in m16n8k16 equivalents at the profile's wgmma rate (fp8: twice the MACs each).
  in.mma_per_cta = loop.mma_per_stage * warps * r.stages_per_cta;
  in.mma_per_clock = device.mma_per_clock;
  if (loop.warpgroup_mma) {
    in.mma_per_cta *= loop.mma_macs / loop.rate_macs;
    in.mma_per_clock = device.wgmma_per_clock;
    // The wgmma's take an expert's last tile in quarters, halves or whole: the average tile's
    // share of its rows (the counted loop is the whole tile's).
    if (r.expected_tiles > 0)
      r.mma_row_share = expected_wgmma_rows(c.tokens, c.topk(), c.experts(), s.bm) / (r.expected_tiles * s.bm);
    in.mma_per_cta *= r.mma_row_share;
  }
  r.bounds = predict_bounds(in);

  r.active_experts = expected_active_experts(c.tokens, c.topk(), c.experts());
  r.floor_bytes = r.active_experts * expert_hbm_bytes(s.n, s.k, r.format).total();
  r.floor_seconds = r.floor_bytes / device.memory_bytes_per_s;
  // Against that floor: CTAs that read an expert's weights again (its other row tiles, which
  // are their neighbours in the grid) find them in L2, so DRAM moves each active expert's bytes
  // once, while every CTA's bytes still pass through its SM (the busiest SM's times).
  r.bounds = dispatch::with_floor(r.bounds, r.floor_seconds);
  r.predicted_seconds = r.bounds.fraction > 0 ? r.floor_seconds / r.bounds.fraction : 0;
  if (s.bm >= 64)
    r.mma_share = static_cast<double>(loop.counts.of(InstrClass::mma)) / static_cast<double>(loop.counts.total);
  return r;
}

}  // namespace moejit::perf
