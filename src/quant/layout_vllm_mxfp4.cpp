// vLLM / gpt-oss MXFP4 tensors -> logical / packed weights.

#include <vector>

#include "quant/engine_layouts.hpp"
#include "quant/formats.hpp"
#include "quant/pack_core.hpp"

namespace moejit::quant {

namespace {

detail::WeightShape shape_of(const VllmMxfp4Weights& w) {
  return {WeightFormat::mxfp4, kMxBlock, DType::e8m0, w.experts, w.n, w.k};
}

Status check(const VllmMxfp4Weights& w) {
  MOEJIT_TRY(detail::check_pack_shape(shape_of(w), RowOrder::plain));
  const u64 blocks = static_cast<u64>(w.experts) * w.n * (w.k / 2);
  const u64 scales = static_cast<u64>(w.experts) * w.n * (w.k / kMxBlock);
  if (w.blocks.size() != blocks)
    return error(Code::invalid_argument, "mxfp4 blocks has {} bytes: expected E*N*K/2 = {} (E={}, N={}, K={})",
                 w.blocks.size(), blocks, w.experts, w.n, w.k);
  if (w.scales.size() != scales)
    return error(Code::invalid_argument, "mxfp4 scales has {} bytes: expected E*N*K/32 = {} (E={}, N={}, K={})",
                 w.scales.size(), scales, w.experts, w.n, w.k);
  return ok_status();
}

// Unpacks one expert into scratch tensors it owns.
class Loader {
 public:
  explicit Loader(const VllmMxfp4Weights& w)
      : w_(w), codes_(static_cast<u64>(w.n) * w.k), scales_(static_cast<u64>(w.n) * (w.k / kMxBlock)) {}

  Result<detail::ExpertView> operator()(u32 e) {
    const u64 row_bytes = w_.k / 2, code_count = codes_.size();
    const u8* src = w_.blocks.data() + e * (static_cast<u64>(w_.n) * row_bytes);
    for (u64 i = 0; i < code_count / 2; ++i) {
      codes_[2 * i] = static_cast<u8>(src[i] & 0xF);
      codes_[2 * i + 1] = static_cast<u8>(src[i] >> 4);
    }
    const u8* s = w_.scales.data() + e * scales_.size();
    for (u64 i = 0; i < scales_.size(); ++i) scales_[i] = s[i];
    return detail::ExpertView{codes_.data(), scales_.data(), nullptr};
  }

 private:
  const VllmMxfp4Weights& w_;
  std::vector<u8> codes_;
  std::vector<u16> scales_;
};

}  // namespace

Result<QuantizedWeights> logical_from_vllm_mxfp4(const VllmMxfp4Weights& weights) {
  MOEJIT_TRY(check(weights));
  Loader loader(weights);
  return detail::gather_experts(shape_of(weights), std::ref(loader));
}

Result<PackedWeights> pack_vllm_mxfp4(const VllmMxfp4Weights& weights, const PackOptions& options) {
  MOEJIT_TRY(check(weights));
  Loader loader(weights);
  return detail::pack_experts(shape_of(weights), options, std::ref(loader));
}

}  // namespace moejit::quant
