#pragma once
// Quantizers from f32 weights [E][N][K] (row n is output column n) to the logical 4-bit form.
// They are round-to-nearest quantizers (no calibration data, no error feedback): what tests and
// benchmarks need to make realistic weights, and a reference for what a checkpoint's codes mean.
//
// MXFP4 (OCP MX v1.0 reference rule), per 32 consecutive k of a row:
//   X = floor(log2(amax)) - 2 (2 = the largest E2M1 exponent), clamped to [-127, 127];
//   scale byte = X + 127; code = e2m1_encode(w / 2^X) (round to nearest even, saturate to 6).
//   All-zero block: amax has no log2; the rule's reference code then takes the smallest normal
//   f32 as amax, which clamps to X = -127, so the scale byte is 0x00 and every code is 0 (or 8
//   for -0). A block with a NaN or an infinity gets scale 0xFF (NaN) and codes 0: E8M0 has no
//   infinity, and the NaN marks the whole block as the OCP specification does.
//
// INT4 symmetric, per group: scale = 2 * amax / 15 (GPTQ's symmetric rule: the range is
//   [-amax, amax] mapped onto 16 levels around the fixed zero 8), rounded to bf16/f16;
//   q = clamp(round_half_even(w / scale) + 8, 0, 15). Every |w - dequant| <= scale / 2 except at
//   +amax, where w / scale = 7.5 clamps to 7 (error scale / 2 plus the scale's rounding).
// INT4 asymmetric, per group: lo = min(min w, 0), hi = max(max w, 0) (zero stays exact),
//   scale = (hi - lo) / 15 rounded to bf16/f16, zero = clamp(round_half_even(-lo / scale), 0, 15),
//   q = clamp(round_half_even(w / scale) + zero, 0, 15).
// Both: an all-zero group gets scale 1.0 (exact in both dtypes) and every code at the zero
// point; the codes always use the rounded scale, never the f32 one. A non-finite weight, or a
// scale that overflows or underflows to zero in the scale dtype, is an error naming the group.

#include <span>

#include "quant/quantized_weights.hpp"

namespace moejit::quant {

struct QuantizeOptions {
  WeightFormat format = WeightFormat::none;
  u32 group_size = 0;  // 32 for mxfp4; 32, 64, 128 or K for int4
  DType scale_dtype = DType::none;  // e8m0 for mxfp4; bf16 or f16 for int4
};

// `weights` is [experts][n][k] f32, row-major.
Result<QuantizedWeights> quantize(std::span<const float> weights, u32 experts, u32 n, u32 k,
                                  const QuantizeOptions& options);

}  // namespace moejit::quant
