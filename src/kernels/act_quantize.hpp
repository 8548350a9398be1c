#pragma once
// The activation quantization (templates/moe/quantize.cuh): rows of bf16/f16 values to e4m3 with
// per-row or per-128-column f32 scales, or to e2m1 with E8M0 scales per 32 columns (block32),
// one block per row. The fused layer runs it on the hidden states (when the caller gives 16-bit
// ones for weights packed for quantized activations) and on the gate/up output before the down
// projection.

#include <cstdint>

#include "kernels/kernel_def.hpp"
#include "kernels/launch_grid.hpp"

namespace moejit {

extern const KernelDef kActQuantizeKernel;

// The longest row one block quantizes: 32 warps, each holding 2048 columns in registers.
inline constexpr std::uint32_t kActQuantizeMaxColumns = 32 * 2048;

// The spec that quantizes rows of `n` `act` values on `arch` / `backend` with `act_scale` scales
// (block32: to e2m1, else to e4m3).
KernelSpec act_quantize_spec(DType act, ActScale act_scale, std::uint32_t n, Arch arch, Backend backend);

LaunchGrid act_quantize_grid(std::int32_t rows);

}  // namespace moejit
