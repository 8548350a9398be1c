// AWQ tensors (interleaved nibble order along N) -> logical / packed weights.
// The order is AutoAWQ's pack order_map [0, 2, 4, 6, 1, 3, 5, 7] (nibble i holds column
// 8c + order[i]); vLLM's AWQ kernels undo it with shifts 4 * [0, 4, 1, 5, 2, 6, 3, 7][j] for
// column 8c + j. Zeros are packed the same way and are the real zero points (no +1 as in GPTQ v1).

#include <vector>

#include "quant/engine_layouts.hpp"
#include "quant/formats.hpp"
#include "quant/pack_core.hpp"

namespace moejit::quant {

namespace {

// The value of column 8c + j of an AWQ word c.
u8 awq_nibble(i32 word, u32 j) {
  return static_cast<u8>((static_cast<u32>(word) >> (4 * kAwqReverseOrder[j])) & 0xF);
}

detail::WeightShape shape_of(const AwqWeights& w) {
  return {WeightFormat::int4_asym, w.group_size, w.scale_dtype, w.experts, w.n, w.k};
}

Status check(const AwqWeights& w) {
  MOEJIT_TRY(detail::check_pack_shape(shape_of(w), RowOrder::plain));
  const u64 e = w.experts, n = w.n, k = w.k, groups = w.k / w.group_size;
  if (w.qweight.size() != e * k * (n / 8))
    return error(Code::invalid_argument, "AWQ qweight has {} int32: expected E*K*(N/8) = {} (E={}, N={}, K={})",
                 w.qweight.size(), e * k * (n / 8), e, n, k);
  if (w.qzeros.size() != e * groups * (n / 8))
    return error(Code::invalid_argument, "AWQ qzeros has {} int32: expected E*(K/G)*(N/8) = {} (G={})",
                 w.qzeros.size(), e * groups * (n / 8), w.group_size);
  if (w.scales.size() != e * groups * n)
    return error(Code::invalid_argument, "AWQ scales has {} elements: expected E*(K/G)*N = {} (G={})",
                 w.scales.size(), e * groups * n, w.group_size);
  return ok_status();
}

class Loader {
 public:
  explicit Loader(const AwqWeights& w)
      : w_(w),
        groups_(w.k / w.group_size),
        codes_(static_cast<u64>(w.n) * w.k),
        scales_(static_cast<u64>(w.n) * groups_),
        zeros_(scales_.size()) {}

  Result<detail::ExpertView> operator()(u32 e) {
    const u64 n = w_.n, k = w_.k, words = n / 8;
    const i32* qweight = w_.qweight.data() + e * k * words;
    for (u64 kk = 0; kk < k; ++kk)
      for (u64 c = 0; c < words; ++c)
        for (u32 j = 0; j < 8; ++j) codes_[(8 * c + j) * k + kk] = awq_nibble(qweight[kk * words + c], j);

    const i32* qzeros = w_.qzeros.data() + e * groups_ * words;
    const u16* scales = w_.scales.data() + e * groups_ * n;
    for (u64 g = 0; g < groups_; ++g) {
      for (u64 c = 0; c < words; ++c)
        for (u32 j = 0; j < 8; ++j) zeros_[(8 * c + j) * groups_ + g] = awq_nibble(qzeros[g * words + c], j);
      for (u64 col = 0; col < n; ++col) scales_[col * groups_ + g] = scales[g * n + col];
    }
    return detail::ExpertView{codes_.data(), scales_.data(), zeros_.data()};
  }

 private:
  const AwqWeights& w_;
  u64 groups_;
  std::vector<u8> codes_;
  std::vector<u16> scales_;
  std::vector<u8> zeros_;
};

}  // namespace

Result<QuantizedWeights> logical_from_awq(const AwqWeights& weights) {
  MOEJIT_TRY(check(weights));
  Loader loader(weights);
  return detail::gather_experts(shape_of(weights), std::ref(loader));
}

Result<PackedWeights> pack_awq(const AwqWeights& weights, const PackOptions& options) {
  MOEJIT_TRY(check(weights));
  Loader loader(weights);
  return detail::pack_experts(shape_of(weights), options, std::ref(loader));
}

}  // namespace moejit::quant
