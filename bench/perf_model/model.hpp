#pragma once
// The arithmetic of the static performance model (DESIGN §10), with no I/O: how many CTAs fit
// on an SM, how many tiles random routing keeps busy, how many bytes a pipeline stage brings in
// from HBM, and the three bounds on the fraction of the HBM floor a kernel can reach.
// The assumptions behind each formula are listed once, in kAssumptions, for the reports.

#include <cstdint>
#include <span>
#include <string_view>

#include "dispatch/gemm_time_model.hpp"
#include "spec/device_profiles.hpp"

namespace moejit::perf {

// Every assumption the model makes, in words (the JSON's "assumptions" and the README).
std::span<const std::string_view> model_assumptions();

// ---- Occupancy ------------------------------------------------------------------------------

struct KernelResources {
  std::uint32_t registers_per_thread = 0;
  std::uint32_t threads_per_block = 0;
  std::uint32_t shared_bytes_per_block = 0;  // static + dynamic, without the system reserve
};

struct Occupancy {
  std::uint32_t ctas_per_sm = 0;  // 0: one CTA does not fit
  std::uint32_t by_registers = 0, by_shared = 0, by_threads = 0, by_blocks = 0;
  std::uint32_t registers_per_warp = 0;  // as allocated: per-thread count rounded up to 8, x 32
  std::uint32_t shared_per_block = 0;    // with the 1 KB the system reserves per block (sm_80+)
  std::string_view limiter;              // "registers", "shared", "threads" or "blocks"
};

// CTAs of one kernel resident on one SM of `device`.
Occupancy occupancy(const KernelResources& kernel, const DeviceProfile& device);

// ---- Routing --------------------------------------------------------------------------------

// Expected tiles of `bm` rows the indexed layout makes when `tokens` tokens each pick `topk` of
// `experts` experts uniformly at random: expert e's rows r ~ Binomial(tokens, topk / experts),
// it takes ceil(r / bm) tiles, so the expectation is experts * sum_r P(r) ceil(r / bm)
// (= experts * sum_{j >= 0} P(r > j bm)), computed from the binomial as the planner does
// (dispatch::expected_row_tiles).
double expected_active_tiles(std::uint64_t tokens, std::uint32_t topk, std::uint32_t experts, std::uint32_t bm);

// For wgmma tiles of `bm` rows, the rows their wgmma's multiply over all experts, for the same
// routing: each expert's whole tiles and its last tile in quarters, halves or whole
// (dispatch::expected_wgmma_rows); bm * expected_active_tiles counts every row of every tile.
double expected_wgmma_rows(std::uint64_t tokens, std::uint32_t topk, std::uint32_t experts, std::uint32_t bm);

// Expected experts with at least one row: experts * (1 - (1 - topk / experts)^tokens).
double expected_active_experts(std::uint64_t tokens, std::uint32_t topk, std::uint32_t experts);

// ---- Bytes ----------------------------------------------------------------------------------

// The quantized weight format as far as bytes go.
struct FormatBytes {
  std::uint32_t group = 32;        // k elements per scale (and zero point)
  std::uint32_t scale_bytes = 1;   // 1 (e8m0) or 2 (bf16, f16)
  bool zero_points = false;        // int4_asym: one byte per column per group
};

// HBM bytes one pipeline stage of one CTA (bn columns x bk k) must bring in. Where the group is
// shorter than bk a stage reads bk / group scale rows; where it is longer, group / bk stages
// share one row, which HBM delivers once: either way bn * scale_bytes * bk / group per stage.
struct StageBytes {
  double weight = 0, scale = 0, zero = 0;
  double total() const { return weight + scale + zero; }
};
StageBytes stage_hbm_bytes(std::uint32_t bn, std::uint32_t bk, const FormatBytes& format);

// HBM bytes of one expert's N x K weights with their scales and zero points.
StageBytes expert_hbm_bytes(std::uint32_t n, std::uint32_t k, const FormatBytes& format);

// ---- Bounds ---------------------------------------------------------------------------------

// The time model is the library's (src/dispatch/gemm_time_model.hpp), so that what the planner
// chooses by and what this model reports are the same arithmetic; here it is fed the figures
// read from the SASS.
using BoundInputs = dispatch::GemmTimeInputs;
using Bounds = dispatch::GemmTimeEstimate;
using Bound = dispatch::TimeBound;
using dispatch::kSmFillBytesPerClock;
using dispatch::to_string;
inline Bounds predict_bounds(const BoundInputs& in) { return dispatch::estimate_gemm_time(in); }

}  // namespace moejit::perf
