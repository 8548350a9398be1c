#pragma once
// Arguments of the activation quantization (moe/quantize.cuh): rows of bf16/f16 values to e4m3
// with f32 scales (value ~= e4m3 * scale), or to e2m1 with E8M0 scales (MXFP4).
//
// e4m3, for each row (token) or each 128 consecutive columns of a row (block128):
//   amax  = max |x| over the group (NaN elements ignored)
//   scale = amax / 448 (f32, rounded to nearest), or 1 when amax is 0
//   q     = e4m3(x / scale): correctly rounded f32 division, then round to nearest even with
//           saturation to +-448 (cvt.rn.satfinite); NaN stays NaN (0x7f)
// A group holding +-inf gets scale inf: its finite values become 0 and the infinities NaN.
//
// e2m1 (block32), for each 32 consecutive columns of a row:
//   amax  = max |x| over the block
//   scale = 2^e, the smallest power of two with 6 * 2^e >= amax (exact: e = E - 2 when amax's
//           significand is at most 1.5, else E - 1, E its f32 exponent), e clamped to >= -127
//           (byte e + 127; 127, scale 1, when amax is 0). Rounding the scale up means no value
//           saturates (OCP's reference rounds it down, e = E - 2, and clips what exceeds 6).
//   q     = e2m1(x / scale): exact power-of-two division, then round to nearest even
// A block holding NaN or +-inf gets byte 0xFF (NaN): all its values read NaN.
// Codes are packed two per byte, column 2i in the low nibble of byte i.
//
// Callers who quantize with these recipes themselves and pass FP8 / FP4 get the same bytes.

#include "common/types.cuh"

namespace moejit {

struct ActQuantizeParams {
  const void* in;  // [rows][n], act dtype, row stride ld_in elements
  void* out;       // [rows][n] e4m3 bytes or e2m1 nibbles, row stride ld_out bytes (16-byte aligned rows)
  // e4m3: f32, token: scales[row]; block128: scales[row * scale_ld + column / 128].
  // e2m1: E8M0 bytes, block32: scales[row * scale_ld + column / 32].
  void* scales;
  i64 ld_in;
  i64 ld_out;
  i64 scale_ld;
  i32 rows;
};

// The largest finite e4m3 value: the recipe's full-scale code.
inline constexpr float kE4m3Max = 448.0f;

// The E8M0 byte of the e2m1 recipe's scale for a block whose largest magnitude is `amax_bits`
// (f32 bits, sign clear; 0x7f800000 and above: inf or NaN).
constexpr u32 e2m1_block_scale_byte(u32 amax_bits) {
  if (amax_bits >= 0x7f800000u) return 0xffu;
  if (amax_bits == 0) return 127u;
  const u32 field = amax_bits >> 23;  // E + 127 (0 for subnormals: e is then below -127 anyway)
  const u32 drop = (amax_bits & 0x7fffffu) <= 0x400000u ? 2u : 1u;  // significand <= 1.5: e = E - 2
  return field > drop ? field - drop : 0u;
}

}  // namespace moejit
