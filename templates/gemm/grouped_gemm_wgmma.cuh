#pragma once
// The grouped GEMM's main loop and epilogue on the warpgroup MMA of sm_90a (common/wgmma.cuh),
// for the tiles that have one (GemmShape::kWgmma: MXFP4 weights with their scales folded into
// the fragments, or INT4 weights with scale groups of 64 k or more, x bf16/f16 activations; or
// such weights x e4m3 activations scaled per token or per 128 k; 32, 64 or 128 rows x 128
// columns x 64 or 128 k per stage (128 for e4m3 scaled per 128 k), 8 warps, no split-K).
//
// The product is computed transposed: C^T = W_e * A^T. The weights are wgmma's A operand, from
// registers: warpgroup h (warps 4h .. 4h + 3) owns packed columns 64h .. 64h + 63 of the tile,
// and warp q of it the 16 columns 64h + 16q .. + 15, which it dequantizes once per stage (the
// mma.sync path dequantizes a column once per warp row of the tile). Those are n8 tiles 2(q % 2)
// and 2(q % 2) + 1 of packed strip 2h + q / 2: the lane's 8 bytes at 8 (q % 2) of its 16 in the
// strip's 32-k tile, whose B-fragment registers (gemm/dequant.cuh) are, pairwise, wgmma's A
// fragments: rows g and g + 8 are tiles 2(q % 2) and 2(q % 2) + 1. The activations are wgmma's B
// operand, from the stage's A tile in shared memory as the copies leave it: each 64 k of a 16-bit
// type is a block of 128-byte rows whose 16-byte chunks are XOR-swizzled by row % 8
// (GemmShape::kARowPitch, a_tile_offset), which is wgmma's 128-byte-swizzle K-major layout once
// the stage starts 1024-byte aligned (GemmShape pads the stages, grouped_gemm_kernel aligns the
// base). One m64nBMk16 wgmma per 16 k covers the whole tile's rows; a tile whose rows with a
// token fit a quarter or a half of it runs a main loop of m64n(BM/4)k16 or m64n(BM/2)k16
// wgmma's instead, which multiply those rows only (the others are padding).
//
// Pipelining: a 32-k tile's two wgmma's run while the warps dequantize the next one. Their A
// registers must stay unchanged until they complete, so the fragments alternate between two
// register sets of 8 registers, and each 32-k tile waits only for the previous one's group.
// (Whole stages of fragments, as the first version alternated, take 64 registers at 128 k.) The
// slot a wgmma reads is reloaded once its stage's groups are known complete: copies run
// kStages - 2 stages ahead, one fewer than on the mma.sync path.
//
// INT4: the B-fragment registers are q - z, exact (gemm::int4_registers), and the wgmma's sum
// one scale group's products; the group's first 32-k tile starts them from zero (the wgmma's
// accumulate flag off). When the next group starts, its first tile is dequantized while the
// last one's wgmma's run; then the warps wait for them and add the sums, times their columns'
// f32 scales, into `total` (the mma.sync path's per-group scaling, one rounding per group).
// The last group's sums are scaled in the epilogue; per-channel scales (one group of K) need
// no `total`. A flush exposes the wgmma latency once per group, so groups of 32 k stay on the
// mma.sync tiles (kernels/grouped_gemm.cpp, gemm_uses_wgmma).
//
// e4m3 activations (W4A8): each 32-k tile is one m64nBMk32 e4m3 wgmma. The weights are packed
// in the 8-bit order (PackedOrder::a8), whose words are mma.m16n8k32's B fragments, the lane's
// two per n8 tile; gemm::int4_e4m3_registers makes them (q - z) 2^-9 exactly, and, pairwise,
// they are wgmma's A fragment as for 16-bit types. MXFP4: a 32-k tile is one scale block, and
// gemm::e2m1_e4m3_folded_registers puts each column's block scale into its bytes' exponents
// (exact for experts whose scale bytes span at most 11 binades, gemm::e4m3_fold_exact; the
// others take the mma.sync path in the same kernel), so the sums need only the expert's 2^c.
// A stage's 128 k of a row are one 128-byte swizzle row; 64 k (K not a multiple of 128,
// per-token scales) one 64-byte swizzle row, the descriptor's 64-byte layout
// (GemmShape::kWgmmaALayout). The activations' per-token scales (INT4: times 2^9) multiply
// each row's sums in the epilogue: read once per tile into shared memory before the main loop.
// Scales per 128 k change at every stage, so every stage's sums are added into `total` apart,
// times their column's group scale (and 2^9; MXFP4: the expert's 2^c) and their row's scale
// for the stage: each stage carries its rows' scales, copied with its activations (one 4-byte
// cp.async per row), and a run that starts at a stage's first tile is the previous stage's,
// whose slot is intact until the next stage's copies are issued.
//
// Accumulator d[4j + r] of a thread (lane = 4g + t) is packed column 64h + 16q + g + 8 (r / 2)
// of row 8j + 2t + r % 2 of the tile. Row pairs of adjacent columns are swapped between lanes
// g and g ^ 1 (one shuffle per value pair) so that each lane stores two adjacent columns of one
// row, as the mma.sync path does.

#include "common/cp_async.cuh"
#include "common/grid_dependency.cuh"
#include "common/memory.cuh"
#include "common/sync.cuh"
#include "common/warp.cuh"
#include "common/wgmma.cuh"
#include "gemm/dequant.cuh"
#include "gemm/grouped_gemm_tile.cuh"

namespace moejit::kernels {

// The rows a tile's wgmma's multiply (their N), as a type: each count has a main loop of its own.
template <u32 N>
struct WgmmaRows {
  static constexpr u32 value = N;
};

// The wgmma's of 32-k tile kk of a stage, for rows 0 .. NR - 1 of the tile (the first NR / 2 of
// `acc`): two chained m64nNRk16 (e4m3: one m64nNRk32), one commit group, accumulating onto the
// sums (from zero where `fresh`: a scale group's first tile). k16 step s of the stage reads
// 64-k block s / 4 of the A tile, 32 bytes further per step within it (e4m3: the stage's 128 k
// are one block, 32 bytes per 32-k tile): 2 in the start address field (address / 16), which no
// step carries out of (the tile lies below 256 KiB). A function, not a lambda of the kernel's:
// NVRTC 13.0 crashes on a generic lambda called from another (the main loop, one per N).
template <class S, u32 NR, u32 kSteps>
MOEJIT_DEVICE void issue_wgmma(float (&acc)[S::BM / 2], u32 (&f)[kSteps][4], u64 a_tile_desc, u32 kk, bool fresh) {
  using namespace moejit::prim;
  static_assert(NR <= S::BM);
  float(&d)[NR / 2] = *reinterpret_cast<float(*)[NR / 2]>(acc);
  MOEJIT_UNROLL
  for (u32 s = 0; s < kSteps; ++s) wgmma_fence_operand(f[s]);
  wgmma_fence();
  if constexpr (S::kAct8) {
    wgmma_m64k32_e4m3<NR>(d, f[0], a_tile_desc + 2 * kk, fresh ? 0u : 1u);
  } else {
    MOEJIT_UNROLL
    for (u32 s = 0; s < 2; ++s) {
      const u32 step = 2 * kk + s;
      const u64 desc = a_tile_desc + step / 4 * (S::kABlockBytes / 16) + 2 * (step % 4);
      const u32 accumulate = s == 1 || !fresh ? 1u : 0u;
      if constexpr (S::kHalf == gemm::Half::bf16) wgmma_m64k16_bf16<NR>(d, f[s], desc, accumulate);
      else wgmma_m64k16_f16<NR>(d, f[s], desc, accumulate);
    }
  }
  wgmma_commit_group();
}

template <class Spec, class LoadActivations, class LoadWeights>
MOEJIT_DEVICE void run_tile_wgmma(const GroupedGemmParams& p, const TileWork& work, unsigned char* smem,
                                  bool dependency_pending, LoadActivations&& load_activations,
                                  LoadWeights&& load_weights) {
  using namespace moejit::prim;
  using S = GemmShape<Spec>;
  constexpr u32 BM = S::BM, BN = S::BN, BK = S::BK, kK32 = BK / 32;
  static_assert(S::kWgmma && BN == 128 && S::kWarps == 8 && S::kStages >= 3);
  static_assert(BM % 32 == 0 && BM / 4 >= 8, "whole warps of rows; a quarter of the tile is a wgmma's N (8 or more)");
  static_assert(kK32 % 2 == 0, "a stage's 32-k tiles alternate between the two fragment sets, starting with the first");
  // INT4: the scale groups whose sums are added into `total` (per-channel scales: none).
  constexpr bool kInt4 = !S::kMxfp4, kGroupRuns = kInt4 && S::G < S::K;
  // e4m3: one k32 wgmma per 32-k tile; 16-bit types: two k16 ones.
  constexpr bool kAct8 = S::kAct8;
  constexpr u32 kSteps = kAct8 ? 1 : 2;
  // e4m3 scaled per 128 k: each stage's sums scaled apart, by the rows' scales the stage holds.
  constexpr bool kRowBlocks = S::kStageRowScales;
  constexpr bool kTotal = kGroupRuns || kRowBlocks;
  constexpr u32 kRowScaleOffset = S::kRowScaleOffset;
  // The row tables grouped_gemm_kernel wrote after the stages: A offsets, C rows, a_scales rows.
  i64* const c_row = reinterpret_cast<i64*>(smem + S::kStages * S::kStageBytes) + BM;
  // e4m3: each row's index into a_scales (per token: replaced by its scale below).
  [[maybe_unused]] i32* const a_scale_row = reinterpret_cast<i32*>(c_row + BM);

  const u32 tid = thread_x(), warp = tid / 32, lane = lane_id(), g = lane / 4, t = lane % 4;
  const u32 group_warp = warp % 4;
  const u32 strip = warp / 4 * 2 + group_warp / 2, half = group_warp % 2;
  const u32 stages = work.stage_end - work.stage_begin;
  // MXFP4: the expert's constant for its scale operands (16-bit) or its bytes' addends (e4m3),
  // and what its f32 sums are multiplied by.
  const gemm::ExpertScaleRange range = gemm::expert_scale_range(work.scale_range);
  [[maybe_unused]] u32 scale_addend = 0;
  [[maybe_unused]] gemm::E4m3FoldTable fold_base{};
  if constexpr (!kInt4) {
    if constexpr (kAct8) fold_base = gemm::e4m3_fold_base(range);
    else scale_addend = gemm::fragment_scale_addend<S::kHalf>(range);
  }
  float result_scale = 1.0f;
  if constexpr (!kInt4) {
    result_scale = kAct8 ? gemm::e4m3_fold_offset(range) : gemm::fragment_scale_offset(range);
    if (!packed_order_mark_accepts(work.scale_range, S::kOrder)) result_scale = twin::f32_from_bits(0x7fc00000u);
  }
  // e4m3: the power of two the activations' scales take with them (INT4's registers are
  // (q - z) 2^-9; MXFP4's scales are in result_scale).
  constexpr float kRowScaleFactor = kInt4 ? static_cast<float>(1u << gemm::kInt4E4m3Exponent) : 1.0f;
  // INT4: the zero-point offsets of the warp's two columns (n8 tiles 2 half and 2 half + 1),
  // constant where the weights are symmetric, and their scales, two 16-bit values, as the
  // current group's first tile finds them.
  gemm::Int4Offsets zero_lo{}, zero_hi{};
  gemm::Int4E4m3Offsets zero8_lo{}, zero8_hi{};  // e4m3 registers: their byte-wise form
  if constexpr (kInt4 && !S::kAsym) {
    if constexpr (kAct8) zero8_lo = zero8_hi = gemm::int4_e4m3_offsets(0x08080808u);
    else zero_lo = zero_hi = gemm::int4_offsets<S::kHalf>(0x00080008u);
  }
  [[maybe_unused]] u32 group_scales = 0;

  // The warp's A fragments of 32-k tile kk of a stage: k16 step s is fragment s (e4m3: one k32
  // step).
  auto dequantize = [&](u32 (&frag)[kSteps][4], const unsigned char* stage, u32 kk) {
    const unsigned char* b_stage = stage + S::kABytes;
    const unsigned char* s_stage = b_stage + S::kBBytes;
    const u32x2 words = ld_shared_v2(b_stage + (strip * S::kK32 + kk) * kTileBytes + lane * 16 + half * 8);
    if constexpr (kAct8) {
      // B registers {b0: k 4t..4t+3, b1: k 16+4t..16+4t+3} of each tile; A = {row g k lo, row
      // g + 8 k lo, row g k hi, row g + 8 k hi}.
      u32 lo[2], hi[2];
      if constexpr (kInt4) {
        gemm::int4_e4m3_registers(words.x, zero8_lo, lo);
        gemm::int4_e4m3_registers(words.y, zero8_hi, hi);
      } else {
        // Byte w of the strip's scale word is n8 tile w's (row g's column) for this 32 k; the
        // warp's two (tiles 2 half, 2 half + 1) shifted to bytes 0 and 1, so that constant
        // selectors pick them (selectors held in registers made ptxas rebuild them from the
        // thread index in every stage of the 64-k tiles: 24 more instructions a stage).
        const u32 scales = ld_shared_u32(s_stage + kk * BN + strip * 32 + 4 * g) >> (16 * half);
        gemm::e2m1_e4m3_folded_registers(words.x, gemm::e4m3_fold_table(prmt(scales, 0u, 0x4440u), fold_base), lo);
        gemm::e2m1_e4m3_folded_registers(words.y, gemm::e4m3_fold_table(prmt(scales, 0u, 0x4441u), fold_base), hi);
      }
      frag[0][0] = lo[0];
      frag[0][1] = hi[0];
      frag[0][2] = lo[1];
      frag[0][3] = hi[1];
      return;
    }
    u32 lo[4], hi[4];  // n8 tiles 2 half and 2 half + 1: rows g and g + 8 of the warp's A
    if constexpr (kInt4) {
      gemm::int4_registers<S::kHalf>(words.x, zero_lo, lo);
      gemm::int4_registers<S::kHalf>(words.y, zero_hi, hi);
    } else {
      // Byte w of the strip's scale word is n8 tile w's: the warp's two moved to bytes 0 and 1,
      // so that the operands are picked by constants (a selector from `half` cost four
      // predicated PRMTs per 32 k).
      const gemm::FragmentScaleStrip scales = gemm::fragment_scale_strip<S::kHalf>(
          ld_shared_u32(s_stage + kk * BN + strip * 32 + 4 * g) >> (16 * half), scale_addend);
      gemm::e2m1_registers<S::kHalf>(words.x, lo);
      gemm::e2m1_registers<S::kHalf>(words.y, hi);
      const u32 lo_factor = gemm::fragment_scale<S::kHalf>(scales, 0);
      const u32 hi_factor = gemm::fragment_scale<S::kHalf>(scales, 1);
      MOEJIT_UNROLL
      for (u32 q = 0; q < 4; ++q) {
        lo[q] = S::kHalf == gemm::Half::bf16 ? mul_bf16x2(lo[q], lo_factor) : mul_f16x2(lo[q], lo_factor);
        hi[q] = S::kHalf == gemm::Half::bf16 ? mul_bf16x2(hi[q], hi_factor) : mul_f16x2(hi[q], hi_factor);
      }
    }
    // B registers {step 0: b0, b1}, {step 1: b0, b1} of each tile; A = {row g k lo, row g + 8
    // k lo, row g k hi, row g + 8 k hi}.
    MOEJIT_UNROLL
    for (u32 step = 0; step < 2; ++step) {
      u32(&a)[4] = frag[step];
      a[0] = lo[2 * step];
      a[1] = hi[2 * step];
      a[2] = lo[2 * step + 1];
      a[3] = hi[2 * step + 1];
    }
  };

  // INT4: at the first tile of a scale group, its zero points (before the tile's dequantization)
  // and its scales, from the group's row of the stage.
  auto load_group_zeros = [&](const unsigned char* stage, u32 kk) {
    if constexpr (S::kAsym) {
      const unsigned char* z_row = stage + S::kABytes + S::kBBytes + S::kSBytes + S::scale_row_in_stage(kk) * BN;
      const u32 z = ld_shared_u32(z_row + strip * 32 + 4 * g) >> (16 * half);
      if constexpr (kAct8) {
        zero8_lo = gemm::int4_e4m3_offsets(gemm::broadcast_byte(z, 0));
        zero8_hi = gemm::int4_e4m3_offsets(gemm::broadcast_byte(z, 1));
      } else {
        zero_lo = gemm::int4_offsets<S::kHalf>(gemm::spread_byte(z, 0));
        zero_hi = gemm::int4_offsets<S::kHalf>(gemm::spread_byte(z, 1));
      }
    }
  };
  // Scale positions 4g + 2 half and 4g + 2 half + 1 of the strip: adjacent 16-bit values.
  auto load_group_scales = [&](const unsigned char* stage, u32 kk) {
    const unsigned char* s_row = stage + S::kABytes + S::kBBytes + S::scale_row_in_stage(kk) * BN * S::kScaleBytes;
    group_scales = ld_shared_u32(s_row + (strip * 32 + 4 * g + 2 * half) * S::kScaleBytes);
  };

  float acc[BM / 2];
  MOEJIT_UNROLL
  for (u32 i = 0; i < BM / 2; ++i) acc[i] = 0.0f;
  float total[kTotal ? BM / 2 : 1];  // INT4: the finished runs' scaled sums
  MOEJIT_UNROLL
  for (u32 i = 0; i < (kTotal ? BM / 2 : 1); ++i) total[i] = 0.0f;
  // Adds the finished run's sums, times their scales, into `total`: after its wgmma's complete.
  // Rows scaled per 128 k: also times the scales of rows 8j + 2t and 8j + 2t + 1 that
  // `run_stage` (the run's stage) holds. Only the sums of the `rows` the wgmma's multiply
  // (WgmmaRows): the others stay zero, as do their totals.
  auto add_group = [&](auto rows, [[maybe_unused]] const unsigned char* run_stage) {
    constexpr u32 NR = decltype(rows)::value;
    if constexpr (kTotal) {
      float s[2] = {result_scale, result_scale};  // MXFP4: the expert's; INT4: the columns' below
      if constexpr (kInt4) unpack_scale_pair<Spec>(group_scales, s[0], s[1]);
      if constexpr (kRowBlocks) {
        MOEJIT_UNROLL
        for (u32 c = 0; c < 2; ++c) s[c] *= kRowScaleFactor;
        const unsigned char* row_scales = run_stage + kRowScaleOffset + 8 * t;  // row 2t; 8j further: 32j bytes
        MOEJIT_UNROLL
        for (u32 j = 0; j < NR / 8; ++j) {
          const u32x2 bits = ld_shared_v2(row_scales + 32 * j);
          const float r[2] = {twin::f32_from_bits(bits.x), twin::f32_from_bits(bits.y)};
          MOEJIT_UNROLL
          for (u32 e = 0; e < 4; ++e) total[4 * j + e] += acc[4 * j + e] * (s[e / 2] * r[e % 2]);
        }
      } else {
        MOEJIT_UNROLL
        for (u32 i = 0; i < NR / 2; ++i) total[i] += acc[i] * s[i % 4 / 2];
      }
    }
  };
  // Rows scaled per 128 k: the stage's scale of row tid, from a_scales (0 for no row), copied
  // with the stage's activations. Stages load in order, from 128-k block stage_begin on, so the
  // source advances by one block per copy (not at all for no row: nothing is read).
  [[maybe_unused]] const float* row_scale_next = static_cast<const float*>(p.a_scales);
  [[maybe_unused]] i64 row_scale_step = 0;
  [[maybe_unused]] u32 row_scale_bytes = 0;
  if constexpr (kRowBlocks) {
    if (tid < BM) {
      const i32 row = a_scale_row[tid];
      const i64 k_stride = p.a_scale_k_stride != 0 ? p.a_scale_k_stride : 1;
      const i64 expert_base =
          Spec::layout == kernel_enum::masked ? static_cast<i64>(work.expert) * p.a_scale_expert_skew : 0;
      if (row >= 0) {
        row_scale_next += static_cast<i64>(row) * p.a_scale_ld + static_cast<i64>(work.stage_begin) * k_stride + expert_base;
        row_scale_step = k_stride;
        row_scale_bytes = 4;
      }
    }
  }
  auto load_row_scales = [&]([[maybe_unused]] unsigned char* stage) {
    if constexpr (kRowBlocks) {
      if (tid < BM) {
        cp_async_ca_4(stage + kRowScaleOffset + 4 * tid, row_scale_next, row_scale_bytes);
        row_scale_next += row_scale_step;
      }
    }
  };
  u32 frag[2][kSteps][4];

  // ---- Pipeline: kStages - 2 stages in flight ahead of the one being computed ----
  constexpr u32 kAhead = S::kStages - 2;
  if (dependency_pending)
    for (u32 s = 0; s < kAhead; ++s)
      if (s < stages) load_weights(smem + s * S::kStageBytes, s);
  grid_dependency_wait();
  // e4m3 per token: each row's activation scale (INT4: times the registers' 2^9), in place of its
  // a_scales row (f32 bits; 0 for no row), for the epilogue: the main loop's first barrier
  // orders it.
  if constexpr (kAct8 && !kRowBlocks) {
    if (tid < BM) {
      const i32 row = a_scale_row[tid];
      const float x = row >= 0 ? static_cast<const float*>(p.a_scales)[row] : 0.0f;
      a_scale_row[tid] = static_cast<i32>(twin::f32_bits(x * kRowScaleFactor));
    }
  }
  for (u32 s = 0; s < kAhead; ++s) {
    if (s < stages) {
      load_activations(smem + s * S::kStageBytes, s);
      load_row_scales(smem + s * S::kStageBytes);
      if (!dependency_pending) load_weights(smem + s * S::kStageBytes, s);
    }
    cp_async_commit();
  }
  // Stage i computes in slot i % kStages and stage i + kAhead loads into slot (i - 2) % kStages.
  // The slots' addresses (and the computed one's descriptor) are carried from stage to stage,
  // advanced by a constant: from the slot index, ptxas rebuilt every thread's copy offsets from
  // its thread index in each stage, as on the mma.sync path, and each wgmma's descriptor from
  // the address.
  constexpr u32 kWrapBack = (S::kStages - 1) * S::kStageBytes;
  u32 slot = 0, load_slot = S::kStages - 2;
  unsigned char* compute_ptr = smem;
  unsigned char* load_ptr = smem + load_slot * S::kStageBytes;
  [[maybe_unused]] const unsigned char* previous_ptr = smem;  // stage i - 1's slot
  u64 compute_desc =
      make_wgmma_descriptor(shared_window_address(smem), 16, 8 * S::kARowPitch, S::kWgmmaALayout);
  // The main loop for wgmma's of `rows` rows (WgmmaRows): the tile's, or the quarter or half of
  // it that holds every row with a token (below).
  auto main_loop = [&](auto rows) {
    for (u32 i = 0; i < stages; ++i) {
      cp_async_wait<kAhead - 1>();
      fence_proxy_async_shared();  // this thread's copies, landed, before wgmma's reads of them
      block_sync();                // stage i is in shared memory; stage i - 2's wgmma's are done
      const u32 next = i + kAhead;
      if (next < stages) {
        load_activations(load_ptr, next);
        load_row_scales(load_ptr);
        load_weights(load_ptr, next);
      }
      cp_async_commit();
      // A 32-k tile's wgmma's run while the warps dequantize the next one. Their A registers must
      // stay unchanged until they complete: the fragments alternate between two register sets,
      // and each tile waits for the previous one's group, which frees the other set (and, at a
      // stage's first tile, the slot of stage i - 1).
      const u32 stage_index = work.stage_begin + i;
      MOEJIT_UNROLL
      for (u32 kk = 0; kk < kK32; ++kk) {
        // INT4: does a scale group start with this tile? (Groups of G >= BK start at a stage;
        // per-channel scales at the first.)
        bool group_start = false;
        if constexpr (kInt4)
          group_start = S::G >= BK ? kk == 0 && (i == 0 || (kGroupRuns && stage_index % (S::G / BK) == 0))
                                   : kk * 32 % S::G == 0;
        // A run of sums scaled together starts with each group and, rows scaled per 128 k, with
        // each stage.
        const bool run_start = group_start || (kRowBlocks && kk == 0);
        if (group_start) load_group_zeros(compute_ptr, kk);
        dequantize(frag[kk % 2], compute_ptr, kk);
        if (run_start) {
          if (i != 0 || kk != 0) {  // the previous run's sums, complete
            wgmma_wait_group<0>();
            wgmma_fence_operand(acc);
            add_group(rows, kk == 0 ? previous_ptr : compute_ptr);
          }
          if (group_start) load_group_scales(compute_ptr, kk);
        }
        issue_wgmma<S, decltype(rows)::value>(acc, frag[kk % 2], compute_desc, kk, run_start);
        wgmma_wait_group<1>();
      }
      const bool wrap = slot + 1 == S::kStages, load_wrap = load_slot + 1 == S::kStages;
      previous_ptr = compute_ptr;
      slot = wrap ? 0 : slot + 1;
      compute_ptr = wrap ? compute_ptr - kWrapBack : compute_ptr + S::kStageBytes;
      compute_desc = wrap ? compute_desc - kWrapBack / 16 : compute_desc + S::kStageBytes / 16;
      load_slot = load_wrap ? 0 : load_slot + 1;
      load_ptr = load_wrap ? load_ptr - kWrapBack : load_ptr + S::kStageBytes;
    }
    wgmma_wait_group<0>();
    wgmma_fence_operand(acc);
    // Rows scaled per 128 k: the last stage's sums, into `total` like the others.
    if constexpr (kRowBlocks) add_group(rows, previous_ptr);
    cp_async_wait<0>();
    launch_dependent_grids();  // every load of the main loop is done: the next kernel may be scheduled
  };

  // ---- Epilogue ----
  // e4m3 per token: the scales of rows 8j + 2t and 8j + 2t + 1, written before the main loop.
  auto row_scales = [&](u32 j, float& even, float& odd_row) {
    if constexpr (kAct8 && !kRowBlocks) {
      const u32x2 bits = ld_shared_v2(a_scale_row + 8 * j + 2 * t);
      even = twin::f32_from_bits(bits.x);
      odd_row = twin::f32_from_bits(bits.y);
    } else {
      even = odd_row = 1.0f;
    }
  };
  const u32 col0 = work.n0 + warp / 4 * 64 + group_warp * 16 + g;  // rows g and g + 8 of the warp's A
  const bool odd = g % 2 != 0;
  auto bias_of = [&](u32 col) {
    return p.bias != nullptr && col < S::N ? p.bias[static_cast<u64>(work.expert) * S::N + col] : 0.0f;
  };
  // Of values x (row r0 = 8j + 2t) and y (row r0 + 1) of column c, and the same of column c ^ 1 in
  // lane ^ 4: the even column's lane keeps row r0 (c, c + 1), the odd one row r0 + 1 (c - 1, c).
  auto pair_up = [&](float x, float y, float& first, float& second) {
    const float mine = odd ? y : x;
    const float theirs = twin::f32_from_bits(shfl_xor(twin::f32_bits(odd ? x : y), 4));
    first = odd ? theirs : mine;
    second = odd ? mine : theirs;
  };
  // Stores the rows the wgmma's multiplied (WgmmaRows); the others hold no token.
  auto store_rows = [&](auto rows) {
    // MXFP4: result_scale, the expert's offset (NaN for tiles packed for other activations).
    // INT4: the last group's (or the only group's) scales of the thread's two columns, its sums
    // added to the finished groups'.
    [[maybe_unused]] float column_scale[2] = {1.0f, 1.0f};
    if constexpr (kInt4) unpack_scale_pair<Spec>(group_scales, column_scale[0], column_scale[1]);
    auto result = [&](u32 i) {
      if constexpr (kRowBlocks) return total[i];  // every run scaled, rows' scales included
      else if constexpr (kGroupRuns) return total[i] + acc[i] * column_scale[i % 4 / 2];
      else if constexpr (kInt4) return acc[i] * column_scale[i % 4 / 2];
      else return acc[i] * result_scale;
    };
    MOEJIT_UNROLL
    for (u32 j = 0; j < decltype(rows)::value / 8; ++j) {
      const u32 r = 8 * j + 2 * t + (odd ? 1 : 0);  // the row this lane stores
      const i64 row = c_row[r];
      float rs[2];
      row_scales(j, rs[0], rs[1]);
      float v[4];
      MOEJIT_UNROLL
      for (u32 e = 0; e < 4; ++e) v[e] = result(4 * j + e) * rs[e % 2] + bias_of(col0 + 8 * (e / 2));
      if constexpr (S::kActAndMul) {
        // Column col0 is a gate column (its n8 tile is even) and col0 + 8 its up column.
        float first, second;
        pair_up(activate<Spec>(v[0], v[2]), activate<Spec>(v[1], v[3]), first, second);
        if (row >= 0 && col0 < S::N)
          store_pair<Spec>(p, row, act_and_mul_output_of_column(col0 - (odd ? 1 : 0)), first, second);
      } else {
        MOEJIT_UNROLL
        for (u32 h = 0; h < 2; ++h) {
          float first, second;
          pair_up(v[2 * h], v[2 * h + 1], first, second);
          if constexpr (Spec::epilogue == kernel_enum::topk_weight)
            if (row >= 0) {
              const float w = p.topk_weights[row];
              first *= w;
              second *= w;
            }
          const u32 col = col0 + 8 * h - (odd ? 1 : 0);
          if (row >= 0 && col < S::N) store_pair<Spec>(p, row, col, first, second);
        }
      }
    }
  };

  // A tile's rows past its last with a token are padding (the align pads each expert's last
  // tile), and the tensor cores would multiply them all the same. The wgmma's N is the rows, so
  // the tile takes the shortest of BM / 4, BM / 2 and BM that covers its rows (what the planner
  // counts: wgmma_rows_multiplied); their accumulators are the first of `acc` (and `total`), the
  // others stay zero, and no row past them is stored. Holes (a caller's own routing may
  // interleave padding) are multiplied like rows. Each N has its main loop and its epilogue: with
  // one epilogue after the three loops, every accumulator met there from three loops, and ptxas
  // found too few registers for the wgmma pipeline of some tiles that keep `total` (INT4 scale
  // groups, e4m3 scaled per 128 k) and serialized their wgmma's (its C7511).
  u32 rows_used = 0;
  MOEJIT_UNROLL
  for (u32 base = 0; base < BM; base += 32) {
    const u32 has_token = ballot(c_row[base + lane] >= 0);
    if (has_token != 0) rows_used = base + bit_length(has_token);
  }
  if constexpr (kTotal) {
    // Every tile has a k stage (no split-K here). Said for these tiles, because where the
    // compiler kept a path around the loop it zeroed the accumulators on it, between a wgmma and
    // its wait, and ptxas serialized the INT4 W4A8 tiles with zero points and per-128-k scales
    // for that (C7515). Not said for the others: their main loops grew by 15-45 instructions.
    if (stages == 0) trap("wgmma tile: no k stage");
  }
  auto run = [&](auto rows) {
    main_loop(rows);
    store_rows(rows);
  };
  if (rows_used <= BM / 4) run(WgmmaRows<BM / 4>{});
  else if (rows_used <= BM / 2) run(WgmmaRows<BM / 2>{});
  else run(WgmmaRows<BM>{});
}

}  // namespace moejit::kernels
