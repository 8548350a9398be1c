#include "dispatch/tile_configs.hpp"

#include <array>

#include "spec/arch.hpp"

namespace moejit::dispatch {
namespace {

// 16- and 32-row tiles stream weights for decode: 4 warps side by side along N, each owning a
// 32-column packed strip. 64- and 128-row tiles (8 warps, 2 along M) reuse each dequantized
// weight fragment over 2-4 m16 rows for prefill; 4 warps at bm 64 would hold 128 accumulator
// registers per thread and spill on sm_100a. bk 64 with 3-4 stages keeps 12-16 KB of weights
// in flight per block.
constexpr std::array kConfigs = {
    TileConfig{16, 128, 64, 4, 4},
    TileConfig{32, 128, 64, 4, 4},
    TileConfig{64, 128, 64, 3, 8},
    TileConfig{128, 128, 64, 3, 8},
};

}  // namespace

std::span<const TileConfig> gemm_tile_configs(Arch) { return kConfigs; }

TileConfig pick_gemm_tile(Arch arch, std::uint32_t rows_per_expert) {
  auto configs = gemm_tile_configs(arch);
  for (const auto& c : configs)
    if (rows_per_expert <= c.bm) return c;
  return configs.back();
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
