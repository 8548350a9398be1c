#include "quant/quantized_weights.hpp"

#include "quant/formats.hpp"

namespace moejit::quant {

u8 QuantizedWeights::zero_of(u32 e, u32 row, u32 kk) const {
  if (format == WeightFormat::int4_asym) return zeros[group_index(e, row, kk / group_size)];
  if (format == WeightFormat::int4_sym) return kInt4SymZero;
  return 0;
}

double QuantizedWeights::scale_of(u32 e, u32 row, u32 kk) const {
  return decode_scale(scale_dtype, scales[group_index(e, row, kk / group_size)]);
}

double QuantizedWeights::dequantized(u32 e, u32 row, u32 kk) const {
  const u8 q = codes[code_index(e, row, kk)];
  if (format == WeightFormat::mxfp4) return e2m1_decode(q) * scale_of(e, row, kk);
  return int4_decode(q, zero_of(e, row, kk), scale_of(e, row, kk));
}

Status QuantizedWeights::validate() const {
  MOEJIT_TRY(check_weight_format(format, group_size, scale_dtype, k));
  if (experts == 0 || n == 0)
    return error(Code::invalid_argument, "weights have E = {}, N = {}: expected both positive", experts, n);
  const u64 elements = static_cast<u64>(experts) * n * k;
  const u64 group_count = static_cast<u64>(experts) * n * groups();
  if (codes.size() != elements)
    return error(Code::invalid_argument, "codes has {} elements: expected E*N*K = {} (E={}, N={}, K={})",
                 codes.size(), elements, experts, n, k);
  if (scales.size() != group_count)
    return error(Code::invalid_argument, "scales has {} elements: expected E*N*(K/G) = {}", scales.size(),
                 group_count);
  const u64 expected_zeros = format == WeightFormat::int4_asym ? group_count : 0;
  if (zeros.size() != expected_zeros)
    return error(Code::invalid_argument, "zeros has {} elements: expected {} ({})", zeros.size(), expected_zeros,
                 format == WeightFormat::int4_asym ? "E*N*(K/G)" : "none unless int4_asym");
  for (u64 i = 0; i < codes.size(); ++i)
    if (codes[i] > kInt4Max) return error(Code::invalid_argument, "codes[{}] = {}: expected 0..15", i, codes[i]);
  for (u64 i = 0; i < zeros.size(); ++i)
    if (zeros[i] > kInt4Max) return error(Code::invalid_argument, "zeros[{}] = {}: expected 0..15", i, zeros[i]);
  if (scale_dtype == DType::e8m0)
    for (u64 i = 0; i < scales.size(); ++i)
      if (scales[i] > 0xFF)
        return error(Code::invalid_argument, "scales[{}] = {:#x}: an E8M0 scale is one byte", i, scales[i]);
  return ok_status();
}

QuantizedWeights make_quantized_weights(WeightFormat format, u32 group_size, DType scale_dtype, u32 experts,
                                        u32 n, u32 k) {
  QuantizedWeights w;
  w.format = format;
  w.group_size = group_size;
  w.scale_dtype = scale_dtype;
  w.experts = experts;
  w.n = n;
  w.k = k;
  w.codes.assign(static_cast<u64>(experts) * n * k, 0);
  w.scales.assign(static_cast<u64>(experts) * n * w.groups(), 0);
  if (format == WeightFormat::int4_asym) w.zeros.assign(w.scales.size(), 0);
  return w;
}

}  // namespace moejit::quant
