#pragma once
// Routing align (vLLM moe_align_block_size semantics with the expert map applied, see
// align_params.cuh), one block. Buckets are local experts: pairs of experts on other ranks get
// no slot, so no GEMM block is spent on them and the slots in use fit the local-count bounds.
//
// Deterministic and stable: within an expert, pairs appear in increasing flat index, with no
// global atomics. Warp w owns a contiguous segment of the pairs; it first counts its segment
// per expert, a column scan turns the per-warp counts into each warp's starting offset within
// each expert, and the warp then places its segment in order, ranking equal experts inside a
// 32-pair chunk with match.any.
//
// Spec (generated): experts (local), block_size, warps.

#include "common/atomic.cuh"
#include "common/grid_dependency.cuh"
#include "common/platform.cuh"
#include "common/sync.cuh"
#include "common/warp.cuh"
#include "moe/align_params.cuh"

namespace moejit::kernels {

// The local expert of a routed pair, or -1 when it has no slot here. Map entries outside
// [0, experts) are dropped too (the host checks the map; the device trusts nothing it reads).
template <i32 E>
MOEJIT_DEVICE i32 align_local_expert(const MoeAlignParams& p, i32 global_id) {
  if (global_id < 0 || global_id >= p.global_experts) return -1;
  const i32 local = p.expert_map != nullptr ? p.expert_map[global_id] : global_id;
  return local >= 0 && local < E ? local : -1;
}

template <class Spec>
MOEJIT_GLOBAL void MOEJIT_LAUNCH_BOUNDS(Spec::warps * 32)
    moe_align_kernel(MoeAlignParams p) {
  using namespace moejit::prim;
  constexpr i32 E = Spec::experts;
  constexpr i32 BM = Spec::block_size;
  constexpr i32 W = Spec::warps;
  constexpr u32 threads = W * 32;

  // Shared: hist[W][E] (counts, then running offsets), start[E + 1] (padded expert offsets).
  u32* hist = reinterpret_cast<u32*>(dynamic_shared());
  u32* start = hist + W * E;

  // Launched with programmatic dependent launch: topk_ids come from the engine's router, and the
  // outputs may still be read by the previous layer's kernels.
  grid_dependency_wait();
  launch_dependent_grids();  // one block: the GEMM's blocks may be scheduled while it runs

  const u32 tid = thread_x();
  const u32 warp = tid / 32;
  const u32 lane = lane_id();
  const i32 numel = p.numel;
  const i32 per_warp = (numel + W - 1) / W;
  const i32 seg_begin = min_of(numel, static_cast<i32>(warp) * per_warp);
  const i32 seg_end = min_of(numel, seg_begin + per_warp);

  for (u32 i = tid; i < static_cast<u32>(W * E); i += threads) hist[i] = 0;
  for (i32 i = static_cast<i32>(tid); i < p.clear_count; i += static_cast<i32>(threads)) p.clear_words[i] = 0;
  block_sync();

  // 1. Per-warp histograms of the warp's own segment.
  for (i32 i = seg_begin + static_cast<i32>(lane); i < seg_end; i += 32) {
    const i32 e = align_local_expert<E>(p, p.topk_ids[i]);
    if (e >= 0) shared_red_add(&hist[warp * E + e], 1);
  }
  block_sync();

  // 2. Column scan: hist[w][e] becomes the count of expert e in the segments before warp w's.
  for (u32 e = tid; e < static_cast<u32>(E); e += threads) {
    u32 running = 0;
    for (i32 w = 0; w < W; ++w) {
      const u32 c = hist[w * E + e];
      hist[w * E + e] = running;
      running += c;
    }
    start[e] = running;  // the expert's total, until step 3 replaces it with its offset
  }
  block_sync();

  // 3. Exclusive scan of the padded expert sizes, by warp 0. Each lane owns a run of experts
  //    and touches only its own entries of start[].
  if (warp == 0) {
    constexpr i32 per_lane = (E + 31) / 32;
    const i32 first = min_of(E, static_cast<i32>(lane) * per_lane);
    const i32 last = min_of(E, first + per_lane);
    u32 local = 0;
    for (i32 e = first; e < last; ++e) local += (start[e] + BM - 1) / BM * BM;
    u32 offset = warp_inclusive_sum(local) - local;
    for (i32 e = first; e < last; ++e) {
      const u32 padded = (start[e] + BM - 1) / BM * BM;
      start[e] = offset;
      offset += padded;
    }
    if (lane == 31) {
      start[E] = offset;
      *p.num_tokens_post_pad = static_cast<i32>(offset);
    }
  }
  block_sync();

  // 4. Fill: every slot gets the sentinel, every block its local expert or -1.
  const i32 max_padded = static_cast<i32>(align_max_padded(numel, E, BM));
  const i32 used_blocks = static_cast<i32>(start[E]) / BM;
  for (i32 i = static_cast<i32>(tid); i < max_padded; i += threads) p.sorted_token_ids[i] = numel;
  for (i32 b = static_cast<i32>(tid); b < max_padded / BM; b += threads) {
    i32 expert = -1;
    if (b < used_blocks) {
      // The last expert whose start is at or before this block's first slot.
      i32 lo = 0, hi = E - 1;
      const u32 slot = static_cast<u32>(b) * BM;
      while (lo < hi) {
        const i32 mid = (lo + hi + 1) / 2;
        if (start[mid] <= slot) lo = mid;
        else hi = mid - 1;
      }
      expert = lo;
    }
    p.expert_ids[b] = expert;
  }
  block_sync();  // the sentinel fill is visible before the scatter overwrites it

  // 5. Scatter the warp's segment in order.
  for (i32 base = seg_begin; base < seg_end; base += 32) {
    const i32 i = base + static_cast<i32>(lane);
    const i32 e = i < seg_end ? align_local_expert<E>(p, p.topk_ids[i]) : -1;
    const bool placed = e >= 0;
    const u32 peers = match_any(placed ? static_cast<u32>(e) : 0xffffffffu);
    if (placed) {
      const u32 rank = popc(peers & lanemask_lt());
      u32* offset = &hist[warp * E + e];
      p.sorted_token_ids[start[e] + *offset + rank] = i;
      warp_sync(peers);
      if (rank == 0) *offset += popc(peers);
    }
    warp_sync();
  }
}

}  // namespace moejit::kernels
