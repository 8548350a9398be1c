#include "dispatch/tile_configs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "dispatch/gemm_time_model.hpp"
#include "gemm/grouped_gemm_params.cuh"
#include "kernels/grouped_gemm.hpp"
#include "spec/arch.hpp"
#include "spec/device_profiles.hpp"

namespace moejit::dispatch {
namespace {

// Decode tiles (16 and 32 rows) stream weights: 4 warps side by side along N, each owning one
// or two 32-column strips. A 16-row tile of 128 columns takes k stages of up to 256: the
// per-stage work outside the dequantization (copies, barrier, addresses) then spreads over
// twice the weights (5.9 weight bytes per warp-instruction on sm_90a against 5.6 with 128);
// with 256 columns such a stage would need 255 registers and spill on sm_120a, so it stays at
// 128. Prefill tiles (64 and 128 rows) reuse each
// dequantized weight over 4 m16 rows per warp; 128 rows split 8 warps 2 x 4 so that the
// accumulators (and the per-group sums of the f32-scaled path) stay in registers.
struct RowsShape {
  std::uint16_t bm, warps;
  std::array<std::uint16_t, 2> bns;     // candidate columns, 0: none
  std::array<std::uint16_t, 2> max_bk;  // the largest k per stage of each
};
constexpr std::array<RowsShape, 4> kRowsShapes = {{
    {16, 4, {256, 128}, {128, 256}},
    {32, 4, {128, 0}, {128, 0}},
    {64, 4, {128, 0}, {64, 0}},
    {128, 8, {128, 0}, {64, 0}},
}};

// plan_depends_on_call's promise: a shape that never splits has a single candidate tile.
static_assert(std::ranges::all_of(kRowsShapes, [](const RowsShape& r) {
  return plan_depends_on_call(r.bm) || r.bns[1] == 0;
}));

const RowsShape& rows_shape(std::uint16_t bm) {
  for (const auto& r : kRowsShapes)
    if (r.bm == bm) return r;
  return kRowsShapes.back();
}

// The tiles on sm_90a's warpgroup MMA (MXFP4, or INT4 with groups of 64 k or more, x bf16/f16;
// either x e4m3 scaled per token (128 or 64 k) or per 128 k; kernels/grouped_gemm.hpp): two
// warpgroups of 64 columns each, every warp dequantizing its 16 columns once per stage for all
// the tile's rows, up to 128 k per stage. The 64-row ones get one stage more than the mma.sync
// tiles, since their copies run one stage less ahead (templates/gemm/grouped_gemm_wgmma.cuh).
// The 128-row ones, whose registers allow one CTA per SM, take as many stages as fit (up to
// kMaxStages): the bytes in flight are that CTA's alone (the e4m3 tile of 64 k per stage, 12.5 KB
// a stage, had 13 KB in flight per SM with 4).
constexpr std::uint16_t kWgmmaWarps = 8;
constexpr int kWgmmaStages = 4;
// A 32-row tile has the wgmma shape only with 128 k per stage: at 64 its every-stage work (copies,
// barrier, fences) leaves 3.6-3.7 weight bytes per warp-instruction against the mma.sync tile's
// 5.0 (sm_90a SASS), while the mma.sync tile's own tensor work is half the taller tiles'.
std::optional<RowsShape> wgmma_shape(std::uint16_t bm, std::uint32_t k, WeightFormat weight, std::uint32_t group,
                                     DType act, ActScale act_scale, Arch arch) {
  const std::uint32_t bk = k % 128 == 0 ? 128 : 64;  // make_tile's (pick_bk of 128)
  if (!gemm_uses_wgmma(arch, weight, act, act_scale, group, bm, 128, bk, kWgmmaWarps, kWgmmaStages, 1))
    return std::nullopt;
  if (bm <= 32 && k % 128 != 0) return std::nullopt;
  return RowsShape{bm, kWgmmaWarps, {128, 0}, {128, 0}};
}

// The shapes a GEMM of `bm` rows and depth `k` may take: the mma.sync one, or where the target
// and formats have one, the wgmma one. 32-row tiles keep both where they cover the rows an
// expert gets (decode: only the mma.sync tiles split K), else take the wgmma one alone, as the
// taller tiles do: the choice is then a function of the spec, not of the call (stand_in_call).
struct RowsShapes {
  std::array<RowsShape, 2> shapes;
  std::size_t count = 0;
};
RowsShapes rows_shapes_for(std::uint16_t bm, std::uint32_t k, WeightFormat weight, std::uint32_t group, DType act,
                           ActScale act_scale, Arch arch, bool covering) {
  const RowsShape& base = rows_shape(bm);
  const std::optional<RowsShape> wgmma = wgmma_shape(base.bm, k, weight, group, act, act_scale, arch);
  if (!wgmma) return {{base, base}, 1};
  if (base.bm <= 32 && covering) return {{base, *wgmma}, 2};
  return {{*wgmma, *wgmma}, 1};
}

// Weight bytes a block should keep in flight (Little's law per block: at ~70 GB/s per block
// and ~0.7 us of memory latency, about 48 KB) when it streams weights.
constexpr std::uint32_t kInflightTarget = 48 * 1024;
constexpr int kMaxStages = 6;

std::uint32_t scale_bytes_of(DType scale) { return scale == DType::e8m0 ? 1 : 2; }

std::uint16_t pick_bk(std::uint32_t k, std::uint16_t max_bk) {
  for (std::uint16_t bk = max_bk; bk >= 32; bk /= 2)
    if (k % bk == 0) return bk;
  return 32;
}

// The tile for (bm, bn) with as many stages as reach the in-flight target (decode) or three
// (prefill), as the target's shared memory allows; stages 0 when even two do not fit.
TileConfig make_tile(const RowsShape& r, std::uint16_t bn, std::uint32_t k, WeightFormat weight, DType scale,
                     std::uint32_t group, DType act, ActScale act_scale, Arch arch) {
  const std::uint16_t max_bk = bn == r.bns[0] ? r.max_bk[0] : r.max_bk[1];
  TileConfig t{r.bm, bn, pick_bk(k, max_bk), 0, r.warps};
  const std::uint32_t stage_weights = static_cast<std::uint32_t>(bn) * t.bk / 2;
  const bool wgmma = gemm_uses_wgmma(arch, weight, act, act_scale, group, t.bm, t.bn, t.bk, t.warps, kWgmmaStages, 1);
  int stages = r.bm <= 32 ? static_cast<int>((kInflightTarget + stage_weights - 1) / stage_weights) + 1
               : wgmma    ? (r.bm >= 128 ? kMaxStages : kWgmmaStages)
                          : 3;
  stages = std::clamp(stages, 2, kMaxStages);
  const std::uint32_t limit = arch_info(arch).max_shared_per_block;
  for (; stages >= 2; --stages) {
    const std::uint32_t bytes = gemm_shared_bytes(t.bm, t.bn, t.bk, static_cast<std::uint32_t>(stages),
                                                  group >= t.bk ? t.bk : group, scale_bytes_of(scale),
                                                  weight == WeightFormat::int4_asym, gemm_act_bits(act), wgmma,
                                                  gemm_stages_row_scales(wgmma, act, act_scale));
    if (bytes <= limit) break;
  }
  t.stages = static_cast<std::uint8_t>(stages >= 2 ? stages : 0);
  return t;
}

// The device the time model assumes: the profile of `arch` with `sms` multiprocessors (the
// default profile with its SM count replaced where none has it).
DeviceProfile planning_device(Arch arch, std::uint32_t sms) {
  if (auto p = device_profile_for(arch, sms)) return *p;
  auto p = default_device_profile(arch);
  if (!p) p = default_device_profile(Arch::sm_90a);
  p->sms = sms;
  return *p;
}

// Blocks of `t` one SM holds at once: shared memory, threads and (an estimate of) registers.
std::uint32_t blocks_per_sm(const TileConfig& t, bool wgmma, std::uint32_t shared_bytes, Arch arch) {
  const auto& a = arch_info(arch);
  const std::uint32_t threads = t.warps * 32u;
  // The wgmma tiles' accumulators are spread over 256 threads: 64 rows fit 128 registers.
  const std::uint32_t registers = t.bm <= (wgmma ? 64 : 32) ? 128 : 224;
  const std::uint32_t by_shared = a.shared_per_sm / (shared_bytes + 1024);
  const std::uint32_t by_threads = a.max_threads_per_sm / threads;
  const std::uint32_t by_registers = 65536 / (registers * threads);
  return std::max(1u, std::min({by_shared, by_threads, by_registers}));
}

// The wgmma tiles: each warp dequantizes 16 columns x BK per stage. With 128 k (1024 bytes) a
// stage takes 206-213 instructions, 32 or 64 rows alike (4.8-5.0 bytes each: the sm_90a SASS
// the performance model reads); with 64 k the copies, barrier and fences weigh twice as much:
// 137-142 instructions for 512 bytes, 32 and 128 rows alike (3.6-3.74; ff4ee92's 64-row tiles,
// which alternated whole stages, had 148-162).
constexpr double kWgmmaBytesPerInstruction = 3.6;
constexpr double kWgmmaBytesPerInstruction128 = 4.8;

// MACs of one mma warp-instruction of the main loop: m16n8k16 (bf16, f16, and e4m3 where the
// target runs it as f16), e4m3 m16n8k32 where it is native, e2m1 m16n8k64 (block-scaled).
double mma_macs_per_instruction(DType act, Arch arch) {
  if (act == DType::e2m1) return 16 * 8 * 64;
  if (act == DType::e4m3 && has_e4m3_mma(arch)) return 16 * 8 * 32;
  return 16 * 8 * 16;
}

// HBM bytes (weights and scales) per main-loop warp-instruction of a 16-row tile. bf16 MXFP4, as
// bench/perf_model measured the sm_90a SASS of commit 3577ca3 (rounded down): 5.5 with 32
// columns per warp and 6.2 with 64 (INT4 g128 alike). The paths that differ by more than a few
// percent, measured at e18fcaf and 7cd9327: f16 activations save INT4 some (1.15); W4A8 MXFP4
// through f16 mma's (sm_90a, sm_100a) converts its activations (0.95); MXFP4 with f16
// activations, packed for f16 since the a16f16 order, costs one operation per word more than
// bf16 (0.95 of its counted bytes per instruction on sm_90a and sm_100a; 0.74 before, when it
// shared bf16's packing and moved the bits per register);
// sm_120a's block-scaled mma's take the E8M0 bytes themselves (absolute, per k tile).
// Keeping the bf16 base as it was matters: raised to what the SASS of 128/256-k tiles shows now
// (6.3-6.5) it makes 128-column tiles look as good as 256-column ones, whose two or three CTAs
// per SM the register estimate of blocks_per_sm does not see (sm_100a's W4A8 kernels use ~200
// registers), and B200's INT4 W4A8 then loses up to 7 points. 32-row tiles do twice the mma per
// weight byte: 0.9 of that base (the SASS of commit 4ca6b91 counts 5.0-5.7 for bf16 MXFP4
// 32x128x128 on sm_90a, 0.7 undercounted them and made the fused layer's rows choice shun
// them). Prefill tiles never split, but the fused layer weighs their rows against a
// half-height tile's (fused_moe_op.cpp), so they are counted as well: the sm_90a SASS of commit
// 4ca6b91 (rounded down) has 64x128x64 at 4.0 HBM bytes per warp-instruction for bf16 MXFP4 and
// 3.0 for INT4 g128, and the 128-row tiles' two warps per column strip halve that.
double estimated_bytes_per_warp_instruction(const TileConfig& t, bool wgmma, const GemmWork& w, Arch arch) {
  if (wgmma) {
    const double base = t.bk >= 128 ? kWgmmaBytesPerInstruction128 : kWgmmaBytesPerInstruction;
    // INT4 adds each finished scale group's sums into the total, BM / 2 FFMA per thread: the
    // MXFP4 base holds one such group per stage (the INT4 g128 128-k stages of 64 rows run
    // 218-233 instructions, 4.4-4.7 bytes each); smaller groups add the rest.
    // e4m3 activations: q - z as e4m3 bytes takes six operations per register of four (the
    // sign apart from the magnitude) where bf16 takes two per pair, and one wgmma per 32 k, not
    // two: INT4 g128 at 64 rows runs 276 instructions per 128-k stage against bf16's 218. MXFP4
    // with its block scales folded into the bytes (a table per column and 32 k, indexed by prmt:
    // 17 operations per word of eight weights) runs 223-229 at 64 and 128 rows (4.5-4.6 bytes
    // each) and 144 per 64-k stage (3.6).
    // e4m3 scaled per 128 k: every run's sums also times their rows' scales, read from shared
    // memory (BM / 8 LDS.64 and BM / 2 FMUL per thread and run), and the stage's copy of them
    // (about 20 more: g128 at 64 rows runs 338 instructions per stage against 276 per token, at
    // 128 rows 412 against 312).
    const double path = w.act != DType::e4m3 ? 1.0 : w.weight == WeightFormat::mxfp4 ? 0.95 : 0.79;
    const std::uint32_t groups_per_stage = w.weight == WeightFormat::mxfp4 ? 1 : gemm_scale_rows(t.bk, w.group_size);
    const double row_scaling =
        gemm_stages_row_scales(wgmma, w.act, w.act_scale) ? groups_per_stage * (t.bm / 2.0 + t.bm / 8.0) + 20.0 : 0.0;
    const double bytes_per_warp = 16.0 * t.bk / 2;  // 16 columns of the stage per warp
    return bytes_per_warp / (bytes_per_warp / (base * path) + (groups_per_stage - 1) * t.bm / 2.0 + row_scaling);
  }
  if (t.bm > 32) {
    const double rows_64 = w.weight == WeightFormat::mxfp4 ? 3.8 : 2.8;
    return t.bm == 64 ? rows_64 : rows_64 / 2;
  }
  const std::uint32_t columns_per_warp = t.bn / std::max<std::uint16_t>(1, t.warps);
  const bool mxfp4 = w.weight == WeightFormat::mxfp4, wide = columns_per_warp >= 64, long_k = t.bk >= 128;
  double decode;
  if (mxfp4 && has_block_scale_mma(arch) && (w.act == DType::e4m3 || w.act == DType::e2m1)) {
    decode = w.act == DType::e2m1 ? (long_k ? 33.7 : 15.1) : (long_k ? 15.7 : 10.3);
  } else {
    const double bf16_mxfp4 = wide ? 6.2 : 5.5;
    double path = 1.0;
    if (mxfp4) path = w.act == DType::f16 || w.act == DType::e4m3 ? 0.95 : 1.0;
    else if (w.weight == WeightFormat::int4_sym && w.act == DType::f16) path = 1.15;
    decode = bf16_mxfp4 * path;
  }
  return t.bm <= 16 ? decode : decode * 0.9;
}

}  // namespace

std::uint16_t pick_block_rows(double rows_per_expert) {
  for (std::uint16_t bm : kGemmBlockRows)
    if (rows_per_expert <= bm) return bm;
  return kGemmBlockRows.back();
}

bool may_split_k(std::uint16_t bm, double rows_per_expert) {
  return plan_depends_on_call(bm) && bm >= pick_block_rows(rows_per_expert);
}

bool plan_fixed_for_rows(std::uint16_t bm, double rows_per_expert) {
  return !may_split_k(bm, rows_per_expert) && rows_shape(bm).bns[1] == 0;
}

double expected_busy_experts(double pairs, std::uint32_t experts, std::uint32_t global_experts, std::uint32_t topk) {
  if (pairs <= 0 || experts == 0) return 0;
  const double global = std::max(global_experts, experts);
  double miss;  // probability that a given expert gets no pair
  if (topk > 0) miss = std::pow(1.0 - std::min(1.0, topk / global), pairs / topk);
  else miss = std::pow(1.0 - 1.0 / global, pairs);
  const double busy = experts * (1.0 - miss);
  return std::clamp(busy, 1.0, static_cast<double>(experts));
}

RoutedRows routed_rows(double pairs, std::uint32_t experts, std::uint32_t global_experts, std::uint32_t topk) {
  RoutedRows r;
  r.busy_experts = expected_busy_experts(pairs, experts, global_experts, topk);
  r.per_busy_expert = pairs * experts / std::max(global_experts, experts) / r.busy_experts;
  return r;
}

namespace {

// experts * E[f(r)] over each local expert's rows r ~ Binomial(pairs / topk tokens, topk /
// global_experts) (topk 0: Binomial(pairs, 1 / global_experts)). Summed over the binomial's mass
// to double precision, without lgamma (the planner asks on its dispatch path): the pmf relative
// to its mode, by the ratio of neighbouring terms, out to where it no longer adds to the sums
// (the normalisation is the sum itself).
template <class F>
double expected_over_expert_rows(double pairs, std::uint32_t experts, std::uint32_t global_experts, std::uint32_t topk,
                                 F&& f) {
  const double global = std::max(global_experts, experts);
  const double n = std::round(topk > 0 ? pairs / topk : pairs);
  const double p = std::min(1.0, topk > 0 ? topk / global : 1.0 / global);
  if (p >= 1 || n < 1) return experts * f(std::max(n, 0.0));
  const double q = 1 - p, mode = std::floor((n + 1) * p);
  constexpr double kNegligible = 1e-18;
  double weight = 0, sum = 0;
  for (double k = mode, w = 1; k <= n && w > kNegligible; ++k) {
    weight += w;
    sum += w * f(k);
    w *= (n - k) / (k + 1) * p / q;
  }
  for (double k = mode - 1, w = mode * q / ((n - mode + 1) * p); k >= 0 && w > kNegligible; --k) {
    weight += w;
    sum += w * f(k);
    w *= k * q / ((n - k + 1) * p);
  }
  return experts * sum / weight;
}

// The rows the wgmma's of an expert's tiles multiply: its whole tiles', and its last tile's
// rows as that tile takes them (wgmma_rows_multiplied).
double wgmma_rows_of_expert(double rows, std::uint16_t bm) {
  const double whole = std::floor(rows / bm);
  return whole * bm + wgmma_rows_multiplied(bm, static_cast<std::uint32_t>(rows - whole * bm));
}

}  // namespace

double expected_row_tiles(double pairs, std::uint32_t experts, std::uint32_t global_experts, std::uint32_t topk,
                          std::uint16_t bm) {
  if (pairs <= 0 || experts == 0 || bm == 0) return 0;
  return expected_over_expert_rows(pairs, experts, global_experts, topk,
                                   [&](double rows) { return std::ceil(rows / bm); });
}

double expected_wgmma_rows(double pairs, std::uint32_t experts, std::uint32_t global_experts, std::uint32_t topk,
                           std::uint16_t bm) {
  if (pairs <= 0 || experts == 0 || bm == 0) return 0;
  return expected_over_expert_rows(pairs, experts, global_experts, topk,
                                   [&](double rows) { return wgmma_rows_of_expert(rows, bm); });
}

namespace {

// For wgmma tiles of `rows` rows, the share of their tiles' rows that the
// tensor cores see: an expert's last tile is multiplied in quarters, halves or whole
// (expected_wgmma_rows), over `expected_tiles` (expected_row_tiles) whole tiles.
double wgmma_rows_share(const GemmWork& w, std::uint16_t rows, double expected_tiles) {
  if (w.routed_pairs > 0)
    return expected_tiles > 0
               ? expected_wgmma_rows(w.routed_pairs, w.experts, w.global_experts, w.topk, rows) / (expected_tiles * rows)
               : 1.0;
  const double per_expert = std::ceil(std::max(w.rows_per_expert, 1.0));
  return wgmma_rows_of_expert(per_expert, rows) / (std::ceil(per_expert / rows) * rows);
}

GemmPlan plan_gemm_uncached(const GemmWork& w, std::uint16_t bm, Arch arch, std::uint32_t sms) {
  const std::uint16_t rows = rows_shape(bm).bm;
  const bool covering = may_split_k(rows, w.rows_per_expert);
  const RowsShapes shapes = rows_shapes_for(rows, w.k, w.weight, w.group_size, w.act, w.act_scale, arch, covering);
  const DeviceProfile device = planning_device(arch, std::max(sms, 1u));
  const double busy = std::max(w.busy_experts, 1.0);
  const double expected_tiles =
      w.routed_pairs > 0 ? expected_row_tiles(w.routed_pairs, w.experts, w.global_experts, w.topk, rows) : 0;
  const double row_tiles = w.routed_pairs > 0 ? std::max(expected_tiles, 1.0)
                                              : busy * std::ceil(std::max(w.rows_per_expert, 1.0) / rows);
  const double wgmma_row_share = wgmma_rows_share(w, rows, expected_tiles);
  const double mma_macs = mma_macs_per_instruction(w.act, arch);

  GemmPlan best{};
  double best_s = std::numeric_limits<double>::infinity();
  for (std::size_t shape_index = 0; shape_index < shapes.count; ++shape_index) {
    const RowsShape& shape = shapes.shapes[shape_index];
    for (std::uint16_t bn : shape.bns) {
      if (bn == 0) continue;
      const TileConfig tile = make_tile(shape, bn, w.k, w.weight, w.scale, w.group_size, w.act, w.act_scale, arch);
      if (tile.stages == 0) continue;
      const std::uint32_t group = w.group_size >= tile.bk ? tile.bk : w.group_size;
      const bool wgmma = gemm_uses_wgmma(arch, w.weight, w.act, w.act_scale, w.group_size, tile.bm, tile.bn, tile.bk,
                                         tile.warps, tile.stages, 1);
      const std::uint32_t shared = gemm_shared_bytes(tile.bm, tile.bn, tile.bk, tile.stages, group,
                                                     scale_bytes_of(w.scale), w.weight == WeightFormat::int4_asym,
                                                     gemm_act_bits(w.act), wgmma,
                                                     gemm_stages_row_scales(wgmma, w.act, w.act_scale));
      GemmTimeInputs in = time_inputs_of(device);
      in.bytes_per_warp_instruction = estimated_bytes_per_warp_instruction(tile, wgmma, w, arch);
      in.stage_bytes = static_cast<double>(bn) * tile.bk / 2 +
                       static_cast<double>(bn) * scale_bytes_of(w.scale) * tile.bk / std::max(w.group_size, 1u);
      in.stages = tile.stages;
      in.warps_per_cta = tile.warps;
      in.ctas_per_sm = blocks_per_sm(tile, wgmma, shared, arch);
      in.first_ramp_hidden = w.first_ramp_hidden && arch_info(arch).sm >= 90;
      // wgmma tiles: their tensor rate, in m16n8k16 equivalents (e4m3 does twice the k in one).
      in.mma_per_clock = wgmma ? device.wgmma_per_clock : device.mma_per_clock;
      const double tile_mma_macs = wgmma ? (w.act == DType::e4m3 ? 16 * 8 * 32 : 16 * 8 * 16) : mma_macs;
      // Only the rows that hold a token travel through the split-K workspace.
      in.split_partial_bytes = std::min<double>(shape.bm, std::max(w.rows_per_expert, 1.0)) * bn * sizeof(float);
      const double column_blocks = std::ceil(static_cast<double>(w.n) / bn);
      const std::uint32_t k_stages = std::max(w.k / tile.bk, 1u);
      // Only decode tiles split K, and only those that cover the rows an expert gets: prefill
      // tiles, and tiles smaller than that, have rows enough to fill the GPU, and the split-K
      // workspace of the fused layer is sized for decode (fused_moe_op.cpp).
      const std::uint32_t max_split = covering && !wgmma ? std::min<std::uint32_t>(k_stages, 64) : 1;
      for (std::uint32_t split = 1; split <= max_split; ++split) {
        const std::uint32_t per_split = (k_stages + split - 1) / split;
        if ((k_stages + per_split - 1) / per_split != split) continue;  // some split would be empty
        in.ctas = column_blocks * row_tiles * split;
        in.stages_per_cta = per_split;
        in.split_k = split;
        in.mma_per_cta = static_cast<double>(tile.bm) * bn * tile.bk * per_split / tile_mma_macs *
                         (wgmma ? wgmma_row_share : 1.0);
        const GemmTimeEstimate e = estimate_gemm_time(in);
        const double s = e.seconds;
        if (s < best_s * (1 - 1e-9)) {
          best_s = s;
          best = {tile, static_cast<std::uint16_t>(split), e.busiest_seconds,
                  busy * column_blocks * k_stages * in.stage_bytes / in.bandwidth};
        }
      }
    }
  }
  if (best.tile.stages == 0) {
    const RowsShape& shape = shapes.shapes[0];
    best.tile = make_tile(shape, shape.bns[0], w.k, w.weight, w.scale, w.group_size, w.act, w.act_scale, arch);
  }
  return best;
}

// The planner runs on every launch; a layer asks the same questions call after call, so each
// thread remembers its last few answers (no allocation, no lock).
struct PlanKey {
  GemmWork work;
  std::uint16_t bm;
  Arch arch;
  std::uint32_t sms;
  bool operator==(const PlanKey& o) const {
    return work.n == o.work.n && work.k == o.work.k && work.group_size == o.work.group_size &&
           work.weight == o.work.weight && work.scale == o.work.scale && work.act == o.work.act &&
           work.act_scale == o.work.act_scale &&
           work.busy_experts == o.work.busy_experts &&
           work.rows_per_expert == o.work.rows_per_expert && work.routed_pairs == o.work.routed_pairs &&
           work.experts == o.work.experts && work.global_experts == o.work.global_experts &&
           work.topk == o.work.topk &&
           work.first_ramp_hidden == o.work.first_ramp_hidden && bm == o.bm && arch == o.arch && sms == o.sms;
  }
};

}  // namespace

GemmPlan plan_gemm(const GemmWork& w, std::uint16_t bm, Arch arch, std::uint32_t sms) {
  // A fused layer's call plans up to 8 GEMMs: its tile rows weigh up to 4 heights x 2 GEMMs
  // (fused_moe_op.cpp, layer_block_rows), and its own 2 are among them. With fewer entries than
  // that the round-robin evicts each plan before the next call asks for it again, and every
  // call plans anew.
  constexpr std::size_t kEntries = 16;
  thread_local std::array<std::pair<PlanKey, GemmPlan>, kEntries> memo{};
  thread_local std::size_t used = 0, next = 0;
  const PlanKey key{w, bm, arch, sms};
  for (std::size_t i = 0; i < used; ++i)
    if (memo[i].first == key) return memo[i].second;
  const GemmPlan plan = plan_gemm_uncached(w, bm, arch, sms);
  memo[next] = {key, plan};
  next = (next + 1) % kEntries;
  used = std::max(used, next == 0 ? kEntries : next);
  return plan;
}

std::vector<TileConfig> gemm_tile_configs(Arch arch, std::uint32_t k, WeightFormat weight, DType scale,
                                          std::uint32_t group_size, DType act, ActScale act_scale) {
  std::vector<TileConfig> out;
  for (const auto& base : kRowsShapes)
    for (bool covering : {true, false}) {
      const RowsShapes shapes = rows_shapes_for(base.bm, k, weight, group_size, act, act_scale, arch, covering);
      for (std::size_t i = 0; i < shapes.count; ++i)
        for (std::uint16_t bn : shapes.shapes[i].bns)
          if (bn != 0) {
            const TileConfig t = make_tile(shapes.shapes[i], bn, k, weight, scale, group_size, act, act_scale, arch);
            if (t.stages != 0 && std::ranges::find(out, t) == out.end()) out.push_back(t);
          }
    }
  return out;
}

KernelSpec with_plan(KernelSpec spec, const GemmPlan& plan) {
  spec = with_tile(spec, plan.tile);
  spec.split_k = static_cast<std::uint8_t>(plan.split_k);  // at most 64 (the planner's bound)
  return spec;
}

KernelSpec with_tile(KernelSpec spec, const TileConfig& tile) {
  spec.bm = tile.bm;
  spec.bn = tile.bn;
  spec.bk = tile.bk;
  spec.stages = tile.stages;
  spec.warps = tile.warps;
  spec.split_k = 1;
  return spec;
}

}  // namespace moejit::dispatch
