// moejit's packed layout -> logical weights: how tests prove that every packer round-trips.
// Written against the same header arithmetic as pack.cpp but walking the other way (from each
// logical element to where the layout puts it), so a mistake in one loop does not cancel out.

#include <cstring>

#include "gemm/grouped_gemm_params.cuh"
#include "quant/formats.hpp"
#include "quant/pack_core.hpp"

namespace moejit::quant {

Result<QuantizedWeights> unpack(const PackedWeights& packed, RowOrder rows) {
  const detail::WeightShape shape{packed.format,  packed.group_size, packed.scale_dtype,
                                  packed.experts, packed.n,          packed.k};
  MOEJIT_TRY(detail::check_pack_shape(shape, rows, packed.order));
  if (packed.act_and_mul != (rows != RowOrder::plain))
    return error(Code::invalid_argument, "rows = {} for {} weights: expected {}", row_order_name(rows),
                 packed.act_and_mul ? "act-and-mul" : "ordinary",
                 packed.act_and_mul ? "concatenated or interleaved" : "plain");
  const u32 groups = packed.groups();
  const u64 group_count = static_cast<u64>(packed.experts) * groups * packed.n;
  const u64 qweight_bytes = packed_weight_bytes(packed.experts, packed.n, packed.k);
  if (packed.qweight.size() != qweight_bytes)
    return error(Code::invalid_argument, "qweight has {} bytes: expected E*N*K/2 = {}", packed.qweight.size(),
                 qweight_bytes);
  const u64 scales_bytes = packed_scale_bytes(packed.format == WeightFormat::mxfp4, packed.experts, packed.n,
                                              packed.k, packed.group_size, scale_bytes(packed.scale_dtype));
  if (packed.scales.size() != scales_bytes)
    return error(Code::invalid_argument, "scales has {} bytes: expected {} (E*(K/G)*N*{}{})", packed.scales.size(),
                 scales_bytes, scale_bytes(packed.scale_dtype),
                 packed.format == WeightFormat::mxfp4 ? ", 16-byte aligned, then 4 per expert" : "");
  const u64 expected_zeros = packed.format == WeightFormat::int4_asym ? group_count : 0;
  if (packed.zeros.size() != expected_zeros)
    return error(Code::invalid_argument, "zeros has {} bytes: expected {}", packed.zeros.size(), expected_zeros);

  QuantizedWeights w = make_quantized_weights(packed.format, packed.group_size, packed.scale_dtype,
                                              packed.experts, packed.n, packed.k);
  // Inverse of packed_k_of for each lane residue t = lane % 4: which element holds k % 32; and
  // where each of its code bits sits in the word.
  u32 lane_t_of[kTileK], element_of[kTileK];
  for (u32 t = 0; t < 4; ++t)
    for (u32 el = 0; el < 8; ++el) {
      const u32 kk = packed_k_of(packed.order, t, el);
      lane_t_of[kk] = t;
      element_of[kk] = el;
    }
  const bool mxfp4 = packed.format == WeightFormat::mxfp4;
  auto code_bit = [&](u32 el, u32 b) { return packed_word_bit(packed.order, mxfp4, el, b); };

  for (u32 e = 0; e < packed.experts; ++e) {
    for (u32 row = 0; row < packed.n; ++row) {
      const u32 column = packed_column_of_row(row, packed.n, rows);
      const u32 nt = column / kTileN, w_index = (column % kTileN) / 8, g = column % 8;
      for (u32 kk = 0; kk < packed.k; ++kk) {
        const u32 kt = kk / kTileK, lane = 4 * g + lane_t_of[kk % kTileK], el = element_of[kk % kTileK];
        const WordPlace place = packed_word_place(packed.order, kt, w_index);
        u32 word;
        std::memcpy(&word, &packed.qweight[packed_tile_offset(e, packed.n, packed.k, nt, place.kt) + 16 * lane + 4 * place.slot], 4);
        u8 code = 0;
        for (u32 b = 0; b < 4; ++b) code |= static_cast<u8>(((word >> code_bit(el, b)) & 1u) << b);
        w.codes[w.code_index(e, row, kk)] = code;
      }
      for (u32 group = 0; group < groups; ++group) {
        const u64 to = w.group_index(e, row, group);
        w.scales[to] = packed.scale_bits(e, group, column);
        if (!w.zeros.empty())
          w.zeros[to] = packed.zeros[scale_index(e, packed.n, packed.k, packed.group_size, column,
                                                 static_cast<u64>(group) * packed.group_size)];
      }
    }
  }
  return w;
}

}  // namespace moejit::quant
