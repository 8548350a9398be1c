// Logical weights -> moejit's packed layout.

#include <algorithm>
#include <bit>
#include <cstring>

#include "gemm/grouped_gemm_params.cuh"
#include "quant/formats.hpp"
#include "quant/pack_core.hpp"
#include "spec/spec_fields.hpp"

namespace moejit::quant {

// Tile words and bf16/f16 scales are written in host byte order and copied to the device as is.
static_assert(std::endian::native == std::endian::little, "the packed layout is little-endian, as GPUs are");

u16 PackedWeights::scale_bits(u32 e, u32 group, u32 column) const {
  const u64 at = scale_index(e, n, k, group_size, column, static_cast<u64>(group) * group_size);
  if (scale_dtype == DType::e8m0) return scales[at];
  u16 bits;
  std::memcpy(&bits, &scales[at * 2], 2);
  return bits;
}

Status check_packed_extents(u32 experts, u32 n, u32 k, std::string_view owner) {
  if (experts == 0 || experts > kMaxExperts)
    return error(Code::invalid_argument, "argument '{}experts' = {}: expected 1 to {} (the experts one launch serves)",
                 owner, experts, kMaxExperts);
  if (n == 0 || n % kTileN != 0 || n > kMaxPackedExtent)
    return error(Code::invalid_argument,
                 "argument '{}n' = {}: expected a positive multiple of {} (the packed tile width) of at most {}", owner,
                 n, kTileN, kMaxPackedExtent);
  if (k == 0 || k % kTileK != 0 || k > kMaxPackedExtent)
    return error(Code::invalid_argument,
                 "argument '{}k' = {}: expected a positive multiple of {} (the packed tile depth) of at most {}", owner,
                 k, kTileK, kMaxPackedExtent);
  if (const u64 bytes = packed_weight_bytes(1, n, k); bytes > kMaxExpertPackedBytes)
    return error(Code::invalid_argument,
                 "arguments '{}n' = {} and '{}k' = {}: one expert's packed weights would be {} bytes; expected at most "
                 "{} (moejit's bound on one expert)",
                 owner, n, owner, k, bytes, kMaxExpertPackedBytes);
  return ok_status();
}

Status check_pack_shape(const WeightShape& shape, RowOrder rows, PackedOrder order, std::string_view owner) {
  MOEJIT_TRY(check_packed_extents(shape.experts, shape.n, shape.k, owner));
  MOEJIT_TRY(check_weight_format(shape.format, shape.group_size, shape.scale_dtype, shape.k, owner));
  if (rows != RowOrder::plain && rows != RowOrder::concatenated && rows != RowOrder::interleaved)
    return error(Code::invalid_argument, "rows = {}: expected plain, concatenated or interleaved",
                 static_cast<int>(rows));
  if (order != PackedOrder::a16 && order != PackedOrder::a8 && order != PackedOrder::a4 && order != PackedOrder::a16f16)
    return error(Code::invalid_argument,
                 "order = {}: expected a16 (16-bit activations), a16f16 (f16 activations, mxfp4), a8 (e4m3 "
                 "activations) or a4 (e2m1 activations)",
                 static_cast<u32>(order));
  if (order == PackedOrder::a16f16 && shape.format != WeightFormat::mxfp4)
    return error(Code::invalid_argument,
                 "order a16f16 (f16 activations) with {} weights: expected mxfp4 (int4 weights use a16 for bf16 "
                 "and f16 activations alike)",
                 to_string(shape.format));
  if (order == PackedOrder::a4 && shape.format != WeightFormat::mxfp4)
    return error(Code::invalid_argument,
                 "order a4 (e2m1 activations) with {} weights: expected mxfp4 (the mma takes e2m1 x e2m1)",
                 to_string(shape.format));
  if (order == PackedOrder::a4 && shape.k % 64 != 0)
    return error(Code::invalid_argument,
                 "argument '{}k' = {} with order a4 (e2m1 activations): expected a multiple of 64 (its tiles pair up "
                 "per 64 k)",
                 owner, shape.k);
  return ok_status();
}

namespace detail {

namespace {

// MXFP4: gives every block whose codes are all zero (+0 or -0) and whose scale is finite the
// expert's largest finite scale byte (127 if it has none), so that such blocks, zero whatever
// their scale, never widen the expert's range; returns the range (smallest | largest << 8) over
// the other blocks (127 | 127 << 8 when there are none). A NaN scale (0xFF) is kept, and makes
// the largest 0xFF.
u32 canonicalize_mxfp4_scales(const WeightShape& s, const ExpertView& v, std::vector<u8>& expert_scales) {
  const u32 groups = s.k / 32;
  auto zero_block = [&](u32 row, u32 group) {
    const u8* codes = v.codes + static_cast<u64>(row) * s.k + 32 * group;
    for (u32 i = 0; i < 32; ++i)
      if ((codes[i] & 0x7) != 0) return false;
    return true;
  };
  auto canonical = [&](u32 row, u32 group) {
    return expert_scales[static_cast<u64>(row) * groups + group] != 0xff && zero_block(row, group);
  };
  u32 smallest = 0xff, largest = 0, largest_finite = 0;
  bool any = false, any_finite = false;
  for (u32 row = 0; row < s.n; ++row)
    for (u32 group = 0; group < groups; ++group) {
      if (canonical(row, group)) continue;
      const u8 byte = expert_scales[static_cast<u64>(row) * groups + group];
      any = true;
      smallest = std::min<u32>(smallest, byte);
      largest = std::max<u32>(largest, byte);
      if (byte != 0xff) {
        any_finite = true;
        largest_finite = std::max<u32>(largest_finite, byte);
      }
    }
  const u8 fill = static_cast<u8>(any_finite ? largest_finite : 127);
  for (u32 row = 0; row < s.n; ++row)
    for (u32 group = 0; group < groups; ++group)
      if (canonical(row, group)) expert_scales[static_cast<u64>(row) * groups + group] = fill;
  if (!any) smallest = largest = 127;
  return smallest | largest << 8;
}

// Writes expert `e` of `out` from one expert's logical tensors.
void pack_expert(const WeightShape& s, const std::vector<u32>& row_of_column, const ExpertView& v, u32 e,
                 PackedWeights& out) {
  u32 k_of[32][8], bit_of[8][4];
  for (u32 lane = 0; lane < 32; ++lane)
    for (u32 el = 0; el < 8; ++el) k_of[lane][el] = packed_k_of(out.order, lane, el);
  for (u32 el = 0; el < 8; ++el)
    for (u32 b = 0; b < 4; ++b) bit_of[el][b] = packed_word_bit(out.order, s.format == WeightFormat::mxfp4, el, b);

  for (u32 nt = 0; nt < s.n / kTileN; ++nt) {
    for (u32 kt = 0; kt < s.k / kTileK; ++kt) {
      for (u32 lane = 0; lane < 32; ++lane) {
        for (u32 w = 0; w < 4; ++w) {
          const WordPlace place = packed_word_place(out.order, kt, w);
          u8* tile = out.qweight.data() + packed_tile_offset(e, s.n, s.k, nt, place.kt);
          const u32 column = kTileN * nt + 8 * w + lane / 4;
          const u8* src = v.codes + static_cast<u64>(row_of_column[column]) * s.k + kTileK * kt;
          u32 word = 0;
          for (u32 el = 0; el < 8; ++el) {
            const u32 code = src[k_of[lane][el]] & 0xF;
            for (u32 b = 0; b < 4; ++b) word |= ((code >> b) & 1u) << bit_of[el][b];
          }
          std::memcpy(tile + 16 * lane + 4 * place.slot, &word, 4);
        }
      }
    }
  }

  const u32 groups = s.k / s.group_size, bytes = scale_bytes(s.scale_dtype);
  std::vector<u8> e8m0;  // MXFP4: the expert's scale bytes, canonicalized
  const u16* scales = v.scales;
  if (s.format == WeightFormat::mxfp4) {
    e8m0.resize(static_cast<u64>(s.n) * groups);
    for (std::size_t i = 0; i < e8m0.size(); ++i) e8m0[i] = static_cast<u8>(v.scales[i]);
    const u32 range = canonicalize_mxfp4_scales(s, v, e8m0) | packed_order_mark(out.order);
    std::memcpy(&out.scales[mxfp4_scale_range_offset(s.experts, s.n, s.k) + 4 * static_cast<u64>(e)], &range, 4);
  }
  for (u32 g = 0; g < groups; ++g) {
    for (u32 column = 0; column < s.n; ++column) {
      const u64 from = static_cast<u64>(row_of_column[column]) * groups + g;
      const u64 to = scale_index(e, s.n, s.k, s.group_size, column, static_cast<u64>(g) * s.group_size);
      if (s.format == WeightFormat::mxfp4) out.scales[to] = e8m0[from];
      else std::memcpy(&out.scales[to * bytes], &scales[from], bytes);  // little-endian: the low byte first
      if (v.zeros != nullptr) out.zeros[to] = v.zeros[from];
    }
  }
}

}  // namespace

Result<PackedWeights> pack_experts(const WeightShape& shape, const PackOptions& options, const ExpertLoader& load) {
  MOEJIT_TRY(check_pack_shape(shape, options.rows, options.order));
  PackedWeights out;
  out.order = options.order;
  out.format = shape.format;
  out.group_size = shape.group_size;
  out.scale_dtype = shape.scale_dtype;
  out.experts = shape.experts;
  out.n = shape.n;
  out.k = shape.k;
  out.act_and_mul = options.rows != RowOrder::plain;
  if (!options.bias.empty()) {
    MOEJIT_ASSIGN_OR_RETURN(out.bias, permute_bias(options.bias, shape.experts, shape.n, options.rows));
  }
  const u64 group_count = static_cast<u64>(shape.experts) * (shape.k / shape.group_size) * shape.n;
  // Value-initialized: any byte the layout does not assign (none today) is zero, never garbage.
  out.qweight.assign(packed_weight_bytes(shape.experts, shape.n, shape.k), 0);
  out.scales.assign(packed_scale_bytes(shape.format == WeightFormat::mxfp4, shape.experts, shape.n, shape.k,
                                      shape.group_size, scale_bytes(shape.scale_dtype)),
                    0);
  if (shape.format == WeightFormat::int4_asym) out.zeros.assign(group_count, 0);

  std::vector<u32> row_of_column(shape.n);
  for (u32 c = 0; c < shape.n; ++c) row_of_column[c] = row_of_packed_column(c, shape.n, options.rows);

  for (u32 e = 0; e < shape.experts; ++e) {
    MOEJIT_ASSIGN_OR_RETURN(const ExpertView view, load(e));
    if (shape.format == WeightFormat::int4_asym && view.zeros == nullptr)
      return error(Code::internal, "int4_asym expert {} has no zero points", e);
    pack_expert(shape, row_of_column, view, e, out);
  }
  return out;
}

}  // namespace detail

Result<PackedWeights> pack(const QuantizedWeights& weights, const PackOptions& options) {
  const detail::WeightShape shape{weights.format, weights.group_size, weights.scale_dtype,
                                  weights.experts,  weights.n,          weights.k};
  MOEJIT_TRY(detail::check_pack_shape(shape, options.rows, options.order));
  MOEJIT_TRY(weights.validate());
  const u64 codes_per_expert = static_cast<u64>(weights.n) * weights.k;
  const u64 groups_per_expert = static_cast<u64>(weights.n) * weights.groups();
  return detail::pack_experts(shape, options, [&](u32 e) -> Result<detail::ExpertView> {
    detail::ExpertView v;
    v.codes = weights.codes.data() + e * codes_per_expert;
    v.scales = weights.scales.data() + e * groups_per_expert;
    if (!weights.zeros.empty()) v.zeros = weights.zeros.data() + e * groups_per_expert;
    return v;
  });
}

}  // namespace moejit::quant
