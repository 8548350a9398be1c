#pragma once
// MoE top-k reduction (semantics in moe/reduce_params.cuh). Block (t, c) sums columns
// [c * threads * 8, ...) of token t: each thread 8 consecutive columns, one 16-byte load per
// pair for 16-bit pairs (two for f32), f32 sums in k order, one vector store.
//
// Spec (generated): act (pairs dtype), out, n, warps.

#include "common/grid_dependency.cuh"
#include "common/memory.cuh"
#include "common/numeric.cuh"
#include "common/platform.cuh"
#include "gemm/grouped_gemm_params.cuh"
#include "moe/reduce_params.cuh"

namespace moejit::kernels {

template <int kDType>
MOEJIT_DEVICE void load8(const void* row, u32 col, float (&v)[8]) {
  using namespace moejit::prim;
  if constexpr (kDType == kernel_enum::f32) {
    const float* p = static_cast<const float*>(row) + col;
    const u32x4 a = ld_global_stream_v4(p), b = ld_global_stream_v4(p + 4);
    const u32 w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    for (u32 i = 0; i < 8; ++i) v[i] = twin::f32_from_bits(w[i]);
  } else {
    const u32x4 a = ld_global_stream_v4(static_cast<const u16*>(row) + col);
    const u32 w[4] = {a.x, a.y, a.z, a.w};
    for (u32 i = 0; i < 4; ++i) {
      const u16 lo = static_cast<u16>(w[i]), hi = static_cast<u16>(w[i] >> 16);
      v[2 * i] = kDType == kernel_enum::bf16 ? bf16_to_f32(lo) : f16_to_f32(lo);
      v[2 * i + 1] = kDType == kernel_enum::bf16 ? bf16_to_f32(hi) : f16_to_f32(hi);
    }
  }
}

template <int kDType>
MOEJIT_DEVICE void store8(void* row, u32 col, const float (&v)[8]) {
  using namespace moejit::prim;
  if constexpr (kDType == kernel_enum::f32) {
    float* p = static_cast<float*>(row) + col;
    st_global_v4(p, u32x4{twin::f32_bits(v[0]), twin::f32_bits(v[1]), twin::f32_bits(v[2]), twin::f32_bits(v[3])});
    st_global_v4(p + 4, u32x4{twin::f32_bits(v[4]), twin::f32_bits(v[5]), twin::f32_bits(v[6]), twin::f32_bits(v[7])});
  } else {
    u32 w[4];
    for (u32 i = 0; i < 4; ++i)
      w[i] = kDType == kernel_enum::bf16 ? pack_bf16x2(v[2 * i], v[2 * i + 1]) : pack_f16x2(v[2 * i], v[2 * i + 1]);
    st_global_v4(static_cast<u16*>(row) + col, u32x4{w[0], w[1], w[2], w[3]});
  }
}

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
