#pragma once
// MoE top-k reduction (semantics in moe/reduce_params.cuh). Block (t, c) sums columns
// [c * threads * 8, ...) of token t: each thread 8 consecutive columns, one 16-byte load per
// pair for 16-bit pairs (two for f32), f32 sums in k order, one vector store.
//
// Spec (generated): act (pairs dtype), out, n, warps.

#include "common/grid_dependency.cuh"
#include "common/platform.cuh"
#include "moe/reduce_params.cuh"
#include "moe/row_vectors.cuh"

namespace moejit::kernels {

template <class Spec>
MOEJIT_GLOBAL void MOEJIT_LAUNCH_BOUNDS(Spec::warps * 32) moe_reduce_kernel(MoeReduceParams p) {
  using namespace moejit::prim;
  // Launched with programmatic dependent launch: the pairs come from the GEMM ahead of it.
  grid_dependency_wait();
  launch_dependent_grids();  // a short kernel: the next one may be scheduled at once
  constexpr u32 kThreads = Spec::warps * 32;
  const u32 token = block_x();
  const u32 col = (block_y() * kThreads + thread_x()) * kReduceVector;
  if (static_cast<i32>(token) >= p.tokens || col >= Spec::n) return;
  constexpr u32 kPairBytes = Spec::act == kernel_enum::f32 ? 4 : 2;
  constexpr u32 kOutBytes = Spec::out == kernel_enum::f32 ? 4 : 2;
  float sum[8] = {};
  for (i32 k = 0; k < p.topk; ++k) {
    const i64 pair = static_cast<i64>(token) * p.topk + k;
    const i32 id = p.topk_ids[pair];
    if (id < 0 || id >= p.experts) continue;
    const i32 local = p.expert_map != nullptr ? p.expert_map[id] : id;
    if (local < 0 || local >= p.local_experts) continue;
    float v[8];
    load8<Spec::act>(static_cast<const unsigned char*>(p.pairs) + pair * p.ld_pairs * kPairBytes, col, v);
    for (u32 i = 0; i < 8; ++i) sum[i] += v[i];
  }
  store8<Spec::out>(static_cast<unsigned char*>(p.out) + static_cast<i64>(token) * p.ld_out * kOutBytes, col, sum);
}

}  // namespace moejit::kernels
