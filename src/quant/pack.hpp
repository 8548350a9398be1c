#pragma once
// moejit's packed weight layout (templates/README.md, "Packed weight layout";
// gemm/grouped_gemm_params.cuh is its executable form and the only source of its arithmetic
// here): packing from the logical form, unpacking back (tests prove round trips with it), and
// the column permutation of act-and-mul weights that scales, zero points and bias follow.
// Packers from the layouts engines hold (vLLM MXFP4, GPTQ, AWQ) are in engine_layouts.hpp.

#include <span>
#include <string_view>
#include <vector>

#include "gemm/grouped_gemm_params.cuh"
#include "quant/quantized_weights.hpp"

namespace moejit::quant {

// The order of the source (logical) rows, and whether the weights are act-and-mul.
enum class RowOrder : u8 {
  // Ordinary weights: packed column c is logical row c.
  plain = 0,
  // Act-and-mul (N = 2I): gate rows 0..I-1, then up rows I..2I-1 (vLLM's w13).
  concatenated = 1,
  // Act-and-mul (N = 2I): gate at even rows, up at odd rows (gpt-oss checkpoints).
  interleaved = 2,
};

const char* row_order_name(RowOrder order);

// A packed shape some kernel can use: 1 to kMaxExperts experts, N and K positive multiples of 32
// of at most kMaxPackedExtent, one expert's tiles at most kMaxExpertPackedBytes. Within these
// bounds no byte count of the layout overflows. Errors name the fields as `owner` followed by
// experts, n and k ("desc->" names 'desc->n').
Status check_packed_extents(u32 experts, u32 n, u32 k, std::string_view owner);
// The same test without a message, for paths that run per call.
constexpr bool packed_extents_fit(u32 experts, u32 n, u32 k) {
  return experts >= 1 && experts <= kMaxExperts && n >= 1 && n % kTileN == 0 && n <= kMaxPackedExtent && k >= 1 &&
         k % kTileK == 0 && k <= kMaxPackedExtent && packed_weight_bytes(1, n, k) <= kMaxExpertPackedBytes;
}

// What a packer needs to know besides the tensors.
struct WeightShape {
  WeightFormat format = WeightFormat::none;
  u32 group_size = 0;
  DType scale_dtype = DType::none;
  u32 experts = 0, n = 0, k = 0;
};

// Everything a packer checks before it reads a tensor: the packed extents (fields named after
// `owner`), the format, the row order and the tile order. The pack op sizes only what passes.
Status check_pack_shape(const WeightShape& shape, RowOrder rows, PackedOrder order = PackedOrder::a16,
                        std::string_view owner = "");

// The packed column of logical row `row` of an N-row weight, and its inverse. For act-and-mul
// orders they go through act_and_mul_column_of / act_and_mul_{output,half}_of_column.
// Preconditions (checked by the packers): row, column < n; n % 32 == 0 for act-and-mul.
u32 packed_column_of_row(u32 row, u32 n, RowOrder order);
u32 row_of_packed_column(u32 column, u32 n, RowOrder order);

struct PackedWeights {
  WeightFormat format = WeightFormat::none;
  u32 group_size = 0;
  DType scale_dtype = DType::none;
  u32 experts = 0, n = 0, k = 0;
  bool act_and_mul = false;  // columns are in act-and-mul order (the source was not `plain`)
  // The fragment order of the tile words (packed_order_for): a16 for bf16 activations (and f16 ones
  // with INT4), a16f16 for f16 ones with MXFP4, a8 for e4m3, a4 for e2m1
  // (gemm/grouped_gemm_params.cuh). Scales, zero points and bias do not depend on it; MXFP4's
  // per-expert range words after the scales record it (packed_order_mark).
  PackedOrder order = PackedOrder::a16;

  // packed_weight_bytes(E, N, K) bytes of 32x32 tiles.
  std::vector<u8> qweight;
  // [E][K/G][N] scales in packed column order, scale_bytes(scale_dtype) bytes each (bf16/f16
  // little-endian, as the device reads them): ready to copy to the device as is.
  std::vector<u8> scales;
  // [E][K/G][N] zero points (0..15) in packed column order; int4_asym only, else empty.
  std::vector<u8> zeros;
  // [E][N] f32 bias in packed column order; empty when none was given.
  std::vector<float> bias;

  u32 groups() const { return group_size ? k / group_size : 0; }
  // The raw bits of the scale of packed column `column`, group `group` of expert `e`.
  u16 scale_bits(u32 e, u32 group, u32 column) const;
};

struct PackOptions {
  RowOrder rows = RowOrder::plain;
  std::span<const float> bias;  // optional [E][N] f32 in the source row order
  // The activations the tiles are for (packed_order_for): a16, a16f16 (MXFP4 only), a8 or a4 (MXFP4
  // only).
  PackedOrder order = PackedOrder::a16;
};

// The order of `format` weights used with `act` activations: MXFP4 has one per activation type,
// INT4 one for both 16-bit types (a16) and one for e4m3.
constexpr PackedOrder packed_order_for(DType act, WeightFormat format) {
  if (act == DType::e2m1) return PackedOrder::a4;
  if (act == DType::e4m3) return PackedOrder::a8;
  return act == DType::f16 && format == WeightFormat::mxfp4 ? PackedOrder::a16f16 : PackedOrder::a16;
}
// The quantized activation dtype an order was packed for (none for a16 and a16f16: 16-bit).
constexpr DType quantized_act_of(PackedOrder order) {
  return order == PackedOrder::a4 ? DType::e2m1 : order == PackedOrder::a8 ? DType::e4m3 : DType::none;
}
// The activation dtype an order is recorded as (moejit_packed_weights_t::act_dtype): bf16 for a16,
// which INT4 weights also use with f16 activations.
constexpr DType packed_act_of(PackedOrder order) {
  return order == PackedOrder::a16f16 ? DType::f16 : order == PackedOrder::a16 ? DType::bf16 : quantized_act_of(order);
}
// What a message calls the activations `format` weights in `order` were packed for.
constexpr const char* packed_for_name(PackedOrder order, WeightFormat format) {
  if (order == PackedOrder::a4) return "e2m1";
  if (order == PackedOrder::a8) return "e4m3";
  if (order == PackedOrder::a16f16) return "f16";
  return format == WeightFormat::mxfp4 ? "bf16" : "16-bit";
}
// The act_dtype (or either one) a caller packs `format` weights with to get `order`: what an
// error message tells them to pack again with.
constexpr const char* packed_act_option_name(PackedOrder order, WeightFormat format) {
  if (order == PackedOrder::a16 && format != WeightFormat::mxfp4) return "bf16 or f16";
  return packed_for_name(order, format);
}

// Packs logical weights (rows in `options.rows` order). Checks first: the format, N % 32,
// K % 32, the group, the tensor sizes and the bias size; the Status names the bad argument.
Result<PackedWeights> pack(const QuantizedWeights& weights, const PackOptions& options = {});

// The logical weights of packed ones, rows in `rows` order: `plain` for ordinary weights,
// `concatenated` or `interleaved` for act-and-mul ones (either may be asked of any act-and-mul
// pack, whatever order it was packed from).
Result<QuantizedWeights> unpack(const PackedWeights& packed, RowOrder rows);

// [E][N] bias from source row order to packed column order, and back.
Result<std::vector<float>> permute_bias(std::span<const float> bias, u32 experts, u32 n, RowOrder rows);
Result<std::vector<float>> unpermute_bias(std::span<const float> packed_bias, u32 experts, u32 n,
                                          RowOrder rows);

}  // namespace moejit::quant
