#pragma once
// The grouped-GEMM tile configurations moejit uses, and the rule that picks one from the
// number of rows each expert sees. The set is finite on purpose: it is what warm-up compiles
// and what the compile matrix (tests/test_gemm_compile_matrix.cpp) checks on every target.

#include <cstdint>
#include <span>

#include "spec/kernel_spec.hpp"

namespace moejit::dispatch {

struct TileConfig {
  std::uint16_t bm, bn, bk;
  std::uint8_t stages;
  std::uint16_t warps;
};

// Every configuration the rule below can return for `arch`, smallest bm first.
std::span<const TileConfig> gemm_tile_configs(Arch arch);

// The configuration for about `rows_per_expert` rows (tokens x topk / experts touched):
// the smallest bm that covers them, so decode streams weights with 16-row tiles.
TileConfig pick_gemm_tile(Arch arch, std::uint32_t rows_per_expert);

// `spec` with the tile fields set from `tile` (split_k 1).
KernelSpec with_tile(KernelSpec spec, const TileConfig& tile);

}  // namespace moejit::dispatch
