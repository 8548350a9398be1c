#pragma once
// Arguments of the grouped GEMM kernels and the arithmetic of moejit's packed weight layout.
// Plain C++ with no device code: included by the kernels, by the host library (packers,
// dispatch, reference) and by tests, so all of them agree on layout by construction.
// The contract in words is templates/README.md; this header is its executable form.

#include "common/types.cuh"

namespace moejit {

// ---- Packed weights -----------------------------------------------------------------------
// Per expert, the logical weight W[n][k] (n < N, k < K; N % 32 == 0, K % 32 == 0) is stored
// as tiles of 32 (k) x 32 (n) 4-bit codes, 512 bytes each, tile (nt, kt) at byte offset
//   expert * (N * K / 2) + (nt * (K / 32) + kt) * 512.
// Inside a tile, lane L (0..31) of a warp owns bytes [16 L, 16 L + 16) as four 32-bit words;
// word w holds column n = 32 nt + 8 w + L / 4 and, in its 8 nibbles (nibble p at bits 4p..4p+3),
// the 8 k offsets (within the tile) that mma.m16n8k16's B fragment gives lane L for two
// consecutive k16 steps. The order of those 8 offsets in the word depends on the format, so
// that dequantization produces the fragment registers directly (see packed_k_of_nibble).

inline constexpr u32 kTileK = 32;
inline constexpr u32 kTileN = 32;
inline constexpr u32 kTileBytes = kTileK * kTileN / 2;

enum class NibbleOrder : u32 {
  // int4: bf16x2/f16x2 pairs come out as (nibble p, nibble p + 4).
  int4_pairs_p_p4 = 0,
  // mxfp4 (E2M1): pairs come out as (nibble 2q, nibble 2q + 1).
  e2m1_pairs_2q = 1,
};

// The k offset within a 32 x 32 tile that nibble `p` of lane `lane`'s word holds.
// mma.m16n8k16 B fragment of lane (g = lane / 4, t = lane % 4): rows {2t, 2t+1} in register 0
// and {2t+8, 2t+9} in register 1; the second k16 step adds 16.
constexpr u32 packed_k_of_nibble(NibbleOrder order, u32 lane, u32 p) {
  const u32 t = lane % 4;
  // Fragment element e (0..7): step e / 4, register (e / 2) % 2, half e % 2. For int4, nibble
  // p (< 4) is the low half of register p and nibble p + 4 its high half; for E2M1, e = p.
  const u32 e = order == NibbleOrder::int4_pairs_p_p4 ? (p % 4) * 2 + p / 4 : p;
  const u32 step = e / 4, reg = (e / 2) % 2, half = e % 2;
  return 16 * step + 8 * reg + 2 * t + half;
}

constexpr u64 packed_weight_bytes(u64 experts, u64 n, u64 k) { return experts * n * k / 2; }

// Byte offset of tile (nt, kt) of an expert.
constexpr u64 packed_tile_offset(u64 expert, u64 n, u64 k, u64 nt, u64 kt) {
  return expert * (n * k / 2) + (nt * (k / kTileK) + kt) * kTileBytes;
}

// Scales (and int4 zero points) are [E][K / group][N]: for each group of k, the N columns
// contiguous, in packed column order. Zero points are one byte each (0..15).
constexpr u64 scale_index(u64 expert, u64 n, u64 k, u64 group_size, u64 col, u64 kk) {
  return (expert * (k / group_size) + kk / group_size) * n + col;
}

// Act-and-mul weights (gate and up projections, N = 2 I) are packed with gate and up
// interleaved in blocks of 8 columns: packed column c belongs to output j and half h (0 gate,
// 1 up) with  j = 16 (c / 32) + 8 ((c % 32) / 16) + c % 8  and  h = (c % 16) / 8.
constexpr u32 act_and_mul_output_of_column(u32 c) { return 16 * (c / 32) + 8 * ((c % 32) / 16) + c % 8; }
constexpr u32 act_and_mul_half_of_column(u32 c) { return (c % 16) / 8; }
constexpr u32 act_and_mul_column_of(u32 j, u32 half) {
  return 32 * (j / 16) + 16 * ((j % 16) / 8) + 8 * half + j % 8;
}

// ---- Compile-time choices, numbered as the host's KernelSpec enums (src/spec/kernel_spec.hpp;
// the grouped-GEMM recipe checks that they agree) ----------------------------------------------
namespace gemm_enum {
inline constexpr int mxfp4 = 1, int4_sym = 2, int4_asym = 3;                   // weight
inline constexpr int bf16 = 1, f16 = 2, f32 = 3, e4m3 = 4, e8m0 = 5;            // dtypes
inline constexpr int indexed = 1, contiguous = 2, masked = 3;                   // layout
inline constexpr int none = 0, silu_and_mul = 1, swiglu_oai = 2, topk_weight = 3;  // epilogue
}  // namespace gemm_enum

// Shared memory of one pipeline stage and of the whole kernel, in bytes. The stage holds the A
// tile (bm x bk, 16-bit), the packed B tiles (bn x bk / 2), the scale rows the stage's k range
// touches (bn each) and, for int4_asym, as many zero-point rows (bn bytes each).
constexpr u32 gemm_scale_rows(u32 bk, u32 group) { return group >= bk ? 1 : bk / group; }
constexpr u32 gemm_stage_bytes(u32 bm, u32 bn, u32 bk, u32 group, u32 scale_bytes, bool zeros) {
  return bm * bk * 2 + bn * bk / 2 + gemm_scale_rows(bk, group) * bn * (scale_bytes + (zeros ? 1 : 0));
}
// Plus the per-row A offsets and C rows (8 bytes each) of the block's bm rows.
constexpr u32 gemm_shared_bytes(u32 bm, u32 bn, u32 bk, u32 stages, u32 group, u32 scale_bytes,
                                bool zeros) {
  return stages * gemm_stage_bytes(bm, bn, bk, group, scale_bytes, zeros) + bm * 16;
}

// ---- Kernel arguments ----------------------------------------------------------------------
struct GroupedGemmParams {
  // A: activations (act dtype), row-major, `lda` elements between rows, 16-byte aligned rows.
  const void* a;
  i64 lda;
  // B: packed weights, scales ([E][K/group][N], scale dtype) and, for int4_asym, zero points.
  const u8* b;
  const void* b_scales;
  const u8* b_zeros;
  // Optional per-expert bias [E][N] (f32, packed column order), added before the epilogue.
  const float* bias;
  // C: output (out dtype), row-major, `ldc` elements between rows. For act-and-mul epilogues
  // C has N / 2 columns.
  void* c;
  i64 ldc;

  // Rows, by layout:
  //   indexed:    m = numel (tokens * topk): also the padding sentinel of sorted_token_ids.
  //   contiguous: m = total rows of A and C.
  //   masked:     m = max_m, rows per expert in A and C.
  i32 m;

  // indexed (vLLM moe_align_block_size output, block size == the kernel's BM): block b of
  // BM slots belongs to expert expert_ids[b] (-1: skipped, not written). Slot s holds pair
  // id = sorted_token_ids[s]; id >= m is padding. A row = id / a_row_divisor; C row = id.
  const i32* sorted_token_ids;
  const i32* expert_ids;
  const i32* num_tokens_post_pad;
  i32 a_row_divisor;  // topk when A holds one row per token, 1 when one row per pair

  // contiguous: expert e owns rows [expert_offsets[e], expert_offsets[e + 1]) of A and C.
  const i32* expert_offsets;

  // masked: expert e owns rows [0, expert_counts[e]) of its max_m-row slab of A and C (a count
  // above max_m is taken as max_m, a negative one as 0).
  const i32* expert_counts;

  // topk_weight epilogue: C row id is scaled by topk_weights[id] (f32, one per pair).
  const float* topk_weights;

  // split-K > 1 (serial, deterministic): split z of an output tile waits until its counter
  // reads z, adds its f32 partial sums to the tile's workspace, and passes the counter on; the
  // last split runs the epilogue and resets the counter to zero. Workspace: one BM x BN f32 tile
  // per output tile (gridDim.x * gridDim.y of them); counters: one per output tile, zero before
  // the first launch and left at zero by every launch.
  float* workspace;
  u32* tile_counters;
};

}  // namespace moejit
