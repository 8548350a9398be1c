#pragma once
// The top-k reduction (templates/moe/reduce.cuh): each token's output row is the sum of its
// pairs' rows in k order. One block per (token, stretch of warps x 32 x 8 columns).

#include <cstdint>

#include "kernels/kernel_def.hpp"
#include "kernels/launch_grid.hpp"

namespace moejit {

extern const KernelDef kMoeReduceKernel;

// Warps per block the fused layer builds the reduction with.
inline constexpr std::uint16_t kMoeReduceWarps = 4;

LaunchGrid moe_reduce_grid(const KernelSpec& spec, std::int32_t tokens);

}  // namespace moejit
