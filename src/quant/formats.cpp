#include "quant/formats.hpp"

#include <array>
#include <cmath>
#include <limits>

#include "common/numeric.cuh"
#include "spec/spec_fields.hpp"

namespace moejit::quant {

namespace {

constexpr std::array<double, 8> kE2m1Magnitudes = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

}  // namespace

double e2m1_decode(u8 code) {
  const double magnitude = kE2m1Magnitudes[code & 0x7];
  return (code & 0x8) ? -magnitude : magnitude;
}

u8 e2m1_encode(double x) {
  if (std::isnan(x)) return 0x7;
  const u8 sign = std::signbit(x) ? 0x8 : 0x0;
  const double a = std::fabs(x);
  if (a >= kE2m1Max) return static_cast<u8>(sign | 0x7);
  // The grid is small enough to search: the first magnitude at or above `a` and the one below it
  // bracket `a`; a tie takes the even code, which is the code with mantissa bit 0.
  u8 hi = 1;
  while (kE2m1Magnitudes[hi] < a) ++hi;
  const u8 lo = static_cast<u8>(hi - 1);
  const double below = a - kE2m1Magnitudes[lo], above = kE2m1Magnitudes[hi] - a;
  u8 code;
  if (below < above) {
    code = lo;
  } else if (above < below) {
    code = hi;
  } else {
    code = (lo % 2 == 0) ? lo : hi;
  }
  return static_cast<u8>(sign | code);
}

double e8m0_decode(u8 s) {
  if (s == kE8m0Nan) return std::numeric_limits<double>::quiet_NaN();
  return std::ldexp(1.0, static_cast<int>(s) - 127);
}

u8 e8m0_encode_exponent(int exponent) {
  if (exponent < kE8m0MinExponent) exponent = kE8m0MinExponent;
  if (exponent > kE8m0MaxExponent) exponent = kE8m0MaxExponent;
  return static_cast<u8>(exponent + 127);
}

std::optional<u8> e8m0_encode_exact(double value) {
  if (std::isnan(value)) return kE8m0Nan;
  if (!(value > 0.0) || std::isinf(value)) return std::nullopt;
  int exponent = 0;
  const double mantissa = std::frexp(value, &exponent);  // value = mantissa * 2^exponent
  if (mantissa != 0.5) return std::nullopt;
  const int e = exponent - 1;
  if (e < kE8m0MinExponent || e > kE8m0MaxExponent) return std::nullopt;
  return static_cast<u8>(e + 127);
}

double round_half_even(double x) {
  // x - floor(x) is exact, unlike floor(x + 0.5), which rounds 0.49999999999999994 up.
  const double r = std::floor(x), fraction = x - r;
  if (fraction > 0.5) return r + 1.0;
  if (fraction < 0.5) return r;
  return std::fmod(r, 2.0) == 0.0 ? r : r + 1.0;
}

u8 int4_encode(double x_over_scale, u8 zero) {
  if (std::isnan(x_over_scale)) return zero;
  const double q = round_half_even(x_over_scale) + static_cast<double>(zero);
  if (q <= 0.0) return 0;
  if (q >= kInt4Max) return kInt4Max;
  return static_cast<u8>(q);
}

Result<u16> encode_scale(DType dtype, float value) {
  switch (dtype) {
    case DType::bf16: return prim::twin::f32_to_bf16(value);
    case DType::f16: return prim::twin::f32_to_f16(value);
    default:
      return error(Code::invalid_argument, "scale dtype '{}' has no f32 rounding rule: expected bf16 or f16",
                   to_string(dtype));
  }
}

double decode_scale(DType dtype, u16 bits) {
  switch (dtype) {
    case DType::e8m0: return e8m0_decode(static_cast<u8>(bits));
    case DType::bf16: return prim::twin::bf16_to_f32(bits);
    case DType::f16: return prim::twin::f16_to_f32(bits);
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

u32 scale_bytes(DType dtype) { return dtype == DType::e8m0 ? 1 : 2; }

Status check_weight_format(WeightFormat format, u32 group_size, DType scale_dtype, u32 k, std::string_view owner) {
  switch (format) {
    case WeightFormat::mxfp4:
      if (group_size != kMxBlock)
        return error(Code::invalid_argument,
                     "argument '{}group_size' = {}: expected 32 for mxfp4 (one E8M0 scale per 32 k)", owner,
                     group_size);
      if (scale_dtype != DType::e8m0)
        return error(Code::invalid_argument, "argument '{}scale_dtype' = {}: expected e8m0 for mxfp4", owner,
                     to_string(scale_dtype));
      break;
    case WeightFormat::int4_sym:
    case WeightFormat::int4_asym:
      if (group_size != 32 && group_size != 64 && group_size != 128 && group_size != k)
        return error(Code::invalid_argument,
                     "argument '{}group_size' = {}: expected 32, 64, 128 or K = {} (per-channel) for {}", owner,
                     group_size, k, to_string(format));
      if (scale_dtype != DType::bf16 && scale_dtype != DType::f16)
        return error(Code::invalid_argument, "argument '{}scale_dtype' = {}: expected bf16 or f16 for {}", owner,
                     to_string(scale_dtype), to_string(format));
      break;
    default:
      return error(Code::invalid_argument, "argument '{}format' = {}: expected mxfp4, int4_sym or int4_asym", owner,
                   to_string(format));
  }
  if (k == 0 || k % group_size != 0)
    return error(Code::invalid_argument, "argument '{}k' = {}: expected a positive multiple of group_size = {}", owner,
                 k, group_size);
  return ok_status();
}

}  // namespace moejit::quant
