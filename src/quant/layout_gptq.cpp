// GPTQ tensors (v1 / v2 zero points) -> logical / packed weights.

#include <vector>

#include "quant/engine_layouts.hpp"
#include "quant/formats.hpp"
#include "quant/pack_core.hpp"
#include "spec/spec_fields.hpp"

namespace moejit::quant {

namespace {

u8 nibble(i32 word, u32 i) { return static_cast<u8>((static_cast<u32>(word) >> (4 * i)) & 0xF); }

detail::WeightShape shape_of(const GptqWeights& w) {
  return {w.symmetric ? WeightFormat::int4_sym : WeightFormat::int4_asym, w.group_size, w.scale_dtype,
          w.experts, w.n, w.k};
}

Status check(const GptqWeights& w) {
  if (w.desc_act)
    return error(Code::unsupported,
                 "GPTQ act-order (desc_act) checkpoints are not supported: their g_idx permutes K groups; "
                 "re-quantize without act-order");
  if (w.zero_format != GptqZeros::v1 && w.zero_format != GptqZeros::v2)
    return error(Code::invalid_argument, "GPTQ zero_format {}: expected v1 or v2", static_cast<int>(w.zero_format));
  MOEJIT_TRY(detail::check_pack_shape(shape_of(w), RowOrder::plain));
  const u64 e = w.experts, n = w.n, k = w.k, groups = w.k / w.group_size;
  if (w.qweight.size() != e * (k / 8) * n)
    return error(Code::invalid_argument, "GPTQ qweight has {} int32: expected E*(K/8)*N = {} (E={}, N={}, K={})",
                 w.qweight.size(), e * (k / 8) * n, e, n, k);
  if (w.scales.size() != e * groups * n)
    return error(Code::invalid_argument, "GPTQ scales has {} elements: expected E*(K/G)*N = {} (G={})",
                 w.scales.size(), e * groups * n, w.group_size);
  const bool zeros_optional = w.symmetric;
  if (!(zeros_optional && w.qzeros.empty()) && w.qzeros.size() != e * groups * (n / 8))
    return error(Code::invalid_argument, "GPTQ qzeros has {} int32: expected E*(K/G)*(N/8) = {}{}",
                 w.qzeros.size(), e * groups * (n / 8), zeros_optional ? " or none (symmetric)" : "");
  if (!w.g_idx.empty()) {
    if (w.g_idx.size() != k && w.g_idx.size() != e * k)
      return error(Code::invalid_argument, "GPTQ g_idx has {} elements: expected K = {} or E*K = {}",
                   w.g_idx.size(), k, e * k);
    for (u64 i = 0; i < w.g_idx.size(); ++i) {
      const u64 kk = i % k;
      if (w.g_idx[i] != static_cast<i32>(kk / w.group_size))
        return error(Code::unsupported,
                     "GPTQ g_idx[{}] = {} (k = {}): expected {}; act-order (non-trivial g_idx) checkpoints are "
                     "not supported",
                     i, w.g_idx[i], kk, kk / w.group_size);
    }
  }
  return ok_status();
}

class Loader {
 public:
  explicit Loader(const GptqWeights& w)
      : w_(w),
        groups_(w.k / w.group_size),
        codes_(static_cast<u64>(w.n) * w.k),
        scales_(static_cast<u64>(w.n) * groups_),
        zeros_(w.symmetric ? 0 : scales_.size()) {}

  // The word of eight zero points as stored: v1 exporters (AutoGPTQ, GPTQModel) subtract
  // 0x11111111 from the whole 32-bit word, so a zero point of 0 borrows from the nibble above;
  // adding it back word-wise undoes exactly that (mod 2^32), where nibble-wise +1 would not.
  i32 zero_word(i32 stored) const {
    return w_.zero_format == GptqZeros::v1 ? static_cast<i32>(static_cast<u32>(stored) + 0x11111111u) : stored;
  }

  Result<detail::ExpertView> operator()(u32 e) {
    const u64 n = w_.n, k = w_.k;
    const i32* qweight = w_.qweight.data() + e * (k / 8) * n;
    for (u64 r = 0; r < k / 8; ++r)
      for (u64 col = 0; col < n; ++col)
        for (u32 i = 0; i < 8; ++i) codes_[col * k + 8 * r + i] = nibble(qweight[r * n + col], i);

    const u16* scales = w_.scales.data() + e * groups_ * n;
    for (u64 g = 0; g < groups_; ++g)
      for (u64 col = 0; col < n; ++col) scales_[col * groups_ + g] = scales[g * n + col];

    if (!w_.qzeros.empty()) {
      const i32* qzeros = w_.qzeros.data() + e * groups_ * (n / 8);
      for (u64 g = 0; g < groups_; ++g) {
        for (u64 col = 0; col < n; ++col) {
          const u32 zero = nibble(zero_word(qzeros[g * (n / 8) + col / 8]), static_cast<u32>(col % 8));
          if (w_.symmetric && zero != kInt4SymZero)
            return error(Code::invalid_argument,
                         "GPTQ qzeros of expert {}, group {}, column {}: zero point {} ({} word {:#010x}), but a "
                         "symmetric checkpoint has zero point 8 everywhere ({})",
                         e, g, col, zero, w_.zero_format == GptqZeros::v1 ? "v1" : "v2",
                         static_cast<u32>(qzeros[g * (n / 8) + col / 8]),
                         w_.zero_format == GptqZeros::v1 ? "v1 words 0x77777777" : "v2 words 0x88888888");
          if (!w_.symmetric) zeros_[col * groups_ + g] = static_cast<u8>(zero);
        }
      }
    }
    return detail::ExpertView{codes_.data(), scales_.data(), w_.symmetric ? nullptr : zeros_.data()};
  }

 private:
  const GptqWeights& w_;
  u64 groups_;
  std::vector<u8> codes_;
  std::vector<u16> scales_;
  std::vector<u8> zeros_;
};

}  // namespace

Result<QuantizedWeights> logical_from_gptq(const GptqWeights& weights) {
  MOEJIT_TRY(check(weights));
  Loader loader(weights);
  return detail::gather_experts(shape_of(weights), std::ref(loader));
}

Result<PackedWeights> pack_gptq(const GptqWeights& weights, const PackOptions& options) {
  MOEJIT_TRY(check(weights));
  Loader loader(weights);
  return detail::pack_experts(shape_of(weights), options, std::ref(loader));
}

}  // namespace moejit::quant
