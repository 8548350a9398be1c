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
  MOEJIT_TRY(detail::check_pack_shape(shape, rows));
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
  if (packed.scales.size() != group_count * scale_bytes(packed.scale_dtype))
    return error(Code::invalid_argument, "scales has {} bytes: expected E*(K/G)*N*{} = {}", packed.scales.size(),
                 scale_bytes(packed.scale_dtype), group_count * scale_bytes(packed.scale_dtype));
  const u64 expected_zeros = packed.format == WeightFormat::int4_asym ? group_count : 0;
  if (packed.zeros.size() != expected_zeros)
    return error(Code::invalid_argument, "zeros has {} bytes: expected {}", packed.zeros.size(), expected_zeros);

  QuantizedWeights w = make_quantized_weights(packed.format, packed.group_size, packed.scale_dtype,
                                              packed.experts, packed.n, packed.k);
  const NibbleOrder order =
      packed.format == WeightFormat::mxfp4 ? NibbleOrder::e2m1_pairs_2q : NibbleOrder::int4_pairs_p_p4;
  // Inverse of packed_k_of_nibble for each lane residue t = lane % 4: which nibble holds k % 32.
  u32 lane_t_of[kTileK], nibble_of[kTileK];
  for (u32 t = 0; t < 4; ++t)
    for (u32 p = 0; p < 8; ++p) {
      const u32 kk = packed_k_of_nibble(order, t, p);
      lane_t_of[kk] = t;
      nibble_of[kk] = p;
    }

  for (u32 e = 0; e < packed.experts; ++e) {
    for (u32 row = 0; row < packed.n; ++row) {
      const u32 column = packed_column_of_row(row, packed.n, rows);
      const u32 nt = column / kTileN, w_index = (column % kTileN) / 8, g = column % 8;
      for (u32 kk = 0; kk < packed.k; ++kk) {
        const u32 kt = kk / kTileK, lane = 4 * g + lane_t_of[kk % kTileK], p = nibble_of[kk % kTileK];
        const u64 byte = packed_tile_offset(e, packed.n, packed.k, nt, kt) + 16 * lane + 4 * w_index + p / 2;
        w.codes[w.code_index(e, row, kk)] = static_cast<u8>((packed.qweight[byte] >> (4 * (p % 2))) & 0xF);
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
