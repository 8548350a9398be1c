// compressed-tensors pack-quantized tensors (llm-compressor's INT4 export) -> logical / packed
// weights. Both tensors pack along their last dimension, eight nibbles per int32 from the low
// bits up, each value stored + 8: the weights along K, the zero points along N.

#include <vector>

#include "quant/engine_layouts.hpp"
#include "quant/formats.hpp"
#include "quant/pack_core.hpp"

namespace moejit::quant {

namespace {

u8 nibble(i32 word, u64 i) { return static_cast<u8>((static_cast<u32>(word) >> (4 * i)) & 0xF); }

detail::WeightShape shape_of(const CompressedTensorsWeights& w) {
  return {w.symmetric ? WeightFormat::int4_sym : WeightFormat::int4_asym, w.group_size, w.scale_dtype,
          w.experts, w.n, w.k};
}

Status check(const CompressedTensorsWeights& w) {
  MOEJIT_TRY(detail::check_pack_shape(shape_of(w), RowOrder::plain));
  const u64 e = w.experts, n = w.n, k = w.k, groups = w.k / w.group_size;
  if (w.qweight.size() != e * n * (k / 8))
    return error(Code::invalid_argument,
                 "compressed-tensors weight_packed has {} int32: expected E*N*(K/8) = {} (E={}, N={}, K={})",
                 w.qweight.size(), e * n * (k / 8), e, n, k);
  if (w.scales.size() != e * n * groups)
    return error(Code::invalid_argument, "compressed-tensors weight_scale has {} elements: expected E*N*(K/G) = {} (G={})",
                 w.scales.size(), e * n * groups, w.group_size);
  if (w.symmetric && !w.qzeros.empty())
    return error(Code::invalid_argument,
                 "compressed-tensors weight_zero_point given for symmetric weights: expected none (symmetric exports "
                 "drop it), or format int4_asym");
  if (!w.symmetric && w.qzeros.size() != e * (n / 8) * groups)
    return error(Code::invalid_argument,
                 "compressed-tensors weight_zero_point has {} int32: expected E*(N/8)*(K/G) = {} for asymmetric weights",
                 w.qzeros.size(), e * (n / 8) * groups);
  return ok_status();
}

class Loader {
 public:
  explicit Loader(const CompressedTensorsWeights& w)
      : w_(w),
        groups_(w.k / w.group_size),
        codes_(static_cast<u64>(w.n) * w.k),
        zeros_(w.symmetric ? 0 : static_cast<u64>(w.n) * groups_) {}

  Result<detail::ExpertView> operator()(u32 e) {
    const u64 n = w_.n, k = w_.k;
    // Row n of weight_packed is row n of the codes, eight k per word: the logical layout already.
    const i32* packed = w_.qweight.data() + e * n * (k / 8);
    for (u64 i = 0; i < n * k; ++i) codes_[i] = nibble(packed[i / 8], i % 8);
    if (!w_.symmetric) {
      const i32* zp = w_.qzeros.data() + e * (n / 8) * groups_;
      for (u64 col = 0; col < n; ++col)
        for (u64 g = 0; g < groups_; ++g) zeros_[col * groups_ + g] = nibble(zp[(col / 8) * groups_ + g], col % 8);
    }
    // weight_scale [N][K/G] is the logical scale layout: no copy.
    return detail::ExpertView{codes_.data(), w_.scales.data() + e * n * groups_,
                              w_.symmetric ? nullptr : zeros_.data()};
  }

 private:
  const CompressedTensorsWeights& w_;
  u64 groups_;
  std::vector<u8> codes_;
  std::vector<u8> zeros_;
};

}  // namespace

Result<QuantizedWeights> logical_from_compressed_tensors(const CompressedTensorsWeights& weights) {
  MOEJIT_TRY(check(weights));
  Loader loader(weights);
  return detail::gather_experts(shape_of(weights), std::ref(loader));
}

Result<PackedWeights> pack_compressed_tensors(const CompressedTensorsWeights& weights, const PackOptions& options) {
  MOEJIT_TRY(check(weights));
  Loader loader(weights);
  return detail::pack_experts(shape_of(weights), options, std::ref(loader));
}

}  // namespace moejit::quant
