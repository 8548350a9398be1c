#pragma once
// How a grouped GEMM is cut into blocks: the tile (rows, columns, k per stage, stages, warps)
// and the split of K, chosen from the problem and the device's SM count. The rows of a tile
// come from the rows each expert sees (decode streams weights with 16-row tiles); the columns,
// the pipeline depth and the split-K are chosen by a small time model so that every SM has
// enough weight bytes in flight to run at the memory floor (DESIGN §10). The set of tiles is
// finite on purpose: it is what warm-up compiles and what the compile matrix checks.

#include <array>
#include <cstdint>
#include <vector>

#include "spec/kernel_spec.hpp"

namespace moejit::dispatch {

struct TileConfig {
  std::uint16_t bm, bn, bk;
  std::uint8_t stages;
  std::uint16_t warps;
  friend bool operator==(const TileConfig&, const TileConfig&) = default;
};

// The tile rows a layer can use, smallest first; for the indexed layout they are also the
// routing align's block size.
inline constexpr std::array<std::uint16_t, 4> kGemmBlockRows = {16, 32, 64, 128};

// The smallest tile rows that cover `rows_per_expert` (the largest when none does).
std::uint16_t pick_block_rows(double rows_per_expert);

// What the planner knows about one grouped GEMM.
struct GemmWork {
  std::uint32_t n = 0, k = 0, group_size = 0;
  WeightFormat weight = WeightFormat::none;
  DType scale = DType::none;
  DType act = DType::bf16;     // the A operand: bf16, f16, e4m3 or e2m1 (the main loop's cost)
  ActScale act_scale = ActScale::none;  // e4m3 / e2m1: their scales' granularity (which tiles apply)
  double busy_experts = 1;     // experts expected to get rows (at least one)
  double rows_per_expert = 1;  // rows each of them gets, on average
  // Rows routed to the experts at random (the indexed layout): `routed_pairs` (token, expert)
  // pairs, each token picking `topk` of `global_experts`, `experts` of them local. The tiles
  // with work are then counted from the rows' binomial spread (expected_row_tiles), so a tile
  // that merely covers the mean pays for the experts that get more. 0 pairs: every busy expert
  // gets rows_per_expert rows exactly.
  double routed_pairs = 0;
  std::uint32_t experts = 0, global_experts = 0, topk = 0;
  // The first weights are requested before the kernel ahead finishes (programmatic dependent
  // launch, sm_90 and later): the first round's memory latency is hidden.
  bool first_ramp_hidden = false;
};

struct GemmPlan {
  TileConfig tile{};
  std::uint16_t split_k = 1;
  // The time model's estimate for it (gemm_time_model.hpp; the plan is chosen by its seconds,
  // which charge every CTA's bytes at DRAM bandwidth): `sm_seconds` is the busiest SM's time, and
  // `weights_seconds` each busy expert's weights once at DRAM bandwidth, as when the CTAs of an
  // expert's other row tiles (its neighbours in the grid) find them in L2.
  double sm_seconds = 0, weights_seconds = 0;
};

// The tile and split for `work` with tile rows `bm` on a device of `sms` multiprocessors. Only
// tiles of at most kMaxSplitRows rows split K, and only when they cover the mean rows per busy
// expert (bm >= pick_block_rows(rows_per_expert)): smaller tiles are chosen where the rows are
// many (the fused layer's layer_block_rows), and no split-K workspace is sized for them.
inline constexpr std::uint16_t kMaxSplitRows = 32;
// Whether plan_gemm's answer for tile rows `bm` depends on the work's M and routing (and the SM
// count): only tiles that may split K weigh candidates by the time model; a larger tile follows
// from its rows, K, the formats and the target alone.
constexpr bool plan_depends_on_call(std::uint16_t bm) { return bm <= kMaxSplitRows; }
// Whether plan_gemm may split K for tile rows `bm` and work of `rows_per_expert` rows per busy
// expert: decode tiles that cover those rows.
bool may_split_k(std::uint16_t bm, double rows_per_expert);
// Whether plan_gemm's answer for tile rows `bm`, for work of `rows_per_expert` rows per busy
// expert, is the same for every such call: tiles that may not split with one column candidate
// (every tile of more than kMaxSplitRows rows has one).
bool plan_fixed_for_rows(std::uint16_t bm, double rows_per_expert);
GemmPlan plan_gemm(const GemmWork& work, std::uint16_t bm, Arch arch, std::uint32_t sms);

// The tiles plan_gemm may return for a GEMM of k `k`, weight format `weight` and activations
// `act` scaled by `act_scale` on `arch` (every bm, bn and stage count it considers), for the
// compile matrix.
std::vector<TileConfig> gemm_tile_configs(Arch arch, std::uint32_t k, WeightFormat weight, DType scale,
                                          std::uint32_t group_size, DType act = DType::bf16,
                                          ActScale act_scale = ActScale::none);

// `spec` with the tile fields and split set.
KernelSpec with_plan(KernelSpec spec, const GemmPlan& plan);
// `spec` with the tile fields set from `tile` (split_k 1).
KernelSpec with_tile(KernelSpec spec, const TileConfig& tile);

// Experts among `experts` that `pairs` routed (token, expert) pairs touch on average when each
// token picks `topk` distinct experts out of `global_experts` uniformly (expert parallelism:
// `experts` of them are local). topk 0: pairs land independently.
double expected_busy_experts(double pairs, std::uint32_t experts, std::uint32_t global_experts, std::uint32_t topk);

// Those busy experts, and the rows each gets on average (the local share of the pairs over
// them): what the indexed grouped GEMM plans from and what the fused layer's tile rows start
// from, one computation so that both see the same rows to the last bit.
struct RoutedRows {
  double busy_experts = 0, per_busy_expert = 0;
};
RoutedRows routed_rows(double pairs, std::uint32_t experts, std::uint32_t global_experts, std::uint32_t topk);

// Tiles of `bm` rows with work that the indexed layout makes among `experts` local experts, on
// average, for the routing of expected_busy_experts: each expert's rows r ~ Binomial(pairs /
// topk tokens, topk / global_experts) (topk 0: Binomial(pairs, 1 / global_experts)), and it takes
// ceil(r / bm) tiles. Summed over the binomial's mass to double precision, without lgamma (the
// planner asks on its dispatch path).
double expected_row_tiles(double pairs, std::uint32_t experts, std::uint32_t global_experts, std::uint32_t topk,
                          std::uint16_t bm);
// The rows the wgmma tiles of `bm` rows multiply for that routing, summed over the experts:
// each expert's whole tiles, and its last one's rows in quarters, halves or the whole tile
// (wgmma_rows_multiplied), where bm * expected_row_tiles counts every row of every
// tile.
double expected_wgmma_rows(double pairs, std::uint32_t experts, std::uint32_t global_experts, std::uint32_t topk,
                           std::uint16_t bm);

}  // namespace moejit::dispatch
