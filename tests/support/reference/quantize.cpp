#include "reference/quantize.hpp"

#include <algorithm>
#include <cmath>

#include "quant/formats.hpp"
#include "spec/spec_fields.hpp"

namespace moejit::quant {

namespace {

// Codes and scale of one 32-element MXFP4 block.
void quantize_mx_block(const float* w, u8* codes, u16* scale) {
  float amax = 0.0f;
  bool finite = true;
  for (u32 i = 0; i < kMxBlock; ++i) {
    if (!std::isfinite(w[i])) finite = false;
    amax = std::max(amax, std::fabs(w[i]));
  }
  if (!finite) {
    *scale = kE8m0Nan;
    std::fill(codes, codes + kMxBlock, u8{0});
    return;
  }
  int exponent = kE8m0MinExponent;
  if (amax > 0.0f) {
    int e = 0;
    std::frexp(amax, &e);  // amax = m * 2^e with m in [0.5, 1): floor(log2(amax)) = e - 1
    exponent = std::clamp(e - 1 - 2, kE8m0MinExponent, kE8m0MaxExponent);
  }
  const u8 byte = e8m0_encode_exponent(exponent);
  *scale = byte;
  // Dividing by a power of two is exact in double, so the only rounding is E2M1's own.
  const double inverse = std::ldexp(1.0, -exponent);
  for (u32 i = 0; i < kMxBlock; ++i) codes[i] = e2m1_encode(static_cast<double>(w[i]) * inverse);
}

// Codes, scale and zero of one INT4 group; `zero` is null for the symmetric format.
Status quantize_int4_group(const float* w, u32 size, DType scale_dtype, u8* codes, u16* scale, u8* zero,
                           u32 e, u32 row, u32 group) {
  float lo = 0.0f, hi = 0.0f;
  for (u32 i = 0; i < size; ++i) {
    if (!std::isfinite(w[i]))
      return error(Code::invalid_argument,
                   "weights[{}][{}][{}] = {} is not finite: INT4 has no code for it", e, row,
                   static_cast<u64>(group) * size + i, w[i]);
    lo = std::min(lo, w[i]);
    hi = std::max(hi, w[i]);
  }
  float f32_scale;
  if (zero == nullptr) {
    const float amax = std::max(-lo, hi);
    f32_scale = static_cast<float>(2.0 * amax / 15.0);
  } else {
    f32_scale = static_cast<float>((static_cast<double>(hi) - lo) / 15.0);
  }
  if (lo == 0.0f && hi == 0.0f) f32_scale = 1.0f;
  MOEJIT_ASSIGN_OR_RETURN(const u16 bits, encode_scale(scale_dtype, f32_scale));
  const double s = decode_scale(scale_dtype, bits);
  if (!std::isfinite(s) || s == 0.0)
    return error(Code::invalid_argument,
                 "group {} of weights[{}][{}]: scale {} is {} in {} (range [{}, {}])", group, e, row, f32_scale,
                 s == 0.0 ? "zero" : "not finite", to_string(scale_dtype), lo, hi);
  *scale = bits;
  u8 z = kInt4SymZero;
  if (zero != nullptr) {
    const double rounded = round_half_even(-static_cast<double>(lo) / s);
    z = static_cast<u8>(std::clamp(rounded, 0.0, static_cast<double>(kInt4Max)));
    *zero = z;
  }
  for (u32 i = 0; i < size; ++i) codes[i] = int4_encode(static_cast<double>(w[i]) / s, z);
  return ok_status();
}

}  // namespace

Result<QuantizedWeights> quantize(std::span<const float> weights, u32 experts, u32 n, u32 k,
                                  const QuantizeOptions& options) {
  MOEJIT_TRY(check_weight_format(options.format, options.group_size, options.scale_dtype, k));
  if (experts == 0 || n == 0)
    return error(Code::invalid_argument, "E = {}, N = {}: expected both positive", experts, n);
  const u64 elements = static_cast<u64>(experts) * n * k;
  if (weights.size() != elements)
    return error(Code::invalid_argument, "weights has {} elements: expected E*N*K = {} (E={}, N={}, K={})",
                 weights.size(), elements, experts, n, k);

  QuantizedWeights q = make_quantized_weights(options.format, options.group_size, options.scale_dtype,
                                              experts, n, k);
  const u32 g = options.group_size, groups = q.groups();
  for (u32 e = 0; e < experts; ++e) {
    for (u32 row = 0; row < n; ++row) {
      for (u32 group = 0; group < groups; ++group) {
        const u64 at = q.code_index(e, row, group * g);
        const u64 gi = q.group_index(e, row, group);
        if (options.format == WeightFormat::mxfp4) {
          quantize_mx_block(&weights[at], &q.codes[at], &q.scales[gi]);
        } else {
          u8* zero = options.format == WeightFormat::int4_asym ? &q.zeros[gi] : nullptr;
          MOEJIT_TRY(quantize_int4_group(&weights[at], g, options.scale_dtype, &q.codes[at], &q.scales[gi],
                                         zero, e, row, group));
        }
      }
    }
  }
  return q;
}

}  // namespace moejit::quant
