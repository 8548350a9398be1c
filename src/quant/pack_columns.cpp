// Source row <-> packed column, and the bias that follows it.

#include "gemm/grouped_gemm_params.cuh"
#include "quant/pack.hpp"

namespace moejit::quant {

const char* row_order_name(RowOrder order) {
  switch (order) {
    case RowOrder::plain: return "plain";
    case RowOrder::concatenated: return "concatenated";
    case RowOrder::interleaved: return "interleaved";
  }
  return "invalid";
}

u32 packed_column_of_row(u32 row, u32 n, RowOrder order) {
  const u32 half_n = n / 2;
  switch (order) {
    case RowOrder::plain: return row;
    case RowOrder::concatenated:
      return row < half_n ? act_and_mul_column_of(row, 0) : act_and_mul_column_of(row - half_n, 1);
    case RowOrder::interleaved: return act_and_mul_column_of(row / 2, row % 2);
  }
  return row;
}

u32 row_of_packed_column(u32 column, u32 n, RowOrder order) {
  const u32 j = act_and_mul_output_of_column(column), half = act_and_mul_half_of_column(column);
  switch (order) {
    case RowOrder::plain: return column;
    case RowOrder::concatenated: return half * (n / 2) + j;
    case RowOrder::interleaved: return 2 * j + half;
  }
  return column;
}

namespace {

Status check_bias(std::span<const float> bias, u32 experts, u32 n, RowOrder rows, const char* name) {
  if (rows != RowOrder::plain && rows != RowOrder::concatenated && rows != RowOrder::interleaved)
    return error(Code::invalid_argument, "row order {}: expected plain, concatenated or interleaved",
                 static_cast<int>(rows));
  if (rows != RowOrder::plain && n % kTileN != 0)
    return error(Code::invalid_argument, "N = {} for act-and-mul rows: expected a multiple of {}", n, kTileN);
  const u64 expected = static_cast<u64>(experts) * n;
  if (bias.size() != expected)
    return error(Code::invalid_argument, "{} has {} elements: expected E*N = {} (E={}, N={})", name, bias.size(),
                 expected, experts, n);
  return ok_status();
}

}  // namespace

Result<std::vector<float>> permute_bias(std::span<const float> bias, u32 experts, u32 n, RowOrder rows) {
  MOEJIT_TRY(check_bias(bias, experts, n, rows, "bias"));
  std::vector<float> out(bias.size());
  for (u64 e = 0; e < experts; ++e)
    for (u32 row = 0; row < n; ++row) out[e * n + packed_column_of_row(row, n, rows)] = bias[e * n + row];
  return out;
}

Result<std::vector<float>> unpermute_bias(std::span<const float> packed_bias, u32 experts, u32 n,
                                          RowOrder rows) {
  MOEJIT_TRY(check_bias(packed_bias, experts, n, rows, "packed bias"));
  std::vector<float> out(packed_bias.size());
  for (u64 e = 0; e < experts; ++e)
    for (u32 c = 0; c < n; ++c) out[e * n + row_of_packed_column(c, n, rows)] = packed_bias[e * n + c];
  return out;
}

}  // namespace moejit::quant
