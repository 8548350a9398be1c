#pragma once
// Internal to src/quant: the one routine that writes moejit's packed layout, fed one expert at a
// time, so that packers from engine layouts never hold a whole model in logical form (a
// DeepSeek-size w13 is billions of codes).

#include <functional>

#include "quant/pack.hpp"

namespace moejit::quant::detail {

// One expert's logical tensors, rows in the source order: codes [N][K], scales [N][K/G],
// zeros [N][K/G] (int4_asym only, else null).
struct ExpertView {
  const u8* codes = nullptr;
  const u16* scales = nullptr;
  const u8* zeros = nullptr;
};

// Loads expert `e` into scratch the loader owns; the view must stay valid until the next call.
using ExpertLoader = std::function<Result<ExpertView>(u32 e)>;

// The description every packer checks first (declared in pack.hpp, where the pack op sees it too).
using quant::check_pack_shape;
using quant::WeightShape;

// Packs every expert of `load` (shape checked first, then the bias size).
Result<PackedWeights> pack_experts(const WeightShape& shape, const PackOptions& options, const ExpertLoader& load);

// The logical weights of every expert of `load`, for the engine-layout converters.
Result<QuantizedWeights> gather_experts(const WeightShape& shape, const ExpertLoader& load);

}  // namespace moejit::quant::detail
