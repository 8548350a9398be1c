#pragma once
// What the grouped GEMM's main loops share (gemm/grouped_gemm.cuh on mma.sync,
// gemm/grouped_gemm_wgmma.cuh on sm_90a's warpgroup MMA): the tile's shape and shared-memory
// layout from the spec, the block's work, and the epilogue's activation and stores.

#include "common/math.cuh"
#include "common/mma_block_scale.cuh"
#include "common/numeric.cuh"
#include "common/wgmma.cuh"
#include "gemm/dequant.cuh"
#include "gemm/grouped_gemm_params.cuh"

namespace moejit::kernels {

template <class Spec>
struct GemmShape {
  static constexpr u32 BM = Spec::bm, BN = Spec::bn, BK = Spec::bk, kStages = Spec::stages;
  static constexpr u32 kWarps = Spec::warps, kThreads = kWarps * 32;
  static constexpr u32 kWarpsM = Spec::warps_m, kWarpsN = kWarps / kWarpsM;
  static constexpr u32 WM = BM / kWarpsM, WN = BN / kWarpsN;
  static constexpr u32 kMTiles = WM / 16, kN8 = WN / 8, kN32 = WN / 32, kK32 = BK / 32;
  // e4m3 activations (W4A8): one m16n8k32 mma per n8 tile and 32 k, weights in the a8 order.
  static constexpr bool kAct8 = Spec::act == kernel_enum::e4m3;
  // e2m1 activations (W4A4, MXFP4 x MXFP4, sm_120a / sm_121a): one block-scaled m16n8k64 mma per
  // n8 tile and 64 k, weights in the a4 order, E8M0 scales on both sides applied by the mma.
  static constexpr bool kAct4 = Spec::act == kernel_enum::e2m1;
  static constexpr bool kQuantizedAct = kAct8 || kAct4;  // scaled per row (a_scales)
  static constexpr u32 kActBits = kAct4 ? 4 : kAct8 ? 8 : 16;
  static constexpr u32 kARowBytes = Spec::bk * kActBits / 8;  // one A row of a stage
  // sm_90, sm_100/103 and sm_110 have no e4m3 mma.sync: ptxas runs it as two f16 mma's plus an
  // f32 add of C per output. There the kernel converts the fragments to f16 itself and chains
  // the two mma's, which saves the add (one per output element per 32 k).
  static constexpr bool kE4m3ViaF16 = kAct8 && (Spec::sm == 90 || Spec::sm == 100 || Spec::sm == 103 || Spec::sm == 110);
  static constexpr bool kActScaleBlock = kAct8 && Spec::act_scale == kernel_enum::act_scale_block128;
  static constexpr u32 N = Spec::n, K = Spec::k, G = Spec::group;
  // The grid is one-dimensional over (column tile, row tile), column tiles fastest.
  static constexpr u32 kColumnTiles = (N + BN - 1) / BN;
  static constexpr bool kMxfp4 = Spec::weight == kernel_enum::mxfp4;
  // INT4 weights on those targets: the words go straight to f16 as W4A16 makes them (q - z
  // exact, gemm::int4_registers), not through e4m3 bytes, and A's e4m3 bytes are paired to the
  // k order that gives (even bytes, then odd bytes of each lane's four).
  static constexpr bool kInt4ViaF16 = kE4m3ViaF16 && !kMxfp4;
  // sm_120a / sm_121a with MXFP4 weights and e4m3 activations: the mma applies the weights' E8M0
  // bytes itself (kind::mxf8f6f4.block_scale, common/mma_block_scale.cuh), with the exponent of
  // each activation scale as its A scale; no f32 scaling per 32 k.
  static constexpr bool kBlockScaleMma = kQuantizedAct && kMxfp4 && Spec::block_scale_mma;
  static constexpr u32 kKStages = K / BK;  // stages of the whole K; a split takes a run of them
  static constexpr bool kAsym = Spec::weight == kernel_enum::int4_asym;
  static constexpr u32 kScaleBytes = Spec::scale == kernel_enum::e8m0 ? 1 : 2;
  static constexpr u32 kScaleRows = gemm_scale_rows(BK, G);
  static constexpr u32 kABytes = BM * kARowBytes, kBBytes = BN * BK / 2;
  static constexpr u32 kSBytes = kScaleRows * BN * kScaleBytes, kZBytes = kAsym ? kScaleRows * BN : 0;
  // The scale (and zero-point) row of a stage that 32-k tile kk of it reads: groups of G >= BK
  // have one row per stage.
  static constexpr u32 scale_row_in_stage(u32 kk) { return G >= BK ? 0 : kk * 32 / G; }
  // sm_90a's warpgroup MMA (gemm/grouped_gemm_wgmma.cuh): chosen on the host (gemm_uses_wgmma).
  static constexpr bool kWgmma = Spec::wgmma;
  // The wgmma tiles with e4m3 scaled per 128 k: each stage (one such block) also holds every
  // row's f32 scale for its k, after the zero points.
  static constexpr bool kStageRowScales = kWgmma && kActScaleBlock;
  static constexpr u32 kRowScaleBytes = kStageRowScales ? BM * 4 : 0;
  static constexpr u32 kOperandBytes = kABytes + kBBytes + kSBytes + kZBytes;  // a stage's A, B, scales, zeros
  static constexpr u32 kRowScaleOffset = kOperandBytes;                          // within a stage
  static constexpr u32 kStageBytes =
      kWgmma ? (kOperandBytes + kRowScaleBytes + kWgmmaStageAlign - 1) / kWgmmaStageAlign * kWgmmaStageAlign
             : kOperandBytes;
  static constexpr bool kActAndMul =
      Spec::epilogue == kernel_enum::silu_and_mul || Spec::epilogue == kernel_enum::swiglu_oai;
  static constexpr gemm::Half kHalf = Spec::act == kernel_enum::f16 ? gemm::Half::f16 : gemm::Half::bf16;
  static constexpr gemm::Half kInt4Half = kInt4ViaF16 ? gemm::Half::f16 : kHalf;  // INT4 B registers
  // The order the weights' tiles are in (grouped_gemm_params.cuh; the host's packed_order_for).
  static constexpr PackedOrder kOrder = kAct4                               ? PackedOrder::a4
                                        : kAct8                             ? PackedOrder::a8
                                        : kMxfp4 && kHalf == gemm::Half::f16 ? PackedOrder::a16f16
                                                                             : PackedOrder::a16;
  // The k run whose products are summed before they are scaled in f32: the weights' scale
  // group, cut at every 128 k when the activations are scaled per 128 k. With block-scaled
  // mma's the weights need no run: 128 k per activation scale, else the whole split.
  static constexpr u32 kFlush = kBlockScaleMma ? (kActScaleBlock ? 128 : K) : kActScaleBlock && G > 128 ? 128 : G;
  // e4m3: the power of two the B registers carry (gemm/dequant.cuh), undone in the epilogue.
  static constexpr int kRawExponent =
      !kAct8 || kInt4ViaF16 ? 0 : kMxfp4 ? gemm::kE2m1E4m3Exponent : gemm::kInt4E4m3Exponent;
  static constexpr bool kPartialN = N % BN != 0;  // the last column block has strips past N

  // Copies per stage in 16-byte chunks, and per thread.
  static constexpr u32 kARowChunks = kARowBytes / 16;  // 16-byte chunks in one A row of the tile
  // Bytes from one A row of the tile to the next. The wgmma tiles keep each 128 bytes of k (64
  // k of 16-bit activations, 128 of e4m3) as a block of BM rows x 128 bytes (kABlockBytes
  // apart), the unit of wgmma's 128-byte swizzle; e4m3 stages of 64 k are one block of 64-byte
  // rows, wgmma's 64-byte swizzle, which is the other tiles' swizzle of such rows. The other
  // tiles store whole rows.
  static constexpr u32 kARowPitch = kWgmma && kARowBytes > 128 ? 128 : kARowBytes;
  static constexpr u32 kABlockBytes = BM * kARowPitch;
  static constexpr prim::WgmmaLayout kWgmmaALayout =
      kARowPitch == 64 ? prim::WgmmaLayout::swizzle_64b : prim::WgmmaLayout::swizzle_128b;
  static constexpr u32 kAChunks = BM * kARowChunks, kBChunks = BN * BK / 32;
  static constexpr u32 kSChunks = kSBytes / 16, kZChunks = kZBytes / 16;
  static constexpr u32 kAPerThread = (kAChunks + kThreads - 1) / kThreads;
  static constexpr u32 kBPerThread = (kBChunks + kThreads - 1) / kThreads;

  static_assert(kStageBytes == gemm_stage_bytes(BM, BN, BK, G, kScaleBytes, kAsym, kActBits, kWgmma, kStageRowScales));
  static_assert(!kWgmma || (Spec::sm == 90 && (kMxfp4 || G >= 64) && !kAct4 && BN == 128 &&
                            (BK == 64 || BK == 128) && kWarps == 8 && (BM == 32 || BM == 64 || BM == 128) &&
                            Spec::split_k == 1 && kStages >= 3),
                "the wgmma tiles: sm_90a, MXFP4 or INT4 (groups of 64 k or more), 32, 64 or 128 x 128 x 64 or 128, "
                "8 warps, no split-K, 3+ stages");
  static_assert(!kWgmma || !kAct8 ||
                    ((Spec::act_scale == kernel_enum::act_scale_token && (BK == 128 || BK == 64)) ||
                     (Spec::act_scale == kernel_enum::act_scale_block128 && BK == 128)),
                "the wgmma tiles with e4m3 activations: scales per token with 128 or 64 k per stage (one row of the "
                "128- or 64-byte swizzle), or per 128 k with 128 k per stage (one scale block)");
  static_assert(!kAct4 || (kBlockScaleMma && BK % 64 == 0), "e2m1 activations: MXFP4 weights, sm_120a/121a, k64 steps");
#if MOEJIT_TARGET_DEVICE
  // A spec that asks for the block-scaled mma on a target (or toolkit) without it would trap.
  static_assert(!kBlockScaleMma || MOEJIT_HAS_BLOCK_SCALE_MMA, "block-scaled mma: sm_120a / sm_121a only");
#endif
  static_assert(kWarps % kWarpsM == 0 && BM % kWarpsM == 0 && BN % kWarpsN == 0);
  static_assert(WM % 16 == 0 && WN % 32 == 0, "warp tiles are whole m16 rows and n32 packed strips");
  static_assert(BK % 32 == 0 && N % 32 == 0 && K % BK == 0, "stages are whole 32-k tiles and divide K");
  static_assert(G % 32 == 0 && (G >= BK ? G % BK == 0 || G == K : BK % G == 0));
  static_assert(kStages >= 2);
  static_assert((kBChunks % kThreads == 0 || kBChunks < kThreads) && (kThreads % BK == 0 || BK % kThreads == 0),
                "weight chunks split evenly over the threads, at constant offsets");
  static_assert(kSChunks <= kThreads && kZChunks <= kThreads && kSBytes % 16 == 0);
};

template <class Spec>
MOEJIT_DEVICE float activate(float gate, float up) {
  if constexpr (Spec::epilogue == kernel_enum::silu_and_mul) return gate * prim::sigmoid(gate) * up;
  // gpt-oss clamped SwiGLU: alpha 1.702, limit 7. min_of / max_of return their first argument
  // when either is NaN, so a NaN gate or up stays NaN (as torch's clamp keeps it).
  const float g = min_of(gate, 7.0f), u = max_of(min_of(up, 7.0f), -7.0f);
  return g * prim::sigmoid(1.702f * g) * (u + 1.0f);
}

// f32 values of two 16-bit scales packed in a word (low half first).
template <class Spec>
MOEJIT_DEVICE void unpack_scale_pair(u32 bits, float& lo, float& hi) {
  if constexpr (Spec::scale == kernel_enum::bf16) {
    lo = prim::twin::f32_from_bits(bits << 16);
    hi = prim::twin::f32_from_bits(bits & 0xffff0000u);
  } else {
    lo = prim::f16_to_f32(static_cast<u16>(bits));
    hi = prim::f16_to_f32(static_cast<u16>(bits >> 16));
  }
}

// Two adjacent output elements of row `row`, columns `col` and `col + 1`.
template <class Spec>
MOEJIT_DEVICE void store_pair(const GroupedGemmParams& p, i64 row, u32 col, float v0, float v1) {
  if constexpr (Spec::out == kernel_enum::f32) {
    float* c = static_cast<float*>(p.c) + row * p.ldc + col;
    c[0] = v0;
    c[1] = v1;
  } else {
    const u32 packed = Spec::out == kernel_enum::bf16 ? prim::pack_bf16x2(v0, v1) : prim::pack_f16x2(v0, v1);
    *reinterpret_cast<u32*>(static_cast<u16*>(p.c) + row * p.ldc + col) = packed;
  }
}

// What the block knows before its main loop: which expert and rows, which stages.
struct TileWork {
  i32 expert;
  u32 n0;            // first packed column of the block
  u32 stage_begin;   // this split's stages [stage_begin, stage_end) of K / BK
  u32 stage_end;
  u32 scale_range;   // MXFP4: the expert's scale-byte range (grouped_gemm_params.cuh)
};

}  // namespace moejit::kernels
