#pragma once
// The routing-align kernel (templates/moe/align.cuh): buckets (token, k) pairs by local expert
// into blocks of the GEMM's tile rows. One block of `warps` warps does the whole routing.

#include <cstdint>

#include "kernels/kernel_def.hpp"
#include "kernels/launch_grid.hpp"
#include "moe/align_params.cuh"

namespace moejit {

extern const KernelDef kMoeAlignKernel;

// Warps for `experts` buckets on `arch`: as many as fit the block's shared memory, at most 16.
std::uint16_t moe_align_warps(std::uint32_t experts, Arch arch);

// One block aligns every pair.
inline LaunchGrid moe_align_grid() { return {}; }

}  // namespace moejit
