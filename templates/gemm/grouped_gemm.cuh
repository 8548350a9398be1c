#pragma once
// Grouped GEMM for MoE with 4-bit weights on the mma.sync path (sm_80 ... sm_121a):
// C = epilogue(A * W_e^T), A in bf16/f16, W_e MXFP4 or INT4 in moejit's packed layout
// (gemm/grouped_gemm_params.cuh, templates/README.md).
//
// One block computes a BM x BN tile of C for one expert. A multi-stage cp.async pipeline
// streams the block's A rows (gathered per the MoE layout, zero-filled past the valid rows) and
// its packed weight tiles into shared memory; each warp owns a WM x WN sub-tile, reads A
// fragments with ldmatrix (XOR-swizzled rows: conflict-free), reads its weight tiles with one
// 16-byte shared load per lane (512 contiguous bytes per warp: conflict-free), dequantizes them
// in registers straight into B fragments, and accumulates each scale group's unscaled products
// in f32 before multiplying by the group's scale in f32 (exact for E8M0, one rounding for
// bf16/f16 scales). Split-K is serial across the splits of a tile, so sums are bitwise
// reproducible.
//
// Spec (generated): weight, scale, act, out, layout, epilogue, n, k, experts, group, bm, bn,
// bk, stages, warps, warps_m, split_k, pinned_m.

#include "common/cp_async.cuh"
#include "common/ldmatrix.cuh"
#include "common/math.cuh"
#include "common/memory.cuh"
#include "common/mma.cuh"
#include "common/atomic.cuh"
#include "common/sync.cuh"
#include "common/warp.cuh"
#include "gemm/dequant.cuh"
#include "gemm/grouped_gemm_params.cuh"

namespace moejit::kernels {

template <class Spec>
struct GemmShape {
  static constexpr u32 BM = Spec::bm, BN = Spec::bn, BK = Spec::bk, kStages = Spec::stages;
  static constexpr u32 kWarps = Spec::warps, kThreads = kWarps * 32;
  static constexpr u32 kWarpsM = Spec::warps_m, kWarpsN = kWarps / kWarpsM;
  static constexpr u32 WM = BM / kWarpsM, WN = BN / kWarpsN;
  static constexpr u32 kMTiles = WM / 16, kN8 = WN / 8, kN32 = WN / 32;
  static constexpr u32 N = Spec::n, K = Spec::k, G = Spec::group, kKTiles = K / 32;
  static constexpr bool kAsym = Spec::weight == gemm_enum::int4_asym;
  static constexpr bool kMxfp4 = Spec::weight == gemm_enum::mxfp4;
  static constexpr u32 kScaleBytes = Spec::scale == gemm_enum::e8m0 ? 1 : 2;
  static constexpr u32 kScaleRows = gemm_scale_rows(BK, G);
  static constexpr u32 kABytes = BM * BK * 2, kBBytes = BN * BK / 2;
  static constexpr u32 kSBytes = kScaleRows * BN * kScaleBytes, kZBytes = kAsym ? kScaleRows * BN : 0;
  static constexpr u32 kStageBytes = kABytes + kBBytes + kSBytes + kZBytes;
  static constexpr bool kActAndMul =
      Spec::epilogue == gemm_enum::silu_and_mul || Spec::epilogue == gemm_enum::swiglu_oai;
  static constexpr gemm::Half kHalf = Spec::act == gemm_enum::bf16 ? gemm::Half::bf16 : gemm::Half::f16;

  static_assert(kStageBytes == gemm_stage_bytes(BM, BN, BK, G, kScaleBytes, kAsym));
  static_assert(kWarps % kWarpsM == 0 && BM % kWarpsM == 0 && BN % kWarpsN == 0);
  static_assert(WM % 16 == 0 && WN % 32 == 0, "warp tiles are whole m16 rows and n32 packed tiles");
  static_assert(BK % 32 == 0 && N % 32 == 0 && K % 32 == 0);
  static_assert(G % 32 == 0 && (G >= BK ? true : BK % G == 0));
  static_assert(kStages >= 2);
};

// A-tile rows are BK 16-bit elements = BK / 8 chunks of 16 bytes; chunk c of row r is stored at
// chunk c ^ f(r) so that the 8 rows an ldmatrix reads at one chunk hit 8 different bank groups.
template <u32 BK>
MOEJIT_DEVICE u32 swizzle_chunk(u32 row, u32 chunk) {
  return BK == 32 ? chunk ^ ((row / 2) % 4) : chunk ^ (row % 8);
}

template <class Spec>
MOEJIT_DEVICE float load_scale(const u8* s) {
  if constexpr (Spec::scale == gemm_enum::e8m0) return gemm::e8m0_to_f32(*s);
  const u16 bits = static_cast<u16>(s[0] | s[1] << 8);
  if constexpr (Spec::scale == gemm_enum::bf16) return prim::bf16_to_f32(bits);
  return prim::f16_to_f32(bits);
}

template <class Spec>
MOEJIT_DEVICE float activate(float gate, float up) {
  if constexpr (Spec::epilogue == gemm_enum::silu_and_mul) return gate * prim::sigmoid(gate) * up;
  // gpt-oss clamped SwiGLU: alpha 1.702, limit 7.
  const float g = min_of(gate, 7.0f), u = max_of(-7.0f, min_of(up, 7.0f));
  return g * prim::sigmoid(1.702f * g) * (u + 1.0f);
}

// Two adjacent output elements of row `row`, columns `col` and `col + 1`.
template <class Spec>
MOEJIT_DEVICE void store_pair(const GroupedGemmParams& p, i64 row, u32 col, float v0, float v1) {
  if constexpr (Spec::out == gemm_enum::f32) {
    float* c = static_cast<float*>(p.c) + row * p.ldc + col;
    c[0] = v0;
    c[1] = v1;
  } else {
    const u32 packed = Spec::out == gemm_enum::bf16 ? prim::pack_bf16x2(v0, v1) : prim::pack_f16x2(v0, v1);
    *reinterpret_cast<u32*>(static_cast<u16*>(p.c) + row * p.ldc + col) = packed;
  }
}

template <class Spec>
MOEJIT_GLOBAL void MOEJIT_LAUNCH_BOUNDS(Spec::warps * 32) grouped_gemm_kernel(GroupedGemmParams p) {
  using namespace moejit::prim;
  using S = GemmShape<Spec>;
  constexpr u32 BM = S::BM, BN = S::BN, BK = S::BK;

  unsigned char* smem = dynamic_shared();
  i64* a_offset = reinterpret_cast<i64*>(smem + S::kStages * S::kStageBytes);  // -1: no row
  i64* c_row = a_offset + BM;                                                   // -1: not written

  const u32 tid = thread_x(), warp = tid / 32, lane = lane_id();
  const u32 warp_m = warp / S::kWarpsN, warp_n = warp % S::kWarpsN;
  const u32 g = lane / 4, t = lane % 4;
  const u32 n0 = block_x() * BN;  // packed column of the block
  const i32 m = Spec::pinned_m > 0 ? Spec::pinned_m : p.m;

  // ---- Which expert and rows this block owns (block-uniform; early exits precede barriers) ----
  i32 expert;
  if constexpr (Spec::layout == gemm_enum::indexed) {
    const u32 tile = block_y();
    if (static_cast<i64>(tile) * BM >= *p.num_tokens_post_pad) return;
    expert = p.expert_ids[tile];
    if (expert < 0) return;
    for (u32 r = tid; r < BM; r += S::kThreads) {
      const i32 id = p.sorted_token_ids[tile * BM + r];
      const bool valid = id >= 0 && id < m;
      a_offset[r] = valid ? static_cast<i64>(id / p.a_row_divisor) * p.lda : -1;
      c_row[r] = valid ? id : -1;
    }
  } else if constexpr (Spec::layout == gemm_enum::contiguous) {
    // Tile y is the y-th BM-row tile counting experts in order; every warp finds it.
    const u32 tile = block_y();
    u32 before = 0;  // tiles of the experts already passed
    i32 local = -1;
    expert = -1;
    for (u32 base = 0; base < Spec::experts && expert < 0; base += 32) {
      const u32 e = base + lane;
      u32 tiles = 0;
      if (e < Spec::experts) {
        const i32 rows = p.expert_offsets[e + 1] - p.expert_offsets[e];
        tiles = rows > 0 ? (static_cast<u32>(rows) + BM - 1) / BM : 0;
      }
      const u32 inclusive = warp_inclusive_sum(tiles);
      const u32 hit = ballot(tile < before + inclusive);
      if (hit != 0) {
        const u32 first = lowest_set_bit(hit);
        expert = static_cast<i32>(base + first);
        const u32 exclusive_first = shfl_idx(inclusive - tiles, first);
        local = static_cast<i32>(tile - before - exclusive_first);
      }
      before += shfl_idx(inclusive, 31);
    }
    if (expert < 0) return;
    const i32 row0 = p.expert_offsets[expert] + local * static_cast<i32>(BM);
    const i32 row_end = p.expert_offsets[expert + 1];
    for (u32 r = tid; r < BM; r += S::kThreads) {
      const i32 row = row0 + static_cast<i32>(r);
      a_offset[r] = row < row_end ? row * p.lda : -1;
      c_row[r] = row < row_end ? row : -1;
    }
  } else {
    const u32 tiles_per_expert = (static_cast<u32>(m) + BM - 1) / BM;
    expert = static_cast<i32>(block_y() / tiles_per_expert);
    const i32 local = static_cast<i32>(block_y() % tiles_per_expert);
    // Counts come from the device; one above max_m would write into the next expert's slab.
    const i32 count = min_of(p.expert_counts[expert], m);
    if (local * static_cast<i32>(BM) >= count) return;
    for (u32 r = tid; r < BM; r += S::kThreads) {
      const i32 row = local * static_cast<i32>(BM) + static_cast<i32>(r);
      const i64 slab_row = static_cast<i64>(expert) * m + row;
      a_offset[r] = row < count ? slab_row * p.lda : -1;
      c_row[r] = row < count ? slab_row : -1;
    }
  }

  // ---- This split's range of k32 tiles ----
  const u32 per_split = (S::kKTiles + Spec::split_k - 1) / Spec::split_k;
  const u32 kt_begin = min_of(S::kKTiles, block_z() * per_split);
  const u32 kt_end = min_of(S::kKTiles, kt_begin + per_split);
  constexpr u32 kK32PerStage = BK / 32;
  const u32 stage_tiles = (kt_end - kt_begin + kK32PerStage - 1) / kK32PerStage;

  const unsigned char* a_base = static_cast<const unsigned char*>(p.a);
  const u8* b_expert = p.b + static_cast<u64>(expert) * (static_cast<u64>(S::N) * S::K / 2);
  const u8* scales = static_cast<const u8*>(p.b_scales);

  block_sync();  // row tables written

  // Issues the copies of stage tile `i` into pipeline slot `slot` (nothing past the range).
  auto load_stage = [&](u32 slot, u32 i) {
    unsigned char* stage = smem + slot * S::kStageBytes;
    const u32 k32_0 = kt_begin + i * kK32PerStage;
    const u32 n_k32 = min_of(kK32PerStage, kt_end - k32_0);
    // A: BM rows x BK / 8 chunks.
    for (u32 c = tid; c < BM * (BK / 8); c += S::kThreads) {
      const u32 r = c / (BK / 8), chunk = c % (BK / 8);
      if (chunk / 4 >= n_k32) continue;
      unsigned char* dst = stage + r * BK * 2 + swizzle_chunk<BK>(r, chunk) * 16;
      const i64 off = a_offset[r];
      const unsigned char* src = a_base + (off >= 0 ? (off + k32_0 * 32 + chunk * 8) * 2 : 0);
      cp_async_ca_16(dst, src, off >= 0 ? 16 : 0);
    }
    // B: BN / 32 packed strips x n_k32 tiles x 32 chunks, each strip's tiles contiguous.
    unsigned char* b_stage = stage + S::kABytes;
    for (u32 c = tid; c < (BN / 32) * kK32PerStage * 32; c += S::kThreads) {
      const u32 strip = c / (kK32PerStage * 32), kk = (c / 32) % kK32PerStage, part = c % 32;
      const u32 nt = n0 / 32 + strip;
      if (kk >= n_k32 || nt >= S::N / 32) continue;
      const u8* src = b_expert + (static_cast<u64>(nt) * S::kKTiles + k32_0 + kk) * kTileBytes + part * 16;
      cp_async_cg_16(b_stage + (strip * kK32PerStage + kk) * kTileBytes + part * 16, src);
    }
    // Scale (and zero-point) rows of the groups this stage touches.
    unsigned char* s_stage = b_stage + S::kBBytes;
    const u32 group0 = k32_0 * 32 / S::G;
    constexpr u32 kScaleChunks = BN * S::kScaleBytes / 16;
    for (u32 c = tid; c < S::kScaleRows * kScaleChunks; c += S::kThreads) {
      const u32 row = c / kScaleChunks, chunk = c % kScaleChunks;
      const u32 group = group0 + row, col = n0 + chunk * 16 / S::kScaleBytes;
      if (group * S::G >= kt_end * 32 || col >= S::N) continue;
      const u64 index = scale_index(expert, S::N, S::K, S::G, col, static_cast<u64>(group) * S::G);
      cp_async_cg_16(s_stage + row * BN * S::kScaleBytes + chunk * 16, scales + index * S::kScaleBytes);
    }
    if constexpr (S::kAsym) {
      unsigned char* z_stage = s_stage + S::kSBytes;
      for (u32 c = tid; c < S::kScaleRows * (BN / 16); c += S::kThreads) {
        const u32 row = c / (BN / 16), chunk = c % (BN / 16);
        const u32 group = group0 + row, col = n0 + chunk * 16;
        if (group * S::G >= kt_end * 32 || col >= S::N) continue;
        const u64 index = scale_index(expert, S::N, S::K, S::G, col, static_cast<u64>(group) * S::G);
        cp_async_cg_16(z_stage + row * BN + chunk * 16, p.b_zeros + index);
      }
    }
  };

  float acc[S::kMTiles][S::kN8][4] = {};
  float part[S::kMTiles][S::kN8][4] = {};  // the current scale group's unscaled sums

  // Multiplies the finished group's sums by their scales (columns 2t, 2t + 1 of each n8 tile).
  auto apply_scales = [&](const unsigned char* s_stage, u32 scale_row) {
    for (u32 j = 0; j < S::kN8; ++j) {
      const u32 col = warp_n * S::WN + j * 8 + 2 * t;
      const unsigned char* row = s_stage + scale_row * BN * S::kScaleBytes;
      const float s0 = load_scale<Spec>(row + col * S::kScaleBytes);
      const float s1 = load_scale<Spec>(row + (col + 1) * S::kScaleBytes);
      for (u32 mt = 0; mt < S::kMTiles; ++mt) {
        acc[mt][j][0] += part[mt][j][0] * s0;
        acc[mt][j][1] += part[mt][j][1] * s1;
        acc[mt][j][2] += part[mt][j][2] * s0;
        acc[mt][j][3] += part[mt][j][3] * s1;
        part[mt][j][0] = part[mt][j][1] = part[mt][j][2] = part[mt][j][3] = 0.0f;
      }
    }
  };

  auto compute_stage = [&](u32 slot, u32 i) {
    const unsigned char* stage = smem + slot * S::kStageBytes;
    const unsigned char* b_stage = stage + S::kABytes;
    const unsigned char* s_stage = b_stage + S::kBBytes;
    const u32 k32_0 = kt_begin + i * kK32PerStage;
    const u32 n_k32 = min_of(kK32PerStage, kt_end - k32_0);
    const u32 group0 = k32_0 * 32 / S::G;
    for (u32 kk = 0; kk < n_k32; ++kk) {
      const u32 k32 = k32_0 + kk;
      // Weights: one 16-byte word quad per n32 strip, dequantized to 4 registers per n8 tile.
      u32 b[S::kN8][4];
      for (u32 s32 = 0; s32 < S::kN32; ++s32) {
        const u32 strip = warp_n * S::kN32 + s32;
        if (n0 + strip * 32 >= S::N) {
          for (u32 w = 0; w < 4; ++w)
            for (u32 r = 0; r < 4; ++r) b[s32 * 4 + w][r] = 0;
          continue;
        }
        const u32x4 words = ld_shared_v4(b_stage + (strip * kK32PerStage + kk) * kTileBytes + lane * 16);
        const u32 word[4] = {words.x, words.y, words.z, words.w};
        for (u32 w = 0; w < 4; ++w) {
          if constexpr (S::kMxfp4) {
            gemm::dequant_e2m1<S::kHalf>(word[w], b[s32 * 4 + w]);
          } else {
            u32 zero = 8;
            if constexpr (S::kAsym) {
              const u32 row = k32 * 32 / S::G - group0;
              zero = (s_stage + S::kSBytes)[row * BN + strip * 32 + w * 8 + g];
            }
            gemm::dequant_int4<S::kHalf>(word[w], zero, b[s32 * 4 + w]);
          }
        }
      }
      for (u32 step = 0; step < 2; ++step) {
        for (u32 mt = 0; mt < S::kMTiles; ++mt) {
          // ldmatrix.x4: matrix q = lane / 8 is (rows +8 if q odd) x (k +8 if q >= 2).
          const u32 q = lane / 8;
          const u32 row = warp_m * S::WM + mt * 16 + lane % 8 + 8 * (q % 2);
          const u32 chunk = kk * 4 + step * 2 + q / 2;
          u32 a[4];
          ldmatrix_x4(a, stage + row * BK * 2 + swizzle_chunk<BK>(row, chunk) * 16);
          for (u32 j = 0; j < S::kN8; ++j) {
            const u32 bb[2] = {b[j][2 * step], b[j][2 * step + 1]};
            if constexpr (S::kHalf == gemm::Half::bf16) mma_m16n8k16_bf16(part[mt][j], a, bb, part[mt][j]);
            else mma_m16n8k16_f16(part[mt][j], a, bb, part[mt][j]);
          }
        }
      }
      // The group ends at this k32 tile, or the split's range does.
      if ((k32 + 1) * 32 % S::G == 0 || k32 + 1 == kt_end) apply_scales(s_stage, k32 * 32 / S::G - group0);
    }
  };

  // ---- Pipeline: kStages - 1 tiles in flight ahead of the one being computed ----
  for (u32 s = 0; s + 1 < S::kStages; ++s) {
    if (s < stage_tiles) load_stage(s, s);
    cp_async_commit();
  }
  for (u32 i = 0; i < stage_tiles; ++i) {
    cp_async_wait<S::kStages - 2>();
    block_sync();  // tile i is in shared memory; every warp is done with tile i - 1's slot
    const u32 next = i + S::kStages - 1;
    if (next < stage_tiles) load_stage(next % S::kStages, next);
    cp_async_commit();
    compute_stage(i % S::kStages, i);
  }
  cp_async_wait<0>();

  // ---- Serial split-K: add this split's sums to the tile's running total, in split order ----
  if constexpr (Spec::split_k > 1) {
    const u32 tile = block_y() * grid_x() + block_x();
    float* ws = p.workspace + static_cast<u64>(tile) * BM * BN;
    u32* counter = p.tile_counters + tile;
    if (tid == 0)
      while (load_acquire(counter) != block_z()) spin_pause();
    block_sync();
    for (u32 mt = 0; mt < S::kMTiles; ++mt)
      for (u32 j = 0; j < S::kN8; ++j)
        for (u32 e = 0; e < 4; ++e) {
          const u32 r = warp_m * S::WM + mt * 16 + g + 8 * (e / 2);
          const u32 c = warp_n * S::WN + j * 8 + 2 * t + e % 2;
          if (block_z() > 0) acc[mt][j][e] += ws[r * BN + c];
          if (block_z() + 1 < Spec::split_k) ws[r * BN + c] = acc[mt][j][e];
        }
    if (block_z() + 1 < Spec::split_k) {
      fence_gpu();
      block_sync();
      if (tid == 0) store_release(counter, block_z() + 1);
      return;
    }
    block_sync();
    if (tid == 0) store_release(counter, 0);
  }

  // ---- Epilogue ----
  for (u32 mt = 0; mt < S::kMTiles; ++mt) {
    for (u32 half_row = 0; half_row < 2; ++half_row) {
      const u32 r = warp_m * S::WM + mt * 16 + g + 8 * half_row;
      const i64 row = c_row[r];
      if (row < 0) continue;
      for (u32 j = 0; j < S::kN8; ++j) {
        const u32 col = n0 + warp_n * S::WN + j * 8 + 2 * t;  // packed column
        if (col >= S::N) continue;
        float v0 = acc[mt][j][2 * half_row], v1 = acc[mt][j][2 * half_row + 1];
        if (p.bias != nullptr) {
          v0 += p.bias[static_cast<u64>(expert) * S::N + col];
          v1 += p.bias[static_cast<u64>(expert) * S::N + col + 1];
        }
        if constexpr (S::kActAndMul) {
          if (act_and_mul_half_of_column(col) != 0) continue;  // up columns: read below, with their gate
          float u0 = acc[mt][j + 1][2 * half_row], u1 = acc[mt][j + 1][2 * half_row + 1];
          if (p.bias != nullptr) {
            u0 += p.bias[static_cast<u64>(expert) * S::N + col + 8];
            u1 += p.bias[static_cast<u64>(expert) * S::N + col + 9];
          }
          store_pair<Spec>(p, row, act_and_mul_output_of_column(col), activate<Spec>(v0, u0),
                           activate<Spec>(v1, u1));
        } else {
          if constexpr (Spec::epilogue == gemm_enum::topk_weight) {
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

}  // namespace moejit::kernels
