#pragma once
// Grouped GEMM for MoE with 4-bit weights on the mma.sync path (sm_80 ... sm_121a):
// C = epilogue(A * W_e^T), A in bf16/f16 (mma.m16n8k16), e4m3 with f32 scales per token or per
// 128 k (mma.m16n8k32, sm_89+), or e2m1 with E8M0 scales per 32 k (block-scaled mma.m16n8k64,
// sm_120a / sm_121a, MXFP4 weights), W_e MXFP4 or INT4 in moejit's packed layout, in the fragment
// order of its activation width (gemm/grouped_gemm_params.cuh, templates/README.md).
//
// One block computes a BM x BN tile of C for one expert over a range of whole k stages (its
// split). A multi-stage cp.async pipeline streams the block's A rows (gathered per the MoE
// layout) and its packed weight strips into shared memory; every thread's copy addresses are
// computed once and advanced by a constant per stage. Each warp owns WM x WN of the tile, reads
// A fragments with ldmatrix (XOR-swizzled rows: conflict-free) and its weights with one 16-byte
// shared load per lane per 32 x 32 tile, and dequantizes them in registers into B fragments
// (gemm/dequant.cuh): a few integer operations per register.
//
// Scales. MXFP4 experts whose scale bytes span a modest range (the packer records each
// expert's smallest and largest byte) get their E8M0 scales folded into the B fragments: one
// packed multiply per register, which also undoes the raw registers' 2^-126, exact because
// every scale is a power of two; the f32 results are multiplied by the expert's fixed offset
// in the epilogue. Every other expert (NaN or extreme scale bytes), and every INT4 weight, sums
// each scale group's products in f32 and multiplies them by the group's scale in f32, exact for
// E8M0 and one rounding for bf16/f16 scales (per-channel scales: once at the end).
// Split-K: splits are whole stages; the last split of a tile to finish adds all the splits'
// partial tiles in split order, so sums are bitwise reproducible and no block waits for another.
// On sm_90a the prefill tiles of bf16/f16 activations run MXFP4's fragment-scaled experts, and
// INT4 with scale groups of 64 k or more, on the warpgroup MMA instead
// (gemm/grouped_gemm_wgmma.cuh), with the same copies.
//
// Spec (generated): weight, scale, act, act_scale, out, layout, epilogue, n, k, experts, group,
// bm, bn, bk, stages, warps, warps_m, split_k, pinned_m, sm (the target's SM version),
// block_scale_mma, wgmma.

#include "common/atomic.cuh"
#include "common/cp_async.cuh"
#include "common/grid_dependency.cuh"
#include "common/ldmatrix.cuh"
#include "common/math.cuh"
#include "common/memory.cuh"
#include "common/mma.cuh"
#include "common/mma_block_scale.cuh"
#include "common/sync.cuh"
#include "common/warp.cuh"
#include "gemm/dequant.cuh"
#include "gemm/grouped_gemm_params.cuh"
#include "gemm/grouped_gemm_tile.cuh"
#include "gemm/grouped_gemm_wgmma.cuh"

namespace moejit::kernels {

// A-tile rows are kRowChunks chunks of 16 bytes (BK / 8 for 16-bit activations, BK / 16 for
// e4m3, BK / 32 for e2m1); chunk c of row r is stored at chunk c ^ f(r) so that the 8 rows an ldmatrix reads at
// one chunk hit 8 different 16-byte bank groups of the 128-byte bank row. f repeats every
// kSwizzleRows rows.
constexpr u32 kSwizzleRows = 8;
static_assert(16 % kSwizzleRows == 0, "an m16 tile's rows start at the same place in the swizzle pattern");
template <u32 kRowChunks>
MOEJIT_DEVICE u32 swizzle_chunk(u32 row, u32 chunk) {
  if constexpr (kRowChunks == 2) return chunk ^ ((row / 4) % 2);
  else if constexpr (kRowChunks == 4) return chunk ^ ((row / 2) % 4);
  else return chunk ^ (row % 8);
}

// Where 16-byte chunk `chunk` of row `row` lies in a stage's A tile: rows of the swizzle above,
// or, in the wgmma tiles, blocks (GemmShape::kABlockBytes) whose 128-byte rows, 64 k of a
// 16-bit type or 128 k of e4m3, are wgmma's 128-byte swizzle. (64-byte rows, e4m3 stages of
// 64 k, are wgmma's 64-byte swizzle as the rows above have it.)
template <class S>
MOEJIT_DEVICE u32 a_tile_offset(u32 row, u32 chunk) {
  if constexpr (S::kWgmma && S::kARowPitch == 128)
    return chunk / 8 * S::kABlockBytes + row * 128 + ((chunk % 8) ^ (row % kSwizzleRows)) * 16;
  else return row * S::kARowBytes + swizzle_chunk<S::kARowChunks>(row, chunk) * 16;
}

template <gemm::Half kHalf>
MOEJIT_DEVICE void mma(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2], const float (&c)[4]) {
  if constexpr (kHalf == gemm::Half::bf16) prim::mma_m16n8k16_bf16(d, a, b, c);
  else prim::mma_m16n8k16_f16(d, a, b, c);
}

// A block-scaled e4m3 mma of n8 tile w of a packed strip (S::kBlockScaleMma): the tile's
// column scales are byte w of the strip's scale word, given by lane 4 * column (thread-id-b 0);
// rows g and g + 8 take their scales from lanes 4g and 4g + 1 (thread-id-a 0), byte 0. The
// selectors are immediates: w is a constant once the kernel's loops are unrolled.
MOEJIT_DEVICE void mma_e4m3_block_scaled(u32 w, float (&d)[4], const u32 (&a)[4], const u32 (&b)[2],
                                         const float (&c)[4], u32 scale_a, u32 scale_b) {
  using namespace moejit::prim;
  switch (w) {
    case 0: mma_m16n8k32_e4m3_e4m3_block_scale<0, 0, 0, 0>(d, a, b, c, scale_a, scale_b); break;
    case 1: mma_m16n8k32_e4m3_e4m3_block_scale<0, 0, 1, 0>(d, a, b, c, scale_a, scale_b); break;
    case 2: mma_m16n8k32_e4m3_e4m3_block_scale<0, 0, 2, 0>(d, a, b, c, scale_a, scale_b); break;
    default: mma_m16n8k32_e4m3_e4m3_block_scale<0, 0, 3, 0>(d, a, b, c, scale_a, scale_b); break;
  }
}

// A block-scaled e2m1 mma (kind::mxf4, k64) of n8 tile w of a packed strip (S::kAct4): the
// scale words hold two E8M0 bytes (k 0..31, 32..63) per row or column at bytes 0-1 and 2-3;
// the A pair (0 or 1) is the k64 step's half of its lane's word, the B pair w % 2 (tiles 0 and
// 1 share one word, 2 and 3 the other). Lanes 4g / 4g + 1 give rows g / g + 8; lane 4g column g.
MOEJIT_DEVICE void mma_e2m1_block_scaled(u32 a_pair, u32 b_pair, float (&d)[4], const u32 (&a)[4], const u32 (&b)[2],
                                         const float (&c)[4], u32 scale_a, u32 scale_b) {
  using namespace moejit::prim;
  switch (2 * a_pair + b_pair) {
    case 0: mma_m16n8k64_e2m1_block_scale<0, 0, 0, 0>(d, a, b, c, scale_a, scale_b); break;
    case 1: mma_m16n8k64_e2m1_block_scale<0, 0, 2, 0>(d, a, b, c, scale_a, scale_b); break;
    case 2: mma_m16n8k64_e2m1_block_scale<2, 0, 0, 0>(d, a, b, c, scale_a, scale_b); break;
    default: mma_m16n8k64_e2m1_block_scale<2, 0, 2, 0>(d, a, b, c, scale_a, scale_b); break;
  }
}

// The main loop, the split-K reduction and the epilogue of one block. kFragmentScales: MXFP4
// scales folded into the B fragments (the expert's range allows it); else scaled in f32 per
// group. With e4m3 activations that is where the mma runs in f16 (S::kE4m3ViaF16): one packed
// multiply per f16 pair of the e4m3 B bytes, as for bf16/f16 activations.
// `dependency_pending`: the kernel ahead has not been waited for yet (weights_before_dependency):
// the prologue requests its weight stages first, then waits, then requests the activations.
// kPlainScales (e4m3 activations, MXFP4): the expert's scale bytes are all in the plain window
// (gemm::e8m0_scales_plain): each converts with a shift, and per-token activation scales wait
// for the epilogue.
template <class Spec, bool kFragmentScales, bool kPlainScales = false>
MOEJIT_DEVICE void run_tile(const GroupedGemmParams& p, const TileWork& work, unsigned char* smem,
                            bool dependency_pending) {
  using namespace moejit::prim;
  using S = GemmShape<Spec>;
  constexpr u32 BM = S::BM, BN = S::BN, BK = S::BK, T = S::kThreads;
  static_assert(!kFragmentScales || (S::kMxfp4 && (!S::kQuantizedAct || S::kE4m3ViaF16)));
  static_assert(!kPlainScales || (S::kMxfp4 && S::kAct8 && !S::kBlockScaleMma));
  // e4m3: where the activations' scales (times the registers' power of two) are applied: to
  // each run's sums, or once in the epilogue (per-token scales of a plain-window expert, or
  // of sums that carry the weights' scales already: block-scaled mma's, fragment scales).
  constexpr bool kActScaleInRuns =
      S::kAct8 && (S::kActScaleBlock || (!kPlainScales && !kFragmentScales && !S::kBlockScaleMma));
  constexpr bool kActScaleAtEnd = S::kAct8 && !kActScaleInRuns;
  // The k run whose sums are scaled together: with the weights' scales on the fragments, only
  // the activations' 128-k blocks cut the sums (else none does).
  constexpr u32 kRun = kFragmentScales ? (S::kActScaleBlock ? 128 : S::K) : S::kFlush;
  // The power of two the B registers carry, undone with the activations' scales: the fragment
  // operands of e4m3 pairs fold it in.
  constexpr int kRawExponent = kFragmentScales ? 0 : S::kRawExponent;
  const i64* a_offset = reinterpret_cast<const i64*>(smem + S::kStages * S::kStageBytes);  // -1: no row
  const i64* c_row = a_offset + BM;                                                         // -1: not written
  const i32* a_scale_row = reinterpret_cast<const i32*>(c_row + BM);  // e4m3 / e2m1: row of a_scales (-1: none)

  const u32 tid = thread_x(), warp = tid / 32, lane = lane_id();
  const u32 warp_m = warp / S::kWarpsN, warp_n = warp % S::kWarpsN;
  const u32 g = lane / 4, t = lane % 4;
  const u32 stages = work.stage_end - work.stage_begin;

  // ---- Copy addresses: computed once, advanced by a constant per stage ----
  // B: the stage's weights are BN / 32 runs (one per strip) of BK chunks of 16 bytes, chunk c =
  // strip * BK + k-chunk stored at c * 16 in the stage. Strip-major copying gives each strip T /
  // strips threads, each taking every (T / strips)-th chunk of it: a thread's copies then lie
  // within a few KB of one another and share one 64-bit address, as cp.async's global address
  // offset field is only 12 bits (signed). Where a strip has fewer chunks than that, thread tid
  // copies chunks tid + i * T, spread over strips K * 16 bytes apart (an address each).
  constexpr u32 kBStrips = BN / 32;
  constexpr bool kStripMajor = T % kBStrips == 0 && BK % (T / kBStrips) == 0;
  constexpr u32 kStripThreads = kStripMajor ? T / kBStrips : 1;
  const u8* b_src = p.b + static_cast<u64>(work.expert) * (static_cast<u64>(S::N) * S::K / 2) +
                    static_cast<u64>(work.n0 / 32) * (S::K * 16) + static_cast<u64>(work.stage_begin) * (BK * 16);
  u32 b_first_chunk, b_strip0;  // the thread's first chunk in the stage and its strip
  if constexpr (kStripMajor) {
    b_strip0 = tid / kStripThreads;
    b_first_chunk = b_strip0 * BK + tid % kStripThreads;
  } else {
    b_strip0 = T >= BK ? tid / BK : 0;
    b_first_chunk = tid;
  }
  auto b_strip_of = [&](u32 i) {
    return kStripMajor ? b_strip0 : T >= BK ? b_strip0 + i * (T / BK) : i / (BK / T);
  };
  // Chunk i of the thread, counted from its first one (a compile-time number of chunks).
  auto b_chunk_step = [&](u32 i) -> u32 { return kStripMajor ? i * kStripThreads : i * T; };
  // Where chunk c of a stage starts in the strip-major weights, from the stage's first byte.
  auto b_source_offset = [&](u32 c) -> u32 { return c / BK * (S::K * 16) + c % BK * 16; };
  b_src += b_source_offset(b_first_chunk);
  // Chunk i's source offset from the thread's first chunk: a compile-time constant, since a
  // thread's chunks all sit at the same position within BK (or within the same strip).
  auto b_constant_offset = [&](u32 i) -> u32 {
    return kStripMajor ? b_chunk_step(i) * 16
           : T >= BK   ? i * (T / BK) * (S::K * 16)
                       : (i / (BK / T)) * (S::K * 16) + (i % (BK / T)) * T * 16;
  };
  u32 b_bytes[S::kBPerThread];  // 16, or 0 (zero fill) for strips past N
  for (u32 i = 0; i < S::kBPerThread; ++i)
    b_bytes[i] = !S::kPartialN || work.n0 / 32 + b_strip_of(i) < S::N / 32 ? 16u : 0u;

  // A: chunk c = tid + i * T is row c / kARowChunks, 16-byte chunk c % kARowChunks of that row.
  // Offsets count elements (lda's unit); kActBits / 8 bytes each, 4-bit ones included (their
  // offsets are even: lda and every stage start are multiples of 32).
  constexpr u32 kActBits = S::kActBits, kARowChunks = S::kARowChunks;
  const unsigned char* a_src[S::kAPerThread];
  bool a_valid[S::kAPerThread];
  for (u32 i = 0; i < S::kAPerThread; ++i) {
    const u32 c = tid + i * T, r = c / kARowChunks, chunk = c % kARowChunks;
    const i64 off = c < S::kAChunks ? a_offset[r] : -1;
    // Rows with no token are not read: their chunks are filled with zeros (cp.async with no
    // source bytes), so every copy is issued unconditionally, the row's validity a predicate
    // of the copy rather than a branch around it (33 fewer instructions per stage in sm_90a's
    // INT4 64x128x64 tile). An mma row depends on its own A row only, and the epilogue and the
    // split-K reduction skip those rows.
    a_valid[i] = off >= 0;
    a_src[i] = static_cast<const unsigned char*>(p.a) +
               (max_of<i64>(off, 0) + static_cast<i64>(work.stage_begin) * BK + chunk * (128 / kActBits)) * kActBits / 8;
  }
  // Chunk i's place in the stage. Where T chunks span whole swizzle periods, chunk i lies a
  // constant distance past the first, so the main loop needs the first offset only: ptxas
  // rebuilt each one from tid every stage in the 64x128x64 tile (sm_90a), where the loop uses
  // nearly every register.
  constexpr bool kADstStep = T % kARowChunks == 0 && T / kARowChunks % kSwizzleRows == 0;
  auto a_dst_of_chunk = [&](u32 c) { return a_tile_offset<S>(c / kARowChunks, c % kARowChunks); };
  const u32 a_dst0 = a_dst_of_chunk(tid);
  auto a_dst = [&](u32 i) {
    return kADstStep ? a_dst0 + i * (T / kARowChunks) * S::kARowPitch : a_dst_of_chunk(tid + i * T);
  };

  // Scales and zero points: thread tid < chunks copies chunk tid of the stage's rows.
  const u8* scales = static_cast<const u8*>(p.b_scales);
  constexpr u32 kSRowChunks = BN * S::kScaleBytes / 16;
  const u32 s_row = tid / kSRowChunks, s_chunk = tid % kSRowChunks;
  const u64 s_first = (static_cast<u64>(work.expert) * (S::K / S::G) + s_row) * S::N + work.n0 +
                      s_chunk * 16 / S::kScaleBytes;
  const u32 s_bytes = !S::kPartialN || work.n0 + s_chunk * 16 / S::kScaleBytes < S::N ? 16u : 0u;
  constexpr u32 kZRowChunks = BN / 16;
  const u32 z_row = tid / kZRowChunks, z_chunk = tid % kZRowChunks;
  const u64 z_first = (static_cast<u64>(work.expert) * (S::K / S::G) + z_row) * S::N + work.n0 + z_chunk * 16;
  const u32 z_bytes = !S::kPartialN || work.n0 + z_chunk * 16 < S::N ? 16u : 0u;

  // The weights are read once per launch: keep them from evicting what is reused (activations,
  // scales, routing) from L2.
  const L2Policy weight_policy = l2_evict_first_policy();

  // Issues the copies of the split's stage `i` into the pipeline slot at `stage`: activations,
  // then weights with their scales and zero points. Chunk j of A lies a constant past the
  // thread's first (kADstStep), added to the pointer so that the copies take it as an
  // immediate: summed as 32-bit offsets first, the constants could not be moved out of the
  // unsigned additions, and ptxas built each address in a register of its own.
  auto load_activations = [&](unsigned char* stage, u32 i) {
    unsigned char* a_first = stage + a_dst0;
    for (u32 j = 0; j < S::kAPerThread; ++j)
      if (S::kAChunks % T == 0 || tid + j * T < S::kAChunks)  // chunks past the tile's rows: none
        cp_async_ca_16(kADstStep ? a_first + j * (T / kARowChunks) * S::kARowPitch : stage + a_dst(j),
                       a_src[j] + static_cast<u64>(i) * S::kARowBytes, a_valid[j] ? 16u : 0u);
  };
  auto load_weights = [&](unsigned char* stage, u32 i) {
    unsigned char* b_stage = stage + S::kABytes + b_first_chunk * 16;
    const u8* b_stage_src = b_src + static_cast<u64>(i) * (BK * 16);
    for (u32 j = 0; j < S::kBPerThread; ++j)
      if (S::kBChunks % T == 0 || tid < S::kBChunks)
        cp_async_cg_16_hint(b_stage + b_chunk_step(j) * 16, b_stage_src + b_constant_offset(j), weight_policy,
                            b_bytes[j]);
    // The stage's first scale-group row: groups of G >= BK span several stages.
    const u64 group0 = static_cast<u64>(work.stage_begin + i) * BK / S::G;
    if (tid < S::kSChunks)
      cp_async_cg_16(stage + S::kABytes + S::kBBytes + tid * 16,
                     scales + (s_first + group0 * S::N) * S::kScaleBytes, s_bytes);
    if constexpr (S::kAsym)
      if (tid < S::kZChunks)
        cp_async_cg_16(stage + S::kABytes + S::kBBytes + S::kSBytes + tid * 16, p.b_zeros + z_first + group0 * S::N,
                       z_bytes);
  };

  // The wgmma tiles: INT4 weights (with 16-bit or e4m3 activations), and MXFP4 experts whose
  // scales fold into the fragments (16-bit) or the e4m3 bytes (gemm::e4m3_fold_exact).
  if constexpr (S::kWgmma && (kFragmentScales || !S::kMxfp4)) {
    run_tile_wgmma<Spec>(p, work, smem, dependency_pending, load_activations, load_weights);
    return;
  }

  float acc[S::kMTiles][S::kN8][4];
  float part[S::kMTiles][S::kN8][4];  // the accumulator path: the current group's unscaled sums
  for (u32 mt = 0; mt < S::kMTiles; ++mt)
    for (u32 j = 0; j < S::kN8; ++j)
      for (u32 e = 0; e < 4; ++e) acc[mt][j][e] = part[mt][j][e] = 0.0f;

  // MXFP4 with fragment scales: the expert's constant for the scale operands.
  u32 scale_addend = 0;
  if constexpr (kFragmentScales && S::kAct8)
    scale_addend = gemm::fragment_scale_addend<gemm::Half::f16, gemm::kE2m1E4m3Exponent>(
        gemm::expert_scale_range(work.scale_range));
  else if constexpr (kFragmentScales)
    scale_addend = gemm::fragment_scale_addend<S::kHalf>(gemm::expert_scale_range(work.scale_range));
  // INT4: the zero-point offsets of the warp's columns, per strip and n8 (symmetric: constant);
  // for e4m3 B registers their byte-wise form.
  constexpr bool kInt4E4m3 = S::kAct8 && !S::kInt4ViaF16;
  gemm::Int4Offsets zero_offsets[S::kN32][4];
  gemm::Int4E4m3Offsets zero_offsets8[S::kN32][4];
  if constexpr (!S::kMxfp4)
    for (u32 s32 = 0; s32 < S::kN32; ++s32)
      for (u32 w = 0; w < 4; ++w) {
        if constexpr (kInt4E4m3) zero_offsets8[s32][w] = gemm::int4_e4m3_offsets(0x08080808u);
        else zero_offsets[s32][w] = gemm::int4_offsets<S::kInt4Half>(0x00080008u);
      }
  // e4m3 activations: the scales of the thread's rows (g, g + 8 of each m16 tile) times the
  // B registers' power of two, applied to each run's sums before the weights' scale so that
  // the f32 partial sums stay near the true values' range (an E8M0 byte of 0xFE times a raw
  // sum would overflow where the result does not). Per token: read once; per 128 k: read
  // when a run starts.
  // Block-scaled mma's (S::kBlockScaleMma) split each scale x into 2^e, the mma's ue8m0 A scale
  // (the byte is x's f32 exponent field: 0 means 2^-127, 0xFF NaN), and its remainder
  // x / 2^e in [1, 2) (x * 2^127 for a subnormal x), the f32 factor; both exact.
  float a_block_scale[S::kMTiles][2];
  [[maybe_unused]] u32 a_scale_byte[S::kMTiles];  // block-scaled mma's: the A scale this lane gives (row g + 8 (t % 2))
  // block128: the scales of the k block's column, for the layout the caller gave (row-major,
  // column-major, masked slabs: grouped_gemm_params.cuh).
  [[maybe_unused]] const i64 a_scale_k_stride = p.a_scale_k_stride != 0 ? p.a_scale_k_stride : 1;
  [[maybe_unused]] const i64 a_scale_expert_base =
      Spec::layout == kernel_enum::masked ? static_cast<i64>(work.expert) * p.a_scale_expert_skew : 0;
  auto load_a_block_scales = [&](u32 k0) {
    for (u32 mt = 0; mt < S::kMTiles; ++mt) {
      u32 byte[2];
      for (u32 h = 0; h < 2; ++h) {
        const i32 row = a_scale_row[warp_m * S::WM + mt * 16 + g + 8 * h];
        const i64 at = S::kActScaleBlock ? static_cast<i64>(row) * p.a_scale_ld + (k0 / 128) * a_scale_k_stride +
                                               a_scale_expert_base
                                         : row;
        float x = row >= 0 ? static_cast<const float*>(p.a_scales)[at] : 0.0f;
        if constexpr (S::kBlockScaleMma) {
          const u32 bits = twin::f32_bits(x);
          byte[h] = (bits >> 23) & 0xffu;
          x = byte[h] == 0 ? x * twin::f32_from_bits(254u << 23) : twin::f32_from_bits((bits & 0x807fffffu) | 0x3f800000u);
        }
        a_block_scale[mt][h] = x * static_cast<float>(1u << kRawExponent);
      }
      if constexpr (S::kBlockScaleMma) a_scale_byte[mt] = t % 2 == 0 ? byte[0] : byte[1];
    }
  };

  // Multiplies the finished group's sums by their f32 scales (columns 2t, 2t + 1 of each n8
  // tile: scale positions 8t + w and 8t + 4 + w of the strip).
  auto apply_group_scales = [&](const unsigned char* s_row_ptr) {
    for (u32 s32 = 0; s32 < S::kN32; ++s32) {
      float s0[4], s1[4];
      const unsigned char* strip = s_row_ptr + ((warp_n * S::kN32 + s32) * 32 + 8 * t) * S::kScaleBytes;
      if constexpr (S::kScaleBytes == 1) {
        const u32x2 v = ld_shared_v2(strip);
        for (u32 w = 0; w < 4; ++w) {
          if constexpr (kPlainScales) {
            s0[w] = gemm::e8m0_plain_to_f32(v.x, w);
            s1[w] = gemm::e8m0_plain_to_f32(v.y, w);
          } else {
            s0[w] = gemm::e8m0_to_f32((v.x >> (8 * w)) & 0xffu);
            s1[w] = gemm::e8m0_to_f32((v.y >> (8 * w)) & 0xffu);
          }
        }
      } else {
        const u32x4 v = ld_shared_v4(strip);
        unpack_scale_pair<Spec>(v.x, s0[0], s0[1]);
        unpack_scale_pair<Spec>(v.y, s0[2], s0[3]);
        unpack_scale_pair<Spec>(v.z, s1[0], s1[1]);
        unpack_scale_pair<Spec>(v.w, s1[2], s1[3]);
      }
      for (u32 w = 0; w < 4; ++w)
        for (u32 mt = 0; mt < S::kMTiles; ++mt) {
          float* a = acc[mt][s32 * 4 + w];
          const float* q = part[mt][s32 * 4 + w];
          if constexpr (kActScaleInRuns) {
            // The activations' scale first (row), then the weights' (column): two roundings.
            a[0] += (q[0] * a_block_scale[mt][0]) * s0[w];
            a[1] += (q[1] * a_block_scale[mt][0]) * s1[w];
            a[2] += (q[2] * a_block_scale[mt][1]) * s0[w];
            a[3] += (q[3] * a_block_scale[mt][1]) * s1[w];
          } else {
            a[0] += q[0] * s0[w];
            a[1] += q[1] * s1[w];
            a[2] += q[2] * s0[w];
            a[3] += q[3] * s1[w];
          }
        }
    }
  };

  const float kZero[4] = {0.0f, 0.0f, 0.0f, 0.0f};

  // The lane's ldmatrix.x4 address in a stage's A tile for the warp's first m16 tile, at chunk
  // column `chunk` (matrix q = lane / 8 is rows +8 if q is odd, the next chunk if q >= 2). Tile
  // mt lies mt * kAM16Bytes further on: 16 rows are whole swizzle periods, so the swizzle is the
  // same and the addresses differ by constants the loads take as immediates (ptxas added each
  // tile's offset per load before: 15-25 more instructions per stage in sm_90a's 64-row tiles).
  const u32 a_lane_row = warp_m * S::WM + lane % 8 + 8 * (lane / 8 % 2);
  constexpr u32 kAM16Bytes = 16 * S::kARowPitch;
  // (chunk is even: the lane's chunk lies in the same 64-k block of the wgmma tiles, a constant
  // further.)
  auto a_fragment = [&](const unsigned char* stage, u32 chunk) {
    if constexpr (S::kWgmma)
      return stage + chunk / 8 * S::kABlockBytes + a_tile_offset<S>(a_lane_row, chunk % 8 + lane / 16);
    else return stage + a_lane_row * S::kARowBytes + swizzle_chunk<kARowChunks>(a_lane_row, chunk + lane / 16) * 16;
  };

  // One stage: BK / 32 tiles of 32 k; each warp dequantizes its strips and runs its mma's.
  auto compute_stage = [&](const unsigned char* stage, u32 i) {
    const unsigned char* b_stage = stage + S::kABytes;
    const unsigned char* s_stage = b_stage + S::kBBytes;
    const u32 stage_index = work.stage_begin + i;
    auto tile32 = [&](u32 kk) {
      const u32 k0 = stage_index * BK + kk * 32;  // first k of this 32-k tile
      const u32 s_row_in_stage = S::scale_row_in_stage(kk);
      const unsigned char* s_row_ptr = s_stage + s_row_in_stage * BN * S::kScaleBytes;
      // A scale group starts here (or the split does); a summed run (kRun) starts or ends here
      // (or the split does).
      const bool first = kk == 0 && i == 0, last = kk + 1 == S::kK32 && i + 1 == stages;
      const bool group_start = k0 % S::G == 0 || first;
      const bool run_start = k0 % kRun == 0 || first;
      const bool run_end = (k0 + 32) % kRun == 0 || last;

      if constexpr (S::kAsym) {
        if (group_start)
          for (u32 s32 = 0; s32 < S::kN32; ++s32) {
            const u32 z4 = ld_shared_u32(s_stage + S::kSBytes + s_row_in_stage * BN + (warp_n * S::kN32 + s32) * 32 + 4 * g);
            for (u32 w = 0; w < 4; ++w) {
              if constexpr (kInt4E4m3) zero_offsets8[s32][w] = gemm::int4_e4m3_offsets(gemm::broadcast_byte(z4, w));
              else zero_offsets[s32][w] = gemm::int4_offsets<S::kInt4Half>(gemm::spread_byte(z4, w));
            }
          }
      }
      if constexpr (S::kActScaleBlock)
        if (run_start) load_a_block_scales(k0);

      if constexpr (S::kAct8) {
        // e4m3: one word per n8 tile is one B fragment; one ldmatrix.x4 per m16 tile covers the
        // 32 k (matrix q = lane / 8: rows +8 if q odd, 16 bytes of k further if q >= 2).
        // Where the target has no e4m3 mma.sync (kE4m3ViaF16), both fragments are converted to
        // f16 here and the 32 k run as two chained f16 m16n8k16 mma's: lane t's e4m3 bytes
        // (k 4t..4t+3, +16) go to the f16 fragment positions (2t, 2t+1) and (2t+8, 2t+9), the
        // same k permutation for A and B, so the sums are those of the e4m3 mma. INT4 there
        // (kInt4ViaF16) goes straight to f16: gemm::int4_registers pairs a word's bytes 0 and 2
        // (k 4t, 4t+2) and 1 and 3, low nibbles (k < 16) and high ones apart, so A's bytes are
        // paired the same way (prmt 0x3120) before the conversion.
        // Block-scaled mma's take each strip's scale word as it lies in shared memory: byte w of
        // lane 4g's word is column g of n8 tile w (as for fragment scales).
        constexpr u32 kBRegs = S::kE4m3ViaF16 ? 4 : 2;
        u32 b[S::kN8][kBRegs];
        [[maybe_unused]] u32 scale_word[S::kN32];
        for (u32 s32 = 0; s32 < S::kN32; ++s32) {
          const u32 strip = warp_n * S::kN32 + s32;
          if constexpr (S::kBlockScaleMma || kFragmentScales) scale_word[s32] = ld_shared_u32(s_row_ptr + strip * 32 + 4 * g);
          [[maybe_unused]] gemm::FragmentScaleStrip fragment_strip{};
          if constexpr (kFragmentScales) fragment_strip = gemm::fragment_scale_strip<gemm::Half::f16>(scale_word[s32], scale_addend);
          const u32x4 words = ld_shared_v4(b_stage + (strip * S::kK32 + kk) * kTileBytes + lane * 16);
          const u32 word[4] = {words.x, words.y, words.z, words.w};
          for (u32 w = 0; w < 4; ++w) {
            u32* out = b[s32 * 4 + w];
            if constexpr (S::kInt4ViaF16) {
              // h: (k 4t, 4t+2), (16+4t, 16+4t+2), (4t+1, 4t+3), (16+4t+1, 16+4t+3).
              u32 h[4];
              gemm::int4_registers<gemm::Half::f16>(word[w], zero_offsets[s32][w], h);
              out[0] = h[0], out[1] = h[2], out[2] = h[1], out[3] = h[3];
              continue;
            }
            u32 b8[2];
            if constexpr (S::kMxfp4) gemm::e2m1_e4m3_registers(word[w], b8);
            else gemm::int4_e4m3_registers(word[w], zero_offsets8[s32][w], b8);
            if constexpr (S::kE4m3ViaF16) {
              for (u32 r = 0; r < 2; ++r) {
                out[2 * r] = e4m3x2_to_f16x2(static_cast<u16>(b8[r]));
                out[2 * r + 1] = e4m3x2_to_f16x2_high(b8[r]);
              }
              if constexpr (kFragmentScales) {  // word w is column g of n8 tile w: byte w of the scale word
                const u32 factor = gemm::fragment_scale<gemm::Half::f16>(fragment_strip, w);
                for (u32 q = 0; q < 4; ++q) out[q] = mul_f16x2(out[q], factor);
              }
            } else {
              out[0] = b8[0];
              out[1] = b8[1];
            }
          }
        }
        const unsigned char* a_kk = a_fragment(stage, kk * 2);
        for (u32 mt = 0; mt < S::kMTiles; ++mt) {
          u32 a[4];
          ldmatrix_x4(a, a_kk + mt * kAM16Bytes);
          if constexpr (S::kInt4ViaF16)
            for (u32 r = 0; r < 4; ++r) a[r] = prmt(a[r], 0u, 0x3120u);  // bytes 0, 2, 1, 3
          if constexpr (S::kE4m3ViaF16) {
            // e4m3 a[0], a[1]: rows g, g + 8 at k 4t..4t+3; a[2], a[3]: the same at k + 16.
            auto f16 = [](u32 x, u32 half) { return half ? e4m3x2_to_f16x2_high(x) : e4m3x2_to_f16x2(static_cast<u16>(x)); };
            const u32 a_lo[4] = {f16(a[0], 0), f16(a[1], 0), f16(a[0], 1), f16(a[1], 1)};
            const u32 a_hi[4] = {f16(a[2], 0), f16(a[3], 0), f16(a[2], 1), f16(a[3], 1)};
            for (u32 j = 0; j < S::kN8; ++j) {
              const u32 b_lo[2] = {b[j][0], b[j][1]}, b_hi[2] = {b[j][2], b[j][3]};
              // Fragment-scaled sums need no run of their own unless the activations' blocks cut them.
              float(&d)[4] = kFragmentScales && !kActScaleInRuns ? acc[mt][j] : part[mt][j];
              if ((!kFragmentScales || kActScaleInRuns) && run_start) mma_m16n8k16_f16(d, a_lo, b_lo, kZero);
              else mma_m16n8k16_f16(d, a_lo, b_lo, d);
              mma_m16n8k16_f16(d, a_hi, b_hi, d);
            }
          } else if constexpr (S::kBlockScaleMma) {
            // Per-token scales: straight into the accumulators; per 128 k: a run of sums.
            for (u32 j = 0; j < S::kN8; ++j) {
              const u32 bj[2] = {b[j][0], b[j][1]};
              float(&d)[4] = kActScaleInRuns ? part[mt][j] : acc[mt][j];
              if (kActScaleInRuns && run_start) mma_e4m3_block_scaled(j % 4, d, a, bj, kZero, a_scale_byte[mt], scale_word[j / 4]);
              else mma_e4m3_block_scaled(j % 4, d, a, bj, d, a_scale_byte[mt], scale_word[j / 4]);
            }
          } else {
            for (u32 j = 0; j < S::kN8; ++j) {
              const u32 bj[2] = {b[j][0], b[j][1]};
              if (run_start) mma_m16n8k32_e4m3(part[mt][j], a, bj, kZero);
              else mma_m16n8k32_e4m3(part[mt][j], a, bj, part[mt][j]);
            }
          }
        }
        if constexpr (S::kBlockScaleMma || kFragmentScales) {
          if (kActScaleInRuns && run_end)
            for (u32 mt = 0; mt < S::kMTiles; ++mt)
              for (u32 j = 0; j < S::kN8; ++j)
                for (u32 e = 0; e < 4; ++e) acc[mt][j][e] += part[mt][j][e] * a_block_scale[mt][e / 2];
        } else if (run_end) {
          apply_group_scales(s_row_ptr);
        }
        return;
      }

      // Weights: one 16-byte word quad per strip, four registers per n8 tile.
      u32 b[S::kN8][4];
      for (u32 s32 = 0; s32 < S::kN32; ++s32) {
        const u32 strip = warp_n * S::kN32 + s32;
        const u32x4 words = ld_shared_v4(b_stage + (strip * S::kK32 + kk) * kTileBytes + lane * 16);
        const u32 word[4] = {words.x, words.y, words.z, words.w};
        if constexpr (S::kMxfp4) {
          gemm::FragmentScaleStrip scale_operands{};
          if constexpr (kFragmentScales)
            scale_operands = gemm::fragment_scale_strip<S::kHalf>(ld_shared_u32(s_row_ptr + strip * 32 + 4 * g), scale_addend);
          for (u32 w = 0; w < 4; ++w) {
            u32 raw[4];
            gemm::e2m1_registers<S::kHalf>(word[w], raw);
            const u32 factor = kFragmentScales
                                   ? gemm::fragment_scale<S::kHalf>(scale_operands, w)
                                   : gemm::kE2m1Unscale<S::kHalf>;
            for (u32 q = 0; q < 4; ++q)
              b[s32 * 4 + w][q] = S::kHalf == gemm::Half::bf16 ? mul_bf16x2(raw[q], factor) : mul_f16x2(raw[q], factor);
          }
        } else {
          for (u32 w = 0; w < 4; ++w) gemm::int4_registers<S::kHalf>(word[w], zero_offsets[s32][w], b[s32 * 4 + w]);
        }
      }

      for (u32 step = 0; step < 2; ++step) {
        const unsigned char* a_step = a_fragment(stage, kk * 4 + step * 2);
        for (u32 mt = 0; mt < S::kMTiles; ++mt) {
          u32 a[4];
          ldmatrix_x4(a, a_step + mt * kAM16Bytes);
          for (u32 j = 0; j < S::kN8; ++j) {
            const u32 bb[2] = {b[j][2 * step], b[j][2 * step + 1]};
            float(&d)[4] = kFragmentScales ? acc[mt][j] : part[mt][j];
            // The accumulator path starts each group's sums from zero.
            const bool fresh = !kFragmentScales && step == 0 && run_start;
            if (fresh) mma<S::kHalf>(d, a, bb, kZero);
            else mma<S::kHalf>(d, a, bb, d);
          }
        }
      }
      if constexpr (!kFragmentScales)
        if (run_end) apply_group_scales(s_row_ptr);
    };
    // In the wgmma tiles this is the path of the rare experts whose scales do not fold
    // (grouped_gemm_wgmma.cuh): unrolled, it would set the kernel's registers (191 against the
    // wgmma path's 92 in sm_90a's 64x128x128 tile; 123 rolled), and so its CTAs per SM.
    if constexpr (S::kWgmma) {
      MOEJIT_NO_UNROLL
      for (u32 kk = 0; kk < S::kK32; ++kk) tile32(kk);
    } else {
      MOEJIT_UNROLL
      for (u32 kk = 0; kk < S::kK32; ++kk) tile32(kk);
    }
  };

  // e2m1 activations (S::kAct4): each k64 step is one block-scaled mma per m16 x n8 tile, the
  // scales of both operands applied by it, summed straight into the accumulators.
  // A scales: lane 4g gives row g's two E8M0 bytes of a k64 step and lane 4g + 1 row g + 8's;
  // a stage's bytes of a row are consecutive in a_scales (BK / 32 of them, 16-byte aligned
  // rows), so one load per m16 tile gives every step of the stage: step s is the pair s % 2 of
  // word s / 2. They are read one stage ahead, in registers, so their latency hides behind a
  // stage of mma's. B scales: the strip's two scale rows of the step, bytes paired by a PRMT
  // (tile w's k-block 0 and 1 side by side).
  constexpr u32 kAScaleWords = S::kAct4 ? (BK >= 128 ? BK / 128 : 1) : 1;
  [[maybe_unused]] u32 a_mx_scales[S::kMTiles][kAScaleWords] = {};
  auto load_a_mx_scales = [&](u32 i) {
    const u32 k_block0 = (work.stage_begin + i) * (BK / 32);
    for (u32 mt = 0; mt < S::kMTiles; ++mt) {
      const i32 row = a_scale_row[warp_m * S::WM + mt * 16 + g + 8 * (t % 2)];
      const u8* at = static_cast<const u8*>(p.a_scales) + static_cast<i64>(max_of(row, 0)) * p.a_scale_ld + k_block0;
      for (u32 w = 0; w < kAScaleWords; ++w) {
        if constexpr (BK == 64) a_mx_scales[mt][w] = row >= 0 ? *reinterpret_cast<const u16*>(at) : 0u;
        else a_mx_scales[mt][w] = row >= 0 ? reinterpret_cast<const u32*>(at)[w] : 0u;
      }
    }
  };
  auto compute_stage_mxf4 = [&](const unsigned char* stage, u32 i) {
    const unsigned char* b_stage = stage + S::kABytes;
    const unsigned char* s_stage = b_stage + S::kBBytes;
    u32 a_scales_now[S::kMTiles][kAScaleWords];
    for (u32 mt = 0; mt < S::kMTiles; ++mt)
      for (u32 w = 0; w < kAScaleWords; ++w) a_scales_now[mt][w] = a_mx_scales[mt][w];
    if (i + 1 < stages) load_a_mx_scales(i + 1);
    MOEJIT_UNROLL
    for (u32 step = 0; step < BK / 64; ++step) {
      u32 b[S::kN8][2];
      u32 scale_b[S::kN32][2];  // tiles 0-1, 2-3 of each strip
      for (u32 s32 = 0; s32 < S::kN32; ++s32) {
        const u32 strip = warp_n * S::kN32 + s32;
        // The pair's first tile holds n8 tiles 0 and 1 (each k 0..31, then 32..63), its second
        // tiles 2 and 3 (gemm/grouped_gemm_params.cuh, packed_word_place).
        const u32x4 w01 = ld_shared_v4(b_stage + (strip * S::kK32 + 2 * step) * kTileBytes + lane * 16);
        const u32x4 w23 = ld_shared_v4(b_stage + (strip * S::kK32 + 2 * step + 1) * kTileBytes + lane * 16);
        b[s32 * 4 + 0][0] = w01.x;
        b[s32 * 4 + 0][1] = w01.y;
        b[s32 * 4 + 1][0] = w01.z;
        b[s32 * 4 + 1][1] = w01.w;
        b[s32 * 4 + 2][0] = w23.x;
        b[s32 * 4 + 2][1] = w23.y;
        b[s32 * 4 + 3][0] = w23.z;
        b[s32 * 4 + 3][1] = w23.w;
        const u32 s0 = ld_shared_u32(s_stage + (2 * step) * BN + strip * 32 + 4 * g);
        const u32 s1 = ld_shared_u32(s_stage + (2 * step + 1) * BN + strip * 32 + 4 * g);
        scale_b[s32][0] = prmt(s0, s1, 0x5140u);
        scale_b[s32][1] = prmt(s0, s1, 0x7362u);
      }
      const unsigned char* a_step = a_fragment(stage, 2 * step);
      for (u32 mt = 0; mt < S::kMTiles; ++mt) {
        u32 a[4];
        ldmatrix_x4(a, a_step + mt * kAM16Bytes);
        for (u32 j = 0; j < S::kN8; ++j) {
          const u32 bj[2] = {b[j][0], b[j][1]};
          mma_e2m1_block_scaled(step % 2, j % 2, acc[mt][j], a, bj, acc[mt][j], a_scales_now[mt][step / 2],
                                scale_b[j / 4][(j % 4) / 2]);
        }
      }
    }
  };

  // ---- Pipeline: kStages - 1 stages in flight ahead of the one being computed ----
  // With the dependency pending, the prologue's weights go first (into the first commit group,
  // which stage 0 waits for anyway) and the activations after the wait. The wait is on every
  // path (where the kernel waited at its start, a second one returns at once), so that every
  // path visibly waits (tests/test_pdl_paths.cpp reads that off the PTX).
  if (dependency_pending)
    for (u32 s = 0; s + 1 < S::kStages; ++s)
      if (s < stages) load_weights(smem + s * S::kStageBytes, s);
  grid_dependency_wait();
  for (u32 s = 0; s + 1 < S::kStages; ++s) {
    if (s < stages) {
      load_activations(smem + s * S::kStageBytes, s);
      if (!dependency_pending) load_weights(smem + s * S::kStageBytes, s);
    }
    cp_async_commit();
  }
  // Activation scales come from the kernel ahead too (the fused layer's quantization): read
  // after the prologue, which waited for it.
  if constexpr (S::kAct8 && !S::kActScaleBlock) load_a_block_scales(0);  // per token: one value per row
  if constexpr (S::kAct4)
    if (stages > 0) load_a_mx_scales(0);
  // Slots rotate: stage i computes in slot i % kStages while stage i + kStages - 1 loads into
  // the slot before it. The slots' addresses are carried from one stage to the next, advanced
  // by a constant: computed as smem + slot * kStageBytes, ptxas rebuilt the shared window's base
  // (from SR_CgaCtaId on sm_90) and every thread's copy offsets (from SR_TID) in each stage, up
  // to 20 instructions of an sm_90a stage. The slot index stays a counter (a modulo by 6 costs
  // a multiply-high every stage) that says when the compute slot wraps.
  u32 compute_slot = 0;
  unsigned char* compute_stage_ptr = smem;
  unsigned char* load_stage_ptr = smem + (S::kStages - 1) * S::kStageBytes;
  for (u32 i = 0; i < stages; ++i) {
    cp_async_wait<S::kStages - 2>();
    block_sync();  // stage i is in shared memory; every warp is done with stage i - 1's slot
    const u32 next = i + S::kStages - 1;
    if (next < stages) {
      load_activations(load_stage_ptr, next);
      load_weights(load_stage_ptr, next);
    }
    cp_async_commit();
    if constexpr (S::kAct4) compute_stage_mxf4(compute_stage_ptr, i);
    else compute_stage(compute_stage_ptr, i);
    load_stage_ptr = compute_stage_ptr;  // the slot just computed loads next
    const bool wrap = compute_slot + 1 == S::kStages;
    compute_slot = wrap ? 0 : compute_slot + 1;
    compute_stage_ptr =
        wrap ? compute_stage_ptr - (S::kStages - 1) * S::kStageBytes : compute_stage_ptr + S::kStageBytes;
  }
  cp_async_wait<0>();
  launch_dependent_grids();  // every load of the main loop is done: the next kernel may be scheduled

  // Where the thread's sums lie in the tile (the first row and column of its accumulators) and
  // the block's first column. Past the main loop of a split-1 kernel they come from the thread
  // and block indices read again, not from values kept since the top: the loop takes every
  // register there is, and ptxas spilled whichever of them it kept (MXFP4 64x128x64 and
  // 128x128x64 on sm_120a / sm_121a with the fused epilogues). Split-K kernels (decode tiles, far
  // from the register limit) keep them: there the reads made ptxas rebuild the thread index
  // inside the main loop (sm_90a, MXFP4 16x256x128: 626 instructions per stage instead of 592).
  u32 sum_row = warp_m * S::WM + g, sum_col = warp_n * S::WN + 2 * t, n0 = work.n0;
  if constexpr (Spec::split_k == 1) {
    const u32 thread = thread_x_reread(), warp_again = thread / 32, lane_again = thread % 32;  // blocks are 1-D
    sum_row = warp_again / S::kWarpsN * S::WM + lane_again / 4;
    sum_col = warp_again % S::kWarpsN * S::WN + 2 * (lane_again % 4);
    n0 = block_x_reread() % S::kColumnTiles * BN;
  }

  // ---- Split-K: the last split of a tile to finish sums every split's partial tile ----
  // Each split stores its partial sums in its own slot of the tile's workspace and counts itself
  // in; the one that counts last adds the slots in split order (its own from registers) and runs
  // the epilogue. No block waits for another, and the sum's order, hence every bit of it, is the
  // same whichever split finishes last. Only rows that hold a token travel through the workspace.
  // The last split zeroes what it read and the counter: the caller's workspace is left as it
  // came (zero), since a later launch of other rows or columns puts its counters elsewhere,
  // possibly where these slots were.
  if constexpr (Spec::split_k > 1) {
    const u32 tile = block_x();  // (row tile, column tile), as grouped_gemm_counter_count counts them
    float* slots = p.workspace + static_cast<u64>(tile) * Spec::split_k * BM * BN;
    u32* counter = p.tile_counters + tile;
    // Every accumulator of this thread, visited in one fixed order; f(value, r, c).
    auto for_each_sum = [&](auto&& f) {
      // Every loop that indexes the accumulators is unrolled: one that is not (ptxas kept the
      // epilogue's as a loop on sm_100a/sm_120a) puts them in local memory, main loop included.
      MOEJIT_UNROLL
      for (u32 mt = 0; mt < S::kMTiles; ++mt)
        MOEJIT_UNROLL
        for (u32 half_row = 0; half_row < 2; ++half_row) {
          const u32 r = sum_row + mt * 16 + 8 * half_row;
          if (c_row[r] < 0) continue;
          MOEJIT_UNROLL
          for (u32 j = 0; j < S::kN8; ++j)
            MOEJIT_UNROLL
            for (u32 e = 0; e < 2; ++e) f(acc[mt][j][2 * half_row + e], r, sum_col + j * 8 + e);
        }
    };
    float* own = slots + static_cast<u64>(block_z()) * BM * BN;
    for_each_sum([&](float& v, u32 r, u32 c) { own[r * BN + c] = v; });
    block_sync();  // every thread's slot is written (and the pipeline's shared memory is free)
    u32* last = reinterpret_cast<u32*>(smem);
    if (tid == 0) {
      // Release: the slots the barrier ordered before this thread are visible at GPU scope
      // before the block counts itself in (fence then atomic in one thread: the PTX memory
      // model's release pattern; a fence in each writer before the barrier is not one).
      fence_gpu();
      *last = global_atomic_add(counter, 1) + 1 == Spec::split_k ? 1u : 0u;
      fence_gpu();  // acquire: the other splits' slots, counted in before this, are visible
    }
    block_sync();
    if (*last == 0) return;
    for_each_sum([&](float& v, u32 r, u32 c) {
      float sum = block_z() == 0 ? v : slots[r * BN + c];
      MOEJIT_UNROLL
      for (u32 z = 1; z < Spec::split_k; ++z)
        sum += z == block_z() ? v : slots[static_cast<u64>(z) * BM * BN + r * BN + c];
      v = sum;
      MOEJIT_UNROLL
      for (u32 z = 0; z < Spec::split_k; ++z) slots[static_cast<u64>(z) * BM * BN + r * BN + c] = 0.0f;
    });
    if (tid == 0) store_release(counter, 0);  // left at zero for the next launch
  }

  // ---- Epilogue ----
  float result_scale = 1.0f;
  if constexpr (kFragmentScales) result_scale = gemm::fragment_scale_offset(gemm::expert_scale_range(work.scale_range));
  // MXFP4 tiles packed for other activations decoded to wrong weights: NaN says so, where numbers
  // would pass for results (every split of the expert sees the same mark; the sum is NaN too).
  if constexpr (S::kMxfp4)
    if (!packed_order_mark_accepts(work.scale_range, S::kOrder)) result_scale = twin::f32_from_bits(0x7fc00000u);  // a quiet NaN
  MOEJIT_UNROLL
  for (u32 mt = 0; mt < S::kMTiles; ++mt) {
    MOEJIT_UNROLL
    for (u32 half_row = 0; half_row < 2; ++half_row) {
      const u32 r = sum_row + mt * 16 + 8 * half_row;
      const i64 row = c_row[r];
      if (row < 0) continue;
      // Per-token activation scales of a plain-window or fragment-scaled expert: the row's, once
      // (times the fragments' offset 2^c, an exact power of two).
      float end_scale = result_scale;
      if constexpr (kActScaleAtEnd) end_scale = a_block_scale[mt][half_row] * result_scale;
      constexpr bool kEndScaled = kFragmentScales || kActScaleAtEnd || S::kMxfp4;
      MOEJIT_UNROLL
      for (u32 j = 0; j < S::kN8; ++j) {
        const u32 col = n0 + sum_col + j * 8;  // packed column
        if (col >= S::N) continue;
        float v0 = acc[mt][j][2 * half_row], v1 = acc[mt][j][2 * half_row + 1];
        if constexpr (kEndScaled) {
          v0 *= end_scale;
          v1 *= end_scale;
        }
        if (p.bias != nullptr) {
          v0 += p.bias[static_cast<u64>(work.expert) * S::N + col];
          v1 += p.bias[static_cast<u64>(work.expert) * S::N + col + 1];
        }
        if constexpr (S::kActAndMul) {
          if (act_and_mul_half_of_column(col) != 0) continue;  // up columns: read below, with their gate
          float u0 = acc[mt][j + 1][2 * half_row], u1 = acc[mt][j + 1][2 * half_row + 1];
          if constexpr (kEndScaled) {
            u0 *= end_scale;
            u1 *= end_scale;
          }
          if (p.bias != nullptr) {
            u0 += p.bias[static_cast<u64>(work.expert) * S::N + col + 8];
            u1 += p.bias[static_cast<u64>(work.expert) * S::N + col + 9];
          }
          store_pair<Spec>(p, row, act_and_mul_output_of_column(col), activate<Spec>(v0, u0),
                           activate<Spec>(v1, u1));
        } else {
          if constexpr (Spec::epilogue == kernel_enum::topk_weight) {
            const float w = p.topk_weights[row];
            v0 *= w;
            v1 *= w;
          }
          store_pair<Spec>(p, row, col, v0, v1);
        }
      }
    }
  }
}

template <class Spec>
MOEJIT_GLOBAL void MOEJIT_LAUNCH_BOUNDS(Spec::warps * 32) grouped_gemm_kernel(GroupedGemmParams p) {
  using namespace moejit::prim;
  using S = GemmShape<Spec>;
  constexpr u32 BM = S::BM;

  // Launched with programmatic dependent launch: the routing, the activations, the counts and
  // the split-K workspace come from (or are still used by) the kernels ahead of it. Every
  // block waits before anything else; except where the routing was complete before this kernel
  // could start (weights_before_dependency): then the routing is read at once, at GPU scope (no
  // stale L1 line), the weights are requested, and run_tile waits before the activations. A
  // block that leaves early waits on its way out all the same: a grid that completes without
  // waiting would let the kernels after it run beside the ones before it (a rank with no local
  // pairs leaves from every block while the quantization ahead still writes). Where the block
  // has waited already, a second wait returns at once.
  const bool dependency_pending = Spec::layout == kernel_enum::indexed && p.weights_before_dependency != 0;
  if (!dependency_pending) grid_dependency_wait();
  auto routing = [&](const i32* q) -> i32 {
    return dependency_pending ? static_cast<i32>(load_acquire(reinterpret_cast<const u32*>(q))) : *q;
  };

  unsigned char* smem = dynamic_shared();
  // wgmma tiles: the stages start 1024-byte aligned in the shared window (kWgmmaStageAlign
  // more bytes were asked for).
  if constexpr (S::kWgmma) smem += (kWgmmaStageAlign - shared_window_address(smem) % kWgmmaStageAlign) % kWgmmaStageAlign;
  i64* a_offset = reinterpret_cast<i64*>(smem + S::kStages * S::kStageBytes);  // -1: no row
  i64* c_row = a_offset + BM;                                                   // -1: not written
  i32* a_scale_row = reinterpret_cast<i32*>(c_row + BM);                        // e4m3 / e2m1 only
  // The row of a_scales of A row `a_row` (-1: no row).
  auto set_scale_row = [&](u32 r, i64 a_row) {
    if constexpr (S::kQuantizedAct) a_scale_row[r] = static_cast<i32>(a_row);
  };

  const u32 tid = thread_x(), lane = lane_id();
  const i32 m = Spec::pinned_m > 0 ? Spec::pinned_m : p.m;

  // ---- Which expert and rows this block owns (block-uniform; early exits precede barriers) ----
  // The grid is one-dimensional over (column tile, row tile), column tiles fastest: the order
  // in which the hardware dispatches a 2-D grid, without its 65535 limit on the row tiles (a
  // masked layout of 256 experts x 4096 rows has 65536 of 16 rows).
  const u32 column_tile = block_x() % S::kColumnTiles, row_tile = block_x() / S::kColumnTiles;
  TileWork work{};
  work.n0 = column_tile * S::BN;
  if constexpr (Spec::layout == kernel_enum::indexed) {
    const u32 tile = row_tile;
    const i64 post_pad = routing(p.num_tokens_post_pad);
    if (static_cast<i64>(tile) * BM >= post_pad) {
      grid_dependency_wait();
      return;
    }
    work.expert = routing(p.expert_ids + tile);
    // -1: a padding block; past the weights: routing that was not aligned for these experts.
    if (work.expert < 0 || work.expert >= static_cast<i32>(Spec::experts)) {
      grid_dependency_wait();
      return;
    }
    for (u32 r = tid; r < BM; r += S::kThreads) {
      // Only the count's entries are read: a count that is no multiple of the block rows (not
      // what an align writes) leaves the last block's tail as padding, not a read past the ids.
      const i64 slot = static_cast<i64>(tile) * BM + r;
      const i32 id = slot < post_pad ? routing(p.sorted_token_ids + slot) : -1;
      const bool valid = id >= 0 && id < m;
      a_offset[r] = valid ? static_cast<i64>(id / p.a_row_divisor) * p.lda : -1;
      c_row[r] = valid ? id : -1;
      set_scale_row(r, valid ? id / p.a_row_divisor : -1);
    }
  } else if constexpr (Spec::layout == kernel_enum::contiguous) {
    // Row tile y is the y-th BM-row tile counting experts in order; every warp finds it.
    // Offsets come from the device: each is clamped to [0, m], so rows outside A and C are never
    // touched (an expert whose offsets decrease gets no rows).
    auto offset = [&](u32 e) { return min_of(max_of(p.expert_offsets[e], 0), m); };
    const u32 tile = row_tile;
    u32 before = 0;  // tiles of the experts already passed
    i32 local = -1;
    work.expert = -1;
    for (u32 base = 0; base < Spec::experts && work.expert < 0; base += 32) {
      const u32 e = base + lane;
      u32 tiles = 0;
      if (e < Spec::experts) {
        const i32 rows = offset(e + 1) - offset(e);
        tiles = rows > 0 ? (static_cast<u32>(rows) + BM - 1) / BM : 0;
      }
      const u32 inclusive = warp_inclusive_sum(tiles);
      const u32 hit = ballot(tile < before + inclusive);
      if (hit != 0) {
        const u32 first = lowest_set_bit(hit);
        work.expert = static_cast<i32>(base + first);
        const u32 exclusive_first = shfl_idx(inclusive - tiles, first);
        local = static_cast<i32>(tile - before - exclusive_first);
      }
      before += shfl_idx(inclusive, 31);
    }
    if (work.expert < 0) return;
    // Rows in 64 bits: the last tile of an m near 2^31 reaches past it by up to BM - 1.
    const i64 row0 = offset(static_cast<u32>(work.expert)) + static_cast<i64>(local) * BM;
    const i64 row_end = offset(static_cast<u32>(work.expert) + 1);
    for (u32 r = tid; r < BM; r += S::kThreads) {
      const i64 row = row0 + r;
      a_offset[r] = row < row_end ? row * p.lda : -1;
      c_row[r] = row < row_end ? row : -1;
      set_scale_row(r, row < row_end ? row : -1);
    }
  } else {
    const u32 tiles_per_expert = (static_cast<u32>(m) + BM - 1) / BM;
    work.expert = static_cast<i32>(row_tile / tiles_per_expert);
    const i32 local = static_cast<i32>(row_tile % tiles_per_expert);
    // Counts come from the device; one above max_m would write into the next expert's slab.
    const i32 count = min_of(p.expert_counts[work.expert], m);
    if (static_cast<i64>(local) * BM >= count) return;
    for (u32 r = tid; r < BM; r += S::kThreads) {
      const i64 row = static_cast<i64>(local) * BM + r;
      const i64 slab_row = static_cast<i64>(work.expert) * m + row;
      a_offset[r] = row < count ? slab_row * p.lda : -1;
      c_row[r] = row < count ? slab_row : -1;
      set_scale_row(r, row < count ? slab_row : -1);
    }
  }

  // ---- This split's run of whole stages ----
  const u32 per_split = (S::kKStages + Spec::split_k - 1) / Spec::split_k;
  work.stage_begin = min_of(S::kKStages, block_z() * per_split);
  work.stage_end = min_of(S::kKStages, work.stage_begin + per_split);

  block_sync();  // row tables written

  if constexpr (S::kMxfp4) {
    work.scale_range = p.b_scale_ranges[work.expert];
    const gemm::ExpertScaleRange range = gemm::expert_scale_range(work.scale_range);
    if constexpr (S::kBlockScaleMma) {  // every scale byte goes to the mma as it is
      run_tile<Spec, false>(p, work, smem, dependency_pending);
      return;
    } else if constexpr (S::kAct8) {
      // The wgmma tiles fold the scales into the e4m3 bytes where the expert's range allows.
      if constexpr (S::kWgmma) {
        if (gemm::e4m3_fold_exact(range)) {
          run_tile<Spec, true>(p, work, smem, dependency_pending);
          return;
        }
      } else if constexpr (S::kE4m3ViaF16) {
        // mma.sync's e4m3 B registers have no room for the scales; their f16 pairs do (as
        // W4A16's f16 ones).
        if (gemm::fragment_scales_exact<gemm::Half::f16>(range)) {
          run_tile<Spec, true>(p, work, smem, dependency_pending);
          return;
        }
      }
      if (gemm::e8m0_scales_plain(range)) {
        run_tile<Spec, false, true>(p, work, smem, dependency_pending);
        return;
      }
    } else if (gemm::fragment_scales_exact<S::kHalf>(range)) {
      run_tile<Spec, true>(p, work, smem, dependency_pending);
      return;
    }
  }
  run_tile<Spec, false>(p, work, smem, dependency_pending);
}

}  // namespace moejit::kernels
