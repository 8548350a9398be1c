#pragma once
// The fp64 reference grouped GEMM: what every kernel variant is checked against (DESIGN §9).
// Written from templates/README.md ("Grouped GEMM semantics") and the GroupedGemmParams comments,
// independently of the kernels: weights are dequantized in double from the logical form, sums
// are exact-order double sums, and the result stays in double (the caller rounds to the output
// dtype if it wants to). It checks its inputs as strictly as a kernel trusts them: an index out
// of range, an expert id past E or a C row written twice is an error, never undefined behaviour.

#include <span>
#include <vector>

#include "quant/quantized_weights.hpp"

namespace moejit::quant {

struct ReferenceProblem {
  Layout layout = Layout::none;
  Epilogue epilogue = Epilogue::none;

  // Logical weights [E][N][K]. For silu_and_mul / swiglu_oai, N = 2I rows in concatenated order
  // (gate rows 0..I-1, then up rows I..2I-1) and the output has I columns.
  const QuantizedWeights* weights = nullptr;
  // Optional [E][N] f32 bias in the same (logical) row order, added before the epilogue.
  std::span<const float> bias;

  // A, row-major with K columns (bf16/f16 inputs converted exactly with twin::).
  std::span<const double> a;

  // As GroupedGemmParams::m: indexed: numel = tokens * topk (also the padding sentinel);
  // contiguous: rows of A and C; masked: max_m, rows per expert.
  i32 m = 0;

  // indexed: vLLM moe_align_block_size output for block size `block_m`.
  u32 block_m = 0;
  std::span<const i32> sorted_token_ids;  // >= num_tokens_post_pad slots; id >= m is padding
  std::span<const i32> expert_ids;        // one per block of block_m slots; -1: skipped
  i32 num_tokens_post_pad = 0;
  i32 a_row_divisor = 1;                  // A row = id / a_row_divisor (topk, or 1)
  std::span<const float> topk_weights;    // topk_weight epilogue: one per pair id (m of them)

  // contiguous: E + 1 non-decreasing offsets; expert e owns rows [offsets[e], offsets[e + 1]).
  std::span<const i32> expert_offsets;

  // masked: E counts in [0, m]; expert e owns rows [0, counts[e]) of its m-row slab.
  std::span<const i32> expert_counts;
};

struct ReferenceOutput {
  u64 rows = 0, cols = 0;    // indexed / contiguous: m rows; masked: E * m rows
  std::vector<double> c;     // [rows][cols]; rows not written hold 0
  std::vector<u8> written;   // [rows]: 1 where the layout writes the row, 0 where C keeps its poison
};

Result<ReferenceOutput> reference_grouped_gemm(const ReferenceProblem& problem);

// The epilogue functions on one (gate, up) pair, as the kernels define them.
double silu_and_mul(double gate, double up);
double swiglu_oai(double gate, double up);

}  // namespace moejit::quant
