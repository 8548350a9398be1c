#pragma once
// Arguments of the routing-align kernel and the sizes of its outputs. Plain C++ with no device
// code: included by the kernel and by the host library that launches it, so both agree on the
// layout by construction.

#include "common/types.cuh"

namespace moejit {

// vLLM `moe_align_block_size` semantics, with expert parallelism folded in (as vLLM does with
// an expert map and invalid experts ignored). The (token, k) pairs, flattened to index
// i = token * topk + k, are grouped by LOCAL expert (the kernel's Spec::experts of them); each
// group is padded with the sentinel `numel` to a multiple of the block size, so that every block
// of `block_size` consecutive slots belongs to one local expert. A pair whose global id is
// outside [0, global_experts), or whose mapped id is outside [0, experts) (-1: another rank's
// expert), gets no slot: the blocks in use are bounded by the LOCAL expert count, which is what
// the GEMMs that read them size their grids with.
struct MoeAlignParams {
  const i32* topk_ids;       // [numel] global expert of each (token, k)
  const i32* expert_map;     // [global_experts] global -> local expert id (-1: not on this rank);
                             // null = identity (global ids are local ids)
  i32* sorted_token_ids;     // [align_max_padded(numel, experts)] flat indices by local expert; padding = numel
  i32* expert_ids;           // [align_max_blocks(numel, experts)] local expert of each block; -1 past the end
  i32* num_tokens_post_pad;  // [1] slots in use (a multiple of the block size)
  i32 numel;                 // tokens * topk
  i32 global_experts;        // range of topk_ids (and length of expert_map)
  u32* clear_words;          // [clear_count] set to zero before the launch ends (the fused
  i32 clear_count;           // layer's split-K counters); null / 0: none
};

// Slots the outputs need for `numel` pairs over `experts` LOCAL experts: each of at most
// min(numel, experts) non-empty experts wastes fewer than `block_size` slots to padding.
constexpr i64 align_max_padded(i64 numel, i64 experts, i64 block_size) {
  const i64 busy = numel < experts ? numel : experts;
  const i64 slots = numel + busy * (block_size - 1);
  return (slots + block_size - 1) / block_size * block_size;
}

constexpr i64 align_max_blocks(i64 numel, i64 experts, i64 block_size) {
  return align_max_padded(numel, experts, block_size) / block_size;
}

// Dynamic shared memory of the kernel: per-warp expert histograms and the expert offsets.
constexpr i64 align_shared_bytes(i64 experts, i64 warps) {
  return (warps * experts + experts + 1) * 4;
}

}  // namespace moejit
