// Engine layouts -> the whole logical form (tests, the reference), through the same per-expert
// loaders the packers use, so both paths read a checkpoint identically.

#include <algorithm>

#include "quant/pack_core.hpp"

namespace moejit::quant::detail {

Result<QuantizedWeights> gather_experts(const WeightShape& shape, const ExpertLoader& load) {
  QuantizedWeights w =
      make_quantized_weights(shape.format, shape.group_size, shape.scale_dtype, shape.experts, shape.n, shape.k);
  const u64 codes = static_cast<u64>(shape.n) * shape.k, groups = static_cast<u64>(shape.n) * w.groups();
  for (u32 e = 0; e < shape.experts; ++e) {
    MOEJIT_ASSIGN_OR_RETURN(const ExpertView v, load(e));
    std::copy(v.codes, v.codes + codes, w.codes.begin() + static_cast<std::ptrdiff_t>(e * codes));
    std::copy(v.scales, v.scales + groups, w.scales.begin() + static_cast<std::ptrdiff_t>(e * groups));
    if (!w.zeros.empty())
      std::copy(v.zeros, v.zeros + groups, w.zeros.begin() + static_cast<std::ptrdiff_t>(e * groups));
  }
  return w;
}

}  // namespace moejit::quant::detail
