#pragma once
// Arguments of the grouped GEMM kernels and the arithmetic of moejit's packed weight layout.
// Plain C++ with no device code: included by the kernels, by the host library (packers,
// dispatch, reference) and by tests, so all of them agree on layout by construction.
// The contract in words is templates/README.md; this header is its executable form.

#include "common/kernel_enums.cuh"
#include "common/types.cuh"

namespace moejit {

// ---- Packed weights -----------------------------------------------------------------------
// Per expert, the logical weight W[n][k] (n < N, k < K; N % 32 == 0, K % 32 == 0) is stored
// as tiles of 32 (k) x 32 (n) 4-bit codes, 512 bytes each, tile (nt, kt) at byte offset
//   expert * (N * K / 2) + (nt * (K / 32) + kt) * 512,
// so the tiles of one 32-column strip are consecutive along K. Inside a tile, lane L (0..31)
// of a warp owns bytes [16 L, 16 L + 16) as four 32-bit words; word w holds column
// n = 32 nt + 8 w + L / 4 and the 8 k offsets (within the tile) that mma.m16n8k16's B fragment
// gives lane L for two consecutive k16 steps: fragment element e (0..7) is step e / 4,
// register (e / 2) % 2, half e % 2, at k offset packed_k_of_element(L, e). Where each element's
// 4 bits sit in the word depends on the format, so that dequantization is a few operations per
// register (gemm/dequant.cuh):
//  - int4: element e is nibble int4_nibble_of_element(e), so register q = e / 2 is the pair
//    (nibble q, nibble q + 4) and one shift + lop3 puts both into the mantissas of 128.0/1024.0.
//  - E2M1: the sign, E1, E0 and M bits of element e are spread over the word
//    (e2m1_word_bit) so that each bf16x2 register comes out of the word with its sign at bits
//    15/31 and E1 E0 M at bits 8..6 / 24..22 (a bf16 holding the value times 2^-126) in at most
//    three operations: register 0 is a mask, registers 1 and 2 a rotation and a mask, register
//    3 a mask, an integer multiply that scatters bits and a mask.

inline constexpr u32 kTileK = 32;
inline constexpr u32 kTileN = 32;
inline constexpr u32 kTileBytes = kTileK * kTileN / 2;

// The k offset within a 32 x 32 tile of B-fragment element `e` of lane `lane`: registers hold
// rows {2t, 2t+1} (register 0) and {2t+8, 2t+9} (register 1), t = lane % 4; step 1 adds 16.
constexpr u32 packed_k_of_element(u32 lane, u32 e) {
  const u32 t = lane % 4, step = e / 4, reg = (e / 2) % 2, half = e % 2;
  return 16 * step + 8 * reg + 2 * t + half;
}

// int4: the nibble (bits 4p..4p+3 of the word) holding element e: register q = e / 2 is
// (nibble q, nibble q + 4) as (low half, high half).
constexpr u32 int4_nibble_of_element(u32 e) { return (e / 2) + 4 * (e % 2); }

// E2M1 code bits: 0 = M (mantissa), 1 = E0, 2 = E1 (exponent), 3 = sign.
// Bit of a bf16x2 register where code bit b of the half-h element goes (bf16 mantissa MSB 6,
// exponent LSBs 7..8, sign 15).
constexpr u32 e2m1_register_bit(u32 b, u32 h) {
  return (b == 0 ? 6u : b == 1 ? 7u : b == 2 ? 8u : 15u) + 16 * h;
}
// Register q is rotated right by these many bits out of the word (q = 0, 1, 2); register 3 is
// gathered from the bits the rotations leave: word bits {3, 4, 0, 1} (+16 for the high half)
// hold its M, E0, E1 and sign.
inline constexpr u32 kE2m1Rotation[3] = {0, 3, 6};
inline constexpr u32 kE2m1GatherBit[4] = {3, 4, 0, 1};
inline constexpr u32 kE2m1GatherMask = 0x001b001bu;  // the word bits register 3 takes
inline constexpr u32 kE2m1GatherMultiplier = (1u << 3) | (1u << 8) | (1u << 14);
inline constexpr u32 kE2m1RegisterMask = 0x81c081c0u;  // sign, E1, E0, M of both halves

// The word bit that holds code bit `b` (0..3) of fragment element `e` (0..7).
constexpr u32 e2m1_word_bit(u32 e, u32 b) {
  const u32 q = e / 2, h = e % 2;
  if (q < 3) return (e2m1_register_bit(b, h) + kE2m1Rotation[q]) % 32;
  return kE2m1GatherBit[b] + 16 * h;
}

// ---- E2M1 for f16 activations (order a16f16, MXFP4 weights) --------------------------------
// Same tiles, k offsets, scales and bias as a16; only the bits move, so that each f16x2 register
// has sign at bits 15/31 and E1 E0 M at bits 11..9 / 27..25 (an f16 holding the value times
// 2^-14). An f16's sign lies 4 bits above its magnitude, not 7 as in a bf16, so a third rotation
// of the bf16 placement would collide; registers 2 and 3 are gathered by multiplies instead:
// register 0 is a mask, register 1 a rotation and a mask, registers 2 and 3 a mask, an integer
// multiply that copies the bits to two shifted places that do not overlap, and a mask.
constexpr u32 e2m1_f16_register_bit(u32 b, u32 h) { return (b == 0 ? 9u : b == 1 ? 10u : b == 2 ? 11u : 15u) + 16 * h; }
inline constexpr u32 kE2m1F16Rotation = 3;                       // register 1
inline constexpr u32 kE2m1F16RegisterMask = 0x8e008e00u;         // sign, E1, E0, M of both halves
inline constexpr u32 kE2m1F16GatherMask[2] = {0x00e200e2u, 0x01190119u};  // registers 2, 3
inline constexpr u32 kE2m1F16GatherMultiplier[2] = {(1u << 3) | (1u << 10), (1u << 7) | (1u << 9)};
// Word bits of M, E0, E1, sign of the low-half element of registers 2 and 3 (+16: high half).
inline constexpr u32 kE2m1F16GatherBit[2][4] = {{6, 7, 1, 5}, {0, 3, 4, 8}};

constexpr u32 e2m1_f16_word_bit(u32 e, u32 b) {
  const u32 q = e / 2, h = e % 2;
  if (q == 0) return e2m1_f16_register_bit(b, h);
  if (q == 1) return (e2m1_f16_register_bit(b, h) + kE2m1F16Rotation) % 32;
  return kE2m1F16GatherBit[q - 2][b] + 16 * h;
}

// ---- The 8-bit-activation order (weights used with e4m3 activations) -----------------------
// Same tiles, tile order, columns, scales and zero points as above; only which 8 k a lane's word
// holds, and where each element's bits sit, differ. mma.m16n8k32 (e4m3) gives lane L of the B
// fragment column g = L / 4 and, in register r (0, 1) byte j, k offset 16 r + 4 t + j
// (t = L % 4); so word w of lane L holds column 32 nt + 8 w + L / 4 and element e (0..7) at
// k offset packed8_k_of_element(L, e), bound for register e / 4, byte e % 4. The bits are placed
// so that each register is an e4m3 value in one to four operations (gemm/dequant.cuh):
//  - int4: element e is the low (e < 4) or high (e >= 4) nibble of byte e % 4, so register 0 is
//    word & 0x0f0f0f0f and register 1 (word >> 4) & 0x0f0f0f0f: each byte the unsigned code q,
//    which as an e4m3 byte is q * 2^-9 exactly (codes 0..7 subnormal, 8..15 normal).
//  - E2M1: elements 0..3 keep sign, E1, E0, M at bits 7, 4, 3, 2 of byte e (an e4m3 byte holding
//    the value times 2^-6, the subnormal codes included), so register 0 is word & 0x9c9c9c9c;
//    elements 4..7 use the bits left in byte e - 4: M, E0, sign, E1 at bits 0, 1, 5, 6, moved
//    into place by a shift left and a shift right of two.
enum class PackedOrder : u32 {
  a16 = 0,     // for 16-bit activations: mma.m16n8k16's fragments (above); MXFP4 bits for bf16
  a8 = 1,      // for e4m3 activations: mma.m16n8k32's fragments
  a4 = 2,      // for e2m1 activations (MXFP4 weights only): mma.m16n8k64's fragments (below)
  a16f16 = 3,  // for f16 activations (MXFP4 weights only; INT4 serves both 16-bit types as a16):
               // a16's fragments, E2M1 bits placed for f16 (e2m1_f16_word_bit)
};

constexpr u32 packed8_k_of_element(u32 lane, u32 e) { return 16 * (e / 4) + 4 * (lane % 4) + e % 4; }

inline constexpr u32 kE4m3Int4Mask = 0x0f0f0f0fu;
inline constexpr u32 kE4m3E2m1LowMask = 0x9c9c9c9cu;    // register 0: sign, E1, E0, M of bytes 0..3
inline constexpr u32 kE4m3E2m1ShiftUp = 0x8c8c8c8cu;    // register 1: sign, E0, M after << 2
inline constexpr u32 kE4m3E2m1ShiftDown = 0x10101010u;  // register 1: E1 after >> 2
// Bits (within byte e % 4) of E2M1 code bits M, E0, E1, sign of element e.
constexpr u32 e2m1_a8_byte_bit(u32 e, u32 b) {
  constexpr u32 low[4] = {2, 3, 4, 7}, high[4] = {0, 1, 6, 5};
  return e < 4 ? low[b] : high[b];
}
// The word bit of code bit b (0 M, 1 E0, 2 E1, 3 sign) of element e, for either format.
constexpr u32 a8_word_bit(bool mxfp4, u32 e, u32 b) {
  return 8 * (e % 4) + (mxfp4 ? e2m1_a8_byte_bit(e, b) : 4 * (e / 4) + b);
}

// ---- The 4-bit-activation order (MXFP4 weights used with e2m1 activations) -----------------
// Same tile size, tile order, columns and scales again; K % 64 == 0. mma.m16n8k64 (kind::mxf4)
// gives lane L of the B fragment column g = L / 4 and, in register r nibble j, k offset
// 32 r + 8 t + j. The word of n8 tile w and 32-k tile kt holds column 32 nt + 8 w + L / 4 and
// the codes of k offsets 8 t .. 8 t + 7 of kt in nibble order; the two tiles of a 64-k pair
// store their words side by side so that a k64 step's two B registers of one n8 tile are
// adjacent: the word (kt, w) sits in tile 2 (kt / 2) + w / 2, slot 2 (w % 2) + kt % 2
// (packed_word_place). One 16-byte load of each tile of the pair then gives the step's B
// fragments of two n8 tiles, as consecutive register pairs.
constexpr u32 packed4_k_of_element(u32 lane, u32 e) { return 8 * (lane % 4) + e; }

// Where the word of n8 tile w (0..3) of 32-k tile kt lies in a strip: tile and 4-byte slot of
// the lane's 16 bytes. Every order but a4 keeps it in its own tile and slot.
struct WordPlace {
  u32 kt, slot;
};
constexpr WordPlace packed_word_place(PackedOrder order, u32 kt, u32 w) {
  if (order != PackedOrder::a4) return {kt, w};
  return {2 * (kt / 2) + w / 2, 2 * (w % 2) + kt % 2};
}

// The k offset and word bit of element e for a lane, in any order.
constexpr u32 packed_k_of(PackedOrder order, u32 lane, u32 e) {
  return order == PackedOrder::a4   ? packed4_k_of_element(lane, e)
         : order == PackedOrder::a8 ? packed8_k_of_element(lane, e)
                                    : packed_k_of_element(lane, e);
}
constexpr u32 packed_word_bit(PackedOrder order, bool mxfp4, u32 e, u32 b) {
  if (order == PackedOrder::a4) return 4 * e + b;
  if (order == PackedOrder::a8) return a8_word_bit(mxfp4, e, b);
  if (mxfp4) return order == PackedOrder::a16f16 ? e2m1_f16_word_bit(e, b) : e2m1_word_bit(e, b);
  return 4 * int4_nibble_of_element(e) + b;
}

// The packed shapes the kernels address: N and K up to 2^20 each, one expert's tiles within
// 32-bit offsets, and up to 4096 experts (the align kernel counts them in shared memory). Every
// byte count of a packed shape within these bounds fits in 64 bits with room to spare.
inline constexpr u32 kMaxPackedExtent = 1u << 20;
inline constexpr u64 kMaxExpertPackedBytes = 1ull << 31;
inline constexpr u32 kMaxExperts = 4096;

constexpr u64 packed_weight_bytes(u64 experts, u64 n, u64 k) { return experts * n * k / 2; }

// Byte offset of tile (nt, kt) of an expert.
constexpr u64 packed_tile_offset(u64 expert, u64 n, u64 k, u64 nt, u64 kt) {
  return expert * (n * k / 2) + (nt * (k / kTileK) + kt) * kTileBytes;
}

// Scales (and int4 zero points) are [E][K / group][N']: for each group of k, one row of N
// entries in packed column order, permuted within each 32-column strip so that the lane that
// dequantizes columns 8 w + g (w = 0..3) of a strip finds their four scales side by side:
// column c of a strip sits at position scale_position_in_strip(c). Zero points are one byte
// each (0..15).
constexpr u32 scale_position_in_strip(u32 c) { return 4 * (c % 8) + (c % 32) / 8; }
constexpr u64 scale_index(u64 expert, u64 n, u64 k, u64 group_size, u64 col, u64 kk) {
  return (expert * (k / group_size) + kk / group_size) * n + col / 32 * 32 + scale_position_in_strip(col % 32);
}

// MXFP4 scales are followed, from the next 16-byte boundary, by one u32 per expert: the
// smallest (bits 0..7) and largest (bits 8..15) E8M0 byte of the expert's blocks, over blocks
// whose codes are not all zero (the packer gives an all-zero block the expert's largest byte:
// its value is zero either way). Kernels read it to decide how to apply the expert's scales.
// Bits 16..31 mark the order the tiles were packed in (packed_order_mark): the tiles themselves
// carry no sign of it, and a kernel given tiles packed for other activations would decode every
// weight to a wrong value. A kernel whose order the mark does not accept writes NaN for the
// expert's outputs instead. Buffers packed before the mark hold 0 there. Released versions had
// only a16, a8 and a4 then, so an unmarked buffer is accepted by every kernel but the
// f16-activation MXFP4 one: an unmarked buffer labelled F16 is almost surely an old bf16 one
// (a16f16 packs made by development builds before the mark must be packed again).
constexpr u64 round_up_16(u64 v) { return (v + 15) / 16 * 16; }
constexpr u64 mxfp4_scale_range_offset(u64 experts, u64 n, u64 k) { return round_up_16(experts * (k / 32) * n); }
// The per-expert ranges inside an MXFP4 scales buffer.
inline const u32* mxfp4_scale_ranges(const void* scales, u64 experts, u64 n, u64 k) {
  return reinterpret_cast<const u32*>(static_cast<const u8*>(scales) + mxfp4_scale_range_offset(experts, n, k));
}
inline constexpr u32 kPackedOrderMarkBase = 0x6d30;  // arbitrary, far from 0: marks are 0x6d30 + order
constexpr u32 packed_order_mark(PackedOrder order) { return (kPackedOrderMarkBase + static_cast<u32>(order)) << 16; }
constexpr bool packed_order_mark_accepts(u32 range_word, PackedOrder order) {
  const u32 mark = range_word >> 16;
  return mark == kPackedOrderMarkBase + static_cast<u32>(order) || (mark == 0 && order != PackedOrder::a16f16);
}
constexpr u64 packed_scale_bytes(bool mxfp4, u64 experts, u64 n, u64 k, u64 group_size, u64 scale_bytes) {
  return mxfp4 ? mxfp4_scale_range_offset(experts, n, k) + experts * 4 : experts * (k / group_size) * n * scale_bytes;
}

// Act-and-mul weights (gate and up projections, N = 2 I) are packed with gate and up
// interleaved in blocks of 8 columns: packed column c belongs to output j and half h (0 gate,
// 1 up) with  j = 16 (c / 32) + 8 ((c % 32) / 16) + c % 8  and  h = (c % 16) / 8.
constexpr u32 act_and_mul_output_of_column(u32 c) { return 16 * (c / 32) + 8 * ((c % 32) / 16) + c % 8; }
constexpr u32 act_and_mul_half_of_column(u32 c) { return (c % 16) / 8; }
constexpr u32 act_and_mul_column_of(u32 j, u32 half) {
  return 32 * (j / 16) + 16 * ((j % 16) / 8) + 8 * half + j % 8;
}

// Shared memory of one pipeline stage and of the whole kernel, in bytes. The stage holds the A
// tile (bm x bk, act_bits each: 16 for bf16/f16, 8 for e4m3, 4 for e2m1), the packed B tiles
// (bn x bk / 2), the scale rows the stage's k range touches (bn each), for int4_asym as many
// zero-point rows (bn bytes each) and, where `row_scales`, the f32 scale of each of the bm rows
// for the stage's k (e4m3 scaled per 128 k on the wgmma tiles). Tiles on the warpgroup MMA
// (gemm/grouped_gemm_wgmma.cuh) read each stage's A tile in the 128-byte swizzle, which follows
// shared-window addresses: their stages are padded to kWgmmaStageAlign bytes, and the kernel
// takes that many more to align its first stage.
inline constexpr u32 kWgmmaStageAlign = 1024;
constexpr u32 gemm_scale_rows(u32 bk, u32 group) { return group >= bk ? 1 : bk / group; }
constexpr u32 gemm_stage_bytes(u32 bm, u32 bn, u32 bk, u32 group, u32 scale_bytes, bool zeros, u32 act_bits = 16,
                               bool wgmma = false, bool row_scales = false) {
  const u32 bytes = bm * bk * act_bits / 8 + bn * bk / 2 +
                    gemm_scale_rows(bk, group) * bn * (scale_bytes + (zeros ? 1 : 0)) + (row_scales ? bm * 4 : 0);
  return wgmma ? (bytes + kWgmmaStageAlign - 1) / kWgmmaStageAlign * kWgmmaStageAlign : bytes;
}
// Plus the per-row A offsets and C rows (8 bytes each) of the block's bm rows and, for quantized
// (e4m3, e2m1) activations, the rows of their scales (4 bytes each).
constexpr u32 gemm_shared_bytes(u32 bm, u32 bn, u32 bk, u32 stages, u32 group, u32 scale_bytes,
                                bool zeros, u32 act_bits = 16, bool wgmma = false, bool row_scales = false) {
  return stages * gemm_stage_bytes(bm, bn, bk, group, scale_bytes, zeros, act_bits, wgmma, row_scales) +
         bm * (act_bits < 16 ? 20 : 16) + (wgmma ? kWgmmaStageAlign : 0);
}

// ---- Kernel arguments ----------------------------------------------------------------------
struct GroupedGemmParams {
  // A: activations (act dtype), row-major, `lda` elements between rows, 16-byte aligned rows.
  const void* a;
  i64 lda;
  // Quantized activations' scales, indexed by A row. e4m3: f32 (the value is e4m3 * scale),
  // act_scale token: a_scales[row]; block128: a_scales[row * a_scale_ld + k / 128]. e2m1: E8M0
  // bytes (the value is e2m1 * 2^(byte - 127)), block32: a_scales[row * a_scale_ld + k / 32],
  // rows 16-byte aligned (a_scale_ld a multiple of 16).
  const void* a_scales;
  i64 a_scale_ld;
  // block128 scales stored column-major, as DeepEP's dispatch and DeepGEMM lay them out: the
  // 128-k block b of a row is a_scale_k_stride elements from block b - 1 (0 or 1: row-major),
  // so a_scales[row * a_scale_ld + (k / 128) * a_scale_k_stride]; masked layout: expert e's
  // scales begin e * a_scale_expert_skew elements past those of row e * m, which reads
  // [E][K / 128][m] slabs in place (a_scale_ld 1, a_scale_k_stride m, skew (K / 128 - 1) m).
  i64 a_scale_k_stride;
  i64 a_scale_expert_skew;
  // B: packed weights, scales ([E][K/group][N], scale dtype) and, for int4_asym, zero points.
  const u8* b;
  const void* b_scales;
  const u8* b_zeros;
  // MXFP4: each expert's scale-byte range, inside the packed scales buffer (at
  // mxfp4_scale_range_offset); the op sets it from b_scales.
  const u32* b_scale_ranges;
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

  // split-K > 1 (deterministic): split z of an output tile stores its f32 partial sums in slot z
  // of the tile's workspace and increments the tile's counter; the split that brings it to
  // split_k adds the slots in split order, runs the epilogue and resets the counter to zero.
  // Workspace: split_k BM x BN f32 slots per output tile (gridDim.x of them); counters: one per
  // output tile, zero before the first launch and left at zero by every launch.
  float* workspace;
  u32* tile_counters;

  // indexed layout, 1: the routing (sorted_token_ids, expert_ids, num_tokens_post_pad), the
  // split-K counters and the weights are all complete before this kernel can start (the fused
  // layer's down projection): the kernel ahead of it (the gate/up GEMM, or the quantization of
  // its output) lets it be scheduled only once each of its blocks has passed its own
  // grid_dependency_wait, which orders it after the align. (Not before the kernel ahead began:
  // the align lets the gate/up GEMM start at once.) Under programmatic dependent launch the
  // kernel then reads its routing and requests its first stages of weights before waiting for
  // that kernel, whose tail hides their latency; only the activations wait, and a block with
  // no work waits before it leaves. Every kernel of the layer must trigger its dependents only
  // after its own wait, or this breaks. 0: everything waits.
  u32 weights_before_dependency;
};

}  // namespace moejit
