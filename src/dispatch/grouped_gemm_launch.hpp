#pragma once
// Host side of a grouped GEMM launch: checks the run-time arguments against the kernel's spec
// (before anything is launched) and computes the grid, the block and the split-K workspace.

#include <cstdint>

#include "gemm/grouped_gemm_params.cuh"
#include "runtime/launcher.hpp"
#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit::dispatch {

// The tiles of a launch: grid = {column tiles, row tiles, K splits}. The kernel is launched with
// the first two folded into one dimension (grouped_gemm_launch_dims).
struct LaunchShape {
  std::uint32_t grid[3] = {0, 0, 0};  // grid[1] == 0: nothing to compute (M = 0)
  std::uint32_t block_threads = 0;
  std::uint32_t dynamic_shared_bytes = 0;
};

// Grid for `spec` given the run-time row count `m` (GroupedGemmParams::m).
LaunchShape grouped_gemm_launch_shape(const KernelSpec& spec, std::int32_t m);

// The launch of `shape`: x = column tiles x row tiles (column tiles fastest), z = splits; an
// error when the tiles pass the 2^31 - 1 blocks a grid dimension holds.
Result<LaunchDims> grouped_gemm_launch_dims(const LaunchShape& shape);

// Split-K workspace (f32 tiles) and counters the launch needs; 0 when split_k == 1.
std::uint64_t grouped_gemm_workspace_bytes(const KernelSpec& spec, const LaunchShape& shape);
std::uint64_t grouped_gemm_counter_count(const KernelSpec& spec, const LaunchShape& shape);

// Every pointer the spec's layout, format and epilogue need is present and aligned, strides
// fit, M is in range. The message names the argument and what was expected.
Status check_grouped_gemm_params(const KernelSpec& spec, const GroupedGemmParams& p);

}  // namespace moejit::dispatch
