#pragma once
// One case through the model: the kernel's real launch geometry and main loop, the routing's
// expected tiles and the device's figures, turned into bytes per warp-instruction, occupancy,
// the three bounds and the predicted fraction of the HBM floor.

#include <optional>

#include "bench/perf_model/cases.hpp"
#include "bench/perf_model/model.hpp"
#include "kernels/grouped_gemm.hpp"

namespace moejit::perf {

struct CaseResult {
  GemmTiles tiles;                      // as the launch would compute them for the case's rows
  std::uint32_t block_threads = 0;      // of the compiled kernel
  std::uint32_t dynamic_shared_bytes = 0;
  double expected_tiles = 0;            // row tiles with work
  double mma_row_share = 1;             // wgmma tiles: the share of their rows the wgmma's multiply
  double ctas = 0;                      // column tiles * expected tiles * split-K
  double stages_per_cta = 0;     // k stages one CTA streams: K / bk / split-K
  Occupancy occupancy;

  FormatBytes format;
  StageBytes stage;                         // HBM bytes of one stage of one CTA
  std::uint32_t stages_per_iteration = 0;   // u
  double instructions_per_iteration = 0;    // of the counted loop, per warp
  double weight_bytes_per_iteration = 0;    // per warp
  double scale_zero_bytes_per_iteration = 0;
  double weight_bytes_per_instruction = 0;
  double scale_zero_bytes_per_instruction = 0;
  double bytes_per_instruction = 0;         // both: what the issue bound uses

  Bounds bounds;

  double active_experts = 0;
  double floor_bytes = 0;
  double floor_seconds = 0;
  double predicted_seconds = 0;
  std::optional<double> mma_share;  // tiles of 64 rows or more: mma / all main-loop instructions
};

// Precondition: analysis.loop has a value.
CaseResult evaluate_case(const Case& c, const KernelAnalysis& analysis);

}  // namespace moejit::perf
