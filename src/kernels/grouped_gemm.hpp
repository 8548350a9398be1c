#pragma once
// The grouped GEMM kernel (templates/gemm/grouped_gemm.cuh): its definition (fields, template
// constraints, constants, block size, shared memory), the tiles and grid of a launch, the
// split-K workspace it needs, and the checks of its run-time arguments. The choice of tile for a
// problem is dispatch policy (dispatch/tile_configs, dispatch/grouped_gemm_op).

#include <cstdint>
#include <string_view>

#include "gemm/grouped_gemm_params.cuh"
#include "kernels/kernel_def.hpp"
#include "kernels/launch_grid.hpp"

namespace moejit {

extern const KernelDef kGroupedGemmKernel;

// Whether the spec's tile runs on sm_90a's warpgroup MMA (templates/gemm/grouped_gemm_wgmma.cuh):
// bf16/f16 activations with MXFP4 weights or INT4 weights with scale groups of 64 k or more
// (`group`: the spec's, K for per-channel scales); or e4m3 activations scaled per token or per
// 128 k with such INT4 weights and bk 128. bm 32, 64 or 128, bn 128, bk 64 or 128, 8 warps, 3+
// stages, no split-K. MXFP4 experts whose scale bytes cannot be folded into the fragments take
// the mma.sync path of the same kernel.
bool gemm_uses_wgmma(const KernelSpec& spec);
bool gemm_uses_wgmma(Arch arch, WeightFormat weight, DType act, ActScale act_scale, std::uint32_t group,
                     std::uint32_t bm, std::uint32_t bn, std::uint32_t bk, std::uint32_t warps, std::uint32_t stages,
                     std::uint32_t split_k);
// The rows a wgmma tile of `bm` rows multiplies when `rows` of them (up to its last with a
// token) are used: the shortest of bm / 4, bm / 2 and bm that covers them (0 for none), as
// run_tile_wgmma picks its wgmma's N.
constexpr std::uint32_t wgmma_rows_multiplied(std::uint32_t bm, std::uint32_t rows) {
  if (rows == 0) return 0;
  if (rows <= bm / 4) return bm / 4;
  return rows <= bm / 2 ? bm / 2 : bm;
}
// Bits of one A element in a stage's shared memory (the `act_bits` of gemm_shared_bytes): 16
// for bf16/f16, 8 for e4m3, 4 for e2m1.
std::uint32_t gemm_act_bits(DType act);
// Whether each pipeline stage also holds the f32 scale of every row for its k (the `row_scales`
// of gemm_shared_bytes): the wgmma tiles (`wgmma`) with e4m3 activations scaled per 128 k.
bool gemm_stages_row_scales(bool wgmma, DType act, ActScale act_scale);

// The output tiles of a launch for the run-time row count `m` (GroupedGemmParams::m): column
// tiles, row tiles (the most the layout can need for m rows; 0 when m = 0) and K splits.
struct GemmTiles {
  std::uint32_t columns = 0, rows = 0, splits = 0;
};
GemmTiles grouped_gemm_tiles(const KernelSpec& spec, std::int32_t m);

// The grid of `tiles`: x = column tiles x row tiles (column tiles fastest, as the kernel decodes
// blockIdx.x), z = splits; an error past the 2^31 - 1 blocks a grid dimension holds.
Result<LaunchGrid> grouped_gemm_grid(const GemmTiles& tiles);

// Split-K partial sums (split_k f32 tiles per output tile) and counters (one u32 per output tile) a
// launch needs; 0 when split_k == 1.
std::uint64_t grouped_gemm_counter_count(const KernelSpec& spec, const GemmTiles& tiles);
std::uint64_t grouped_gemm_partial_bytes(const KernelSpec& spec, const GemmTiles& tiles);

// The kernel computes element offsets row x stride in 64 bits: `stride` (argument `name`) over
// `count` rows (or blocks, experts: `counted`) must keep the last one's offset below 2^60
// elements, which no buffer reaches, so that no product wraps in the checks or the kernel.
Status check_offset_stride(std::string_view name, std::int64_t stride, std::int64_t count, std::string_view counted);

// Every pointer the spec's layout, format and epilogue need is present and aligned, strides
// fit, M is in range. The message names the argument and what was expected.
Status check_grouped_gemm_params(const KernelSpec& spec, const GroupedGemmParams& p);

}  // namespace moejit
