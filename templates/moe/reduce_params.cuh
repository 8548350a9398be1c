#pragma once
// Arguments of the MoE reduction: each token's output is the sum of its top-k pair outputs
// (already scaled by their routing weights in the down projection's epilogue), in k order, so
// the result is the same bit for bit on every run. Pairs the routing align gave no slot (expert
// id outside [0, experts), or mapped outside [0, local_experts): -1 is another rank's expert)
// were never computed and contribute nothing; the rule is the align's, word for word.

#include "common/types.cuh"

namespace moejit {

struct MoeReduceParams {
  const void* pairs;      // [tokens * topk][n], act dtype, row stride ld_pairs elements
  const i32* topk_ids;    // [tokens * topk] global expert ids
  const i32* expert_map;  // [experts] global -> local id, -1 not local; null: every id is local
  void* out;              // [tokens][n], out dtype, row stride ld_out elements
  i64 ld_pairs;
  i64 ld_out;
  i32 tokens;
  i32 topk;
  i32 experts;            // global expert count (ids outside [0, experts) are dropped)
  i32 local_experts;      // experts on this rank (mapped ids outside [0, local_experts) are dropped)
};

// Elements each thread reduces (one 16-byte load of 16-bit pairs).
inline constexpr u32 kReduceVector = 8;

}  // namespace moejit
