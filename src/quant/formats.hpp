#pragma once
// Scalar encodings of moejit's 4-bit weight formats (templates/README.md, "Number formats"):
// E2M1 elements and E8M0 scales (MXFP4), INT4 codes with a zero point, and bf16/f16 scales.
// Every decode is exact in double, so the fp64 reference and the tests can compare bit for bit.

#include <cstdint>
#include <optional>
#include <string_view>

#include "common/types.cuh"
#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit::quant {

// Elements per E8M0 scale along K (OCP MX block size).
inline constexpr u32 kMxBlock = 32;

// ---- E2M1 ---------------------------------------------------------------------------------
// Largest E2M1 magnitude.
inline constexpr double kE2m1Max = 6.0;

// Value of a 4-bit code (only the low nibble is read): 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6 and
// 8..15 their negations (8 is -0).
double e2m1_decode(u8 code);

// Nearest E2M1 code to x. Ties go to the even code (the one with mantissa bit 0), as
// round-to-nearest-even does on the E2M1 grid: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2,
// 2.5 -> 2, 3.5 -> 4, 5 -> 4. Magnitudes above 6 saturate to 6 (satfinite), so 7 -> 6 although
// it is halfway to the 8 the format cannot hold. The sign is kept, also for results that round to
// zero (-0.1 -> code 8), as a hardware cvt does. E2M1 has no NaN: NaN encodes as +6 like +inf;
// the MXFP4 quantizer never calls this with NaN (it marks such blocks with scale 0xFF instead).
u8 e2m1_encode(double x);

// ---- E8M0 ---------------------------------------------------------------------------------
inline constexpr int kE8m0MinExponent = -127;
inline constexpr int kE8m0MaxExponent = 127;
inline constexpr u8 kE8m0Nan = 0xFF;

// 2^(s - 127). 0x00 is 2^-127, a normal scale per the OCP MX specification (neither zero nor
// flushed: its blocks dequantize to tiny nonzero values). 0xFF is NaN.
double e8m0_decode(u8 s);

// The byte of 2^exponent; exponents outside [-127, 127] clamp to 0x00 / 0xFE, as the MX
// quantization rule does (it never produces 0xFF from a finite block).
u8 e8m0_encode_exponent(int exponent);

// The byte whose value is exactly `value` (0xFF for NaN); nullopt if `value` is not a power of
// two in [2^-127, 2^127].
std::optional<u8> e8m0_encode_exact(double value);

// ---- INT4 ---------------------------------------------------------------------------------
// The zero point of symmetric INT4: w = (q - 8) * scale.
inline constexpr u8 kInt4SymZero = 8;
inline constexpr u8 kInt4Max = 15;

// Round half to even, independent of the floating-point environment's rounding mode (torch.round,
// which GPTQ/AWQ quantizers use, rounds half to even too).
double round_half_even(double x);

// The code q in 0..15 nearest to x / scale + zero, i.e. clamp(round_half_even(x_over_scale) +
// zero, 0, 15). NaN maps to the zero point.
u8 int4_encode(double x_over_scale, u8 zero);

// (q - zero) * scale.
inline double int4_decode(u8 q, u8 zero, double scale) {
  return (static_cast<double>(q & 0xF) - static_cast<double>(zero)) * scale;
}

// ---- Scales -------------------------------------------------------------------------------
// Scale bits are kept as u16 for every scale dtype: an E8M0 byte in the low 8 bits, or bf16/f16.

// f32 -> bf16/f16 bits with round-to-nearest-even (numeric.cuh twins). E8M0 has no rounding
// rule of its own and is rejected here (the MXFP4 quantizer chooses exponents directly).
Result<u16> encode_scale(DType dtype, float value);

// The exact value of scale bits of `dtype` (e8m0, bf16 or f16); NaN for any other dtype.
double decode_scale(DType dtype, u16 bits);

// Bytes of one scale of `dtype` in packed buffers: 1 for e8m0, 2 for bf16/f16.
u32 scale_bytes(DType dtype);

// Checks a weight format description: mxfp4 needs group 32 and e8m0 scales; int4 needs a group
// of 32, 64, 128 or K (per-channel) that divides K, and bf16 or f16 scales. Messages name the
// field under `owner` as the caller spells it ("desc->", "args->w13->"; empty: the bare name)
// and the expected values.
Status check_weight_format(WeightFormat format, u32 group_size, DType scale_dtype, u32 k, std::string_view owner = {});

}  // namespace moejit::quant
