#pragma once
// Arguments of the FP8 activation quantization (moe/quantize.cuh): rows of bf16/f16 values to
// e4m3 with f32 scales, so that value ~= e4m3 * scale. The recipe, for each row (token) or each
// 128 consecutive columns of a row (block128):
//   amax  = max |x| over the group (NaN elements ignored)
//   scale = amax / 448 (f32, rounded to nearest), or 1 when amax is 0
//   q     = e4m3(x / scale): correctly rounded f32 division, then round to nearest even with
//           saturation to +-448 (cvt.rn.satfinite); NaN stays NaN (0x7f)
// A group holding +-inf gets scale inf: its finite values become 0 and the infinities NaN.
// Callers who quantize with this recipe themselves and pass FP8 get the same bytes.

#include "common/types.cuh"

namespace moejit {

struct ActQuantizeParams {
  const void* in;  // [rows][n], act dtype, row stride ld_in elements
  void* out;       // [rows][n] e4m3 bytes, row stride ld_out bytes (16-byte aligned rows)
  float* scales;   // token: scales[row]; block128: scales[row * scale_ld + column / 128]
  i64 ld_in;
  i64 ld_out;
  i64 scale_ld;
  i32 rows;
};

// The largest finite e4m3 value: the recipe's full-scale code.
inline constexpr float kE4m3Max = 448.0f;

}  // namespace moejit
