#pragma once
// Activation quantization to e4m3 or e2m1 (recipes in moe/quantize_params.cuh). One block per
// row; each thread holds the row's values it converts (8 consecutive columns per vector, the
// row's vectors dealt round-robin over the block's threads) in registers, so the row is read
// once. block128 / block32: a group is 16 / 4 neighbouring lanes' vectors, reduced with
// shuffles. token: the warps' maxima meet in shared memory.
//
// Spec (generated): act (input dtype), act_scale, n (row length), warps.

#include "common/grid_dependency.cuh"
#include "common/memory.cuh"
#include "common/numeric.cuh"
#include "common/platform.cuh"
#include "common/sync.cuh"
#include "common/warp.cuh"
#include "moe/quantize_params.cuh"
#include "moe/row_vectors.cuh"

namespace moejit::kernels {

// |x|, by clearing the sign bit.
MOEJIT_DEVICE float abs_of(float x) { return prim::twin::f32_from_bits(prim::twin::f32_bits(x) & 0x7fffffffu); }

// The largest of the `kLanes` neighbouring lanes' values (kLanes a power of two up to 32); no
// value is NaN (max_of with the running maximum first drops NaN elements before this).
template <u32 kLanes>
MOEJIT_DEVICE float group_amax(float v) {
  using namespace moejit::prim;
  for (u32 m = kLanes / 2; m > 0; m /= 2) v = max_of(v, twin::f32_from_bits(shfl_xor(twin::f32_bits(v), m)));
  return v;
}

// Whether any of the `kLanes` neighbouring lanes' flags is set.
template <u32 kLanes>
MOEJIT_DEVICE u32 group_any(u32 flag) {
  for (u32 m = kLanes / 2; m > 0; m /= 2) flag |= prim::shfl_xor(flag, m);
  return flag;
}

MOEJIT_DEVICE float quantization_scale(float amax) { return amax > 0.0f ? amax / kE4m3Max : 1.0f; }

// e2m1 (block32): each 4 lanes' 32 columns share one E8M0 scale; 8 codes per vector, one word.
template <class Spec>
MOEJIT_DEVICE void quantize_row_e2m1(const float (&v)[8], u32 col, u32 valid, unsigned char* out, u8* scales) {
  using namespace moejit::prim;
  u32 amax = 0, nonfinite = 0;  // f32 bits of |x|: for finite values their order is the values'
  if (valid)
    for (u32 j = 0; j < 8; ++j) {
      const u32 bits = twin::f32_bits(v[j]) & 0x7fffffffu;
      amax = bits > amax ? bits : amax;
      nonfinite |= bits >= 0x7f800000u ? 1u : 0u;
    }
  for (u32 m = 2; m > 0; m /= 2) {
    const u32 other = shfl_xor(amax, m);
    amax = other > amax ? other : amax;
  }
  const u32 byte = group_any<4>(nonfinite) ? 0xffu : e2m1_block_scale_byte(amax);
  if (!valid) return;
  if (col % 32 == 0) scales[col / 32] = static_cast<u8>(byte);
  // 1 / scale = 2^(127 - byte) (byte <= 253 for finite blocks): exact; a NaN block's codes
  // are whatever they come out as, its scale says NaN.
  const float inverse = twin::f32_from_bits((254u - min_of(byte, 254u)) << 23);
  u32 word = 0;
  for (u32 j = 0; j < 8; ++j) word |= twin::f32_to_e2m1(v[j] * inverse) << (4 * j);
  *reinterpret_cast<u32*>(out + col / 2) = word;
}

template <class Spec>
MOEJIT_GLOBAL void MOEJIT_LAUNCH_BOUNDS(Spec::warps * 32) act_quantize_kernel(ActQuantizeParams p) {
  using namespace moejit::prim;
  // Launched with programmatic dependent launch: the rows may come from the kernel ahead of it.
  grid_dependency_wait();
  launch_dependent_grids();  // a short kernel: the next one may be scheduled at once
  constexpr u32 kThreads = Spec::warps * 32;
  constexpr u32 kPerPass = kThreads * 8;
  constexpr u32 kVectors = (Spec::n + kPerPass - 1) / kPerPass;
  constexpr bool kBlock = Spec::act_scale == kernel_enum::act_scale_block128;
  constexpr bool kE2m1 = Spec::act_scale == kernel_enum::act_scale_block32;
  constexpr u32 kInBytes = Spec::act == kernel_enum::f32 ? 4 : 2;
  static_assert(!kBlock || Spec::n % 128 == 0, "block128 scales need whole 128-column groups");
  static_assert(!kE2m1 || Spec::n % 32 == 0, "block32 scales need whole 32-column blocks");
  const u32 row = block_x();
  if (static_cast<i32>(row) >= p.rows) return;
  const unsigned char* in = static_cast<const unsigned char*>(p.in) + static_cast<i64>(row) * p.ld_in * kInBytes;
  unsigned char* out = static_cast<unsigned char*>(p.out) + static_cast<i64>(row) * p.ld_out;

  float v[kVectors][8];
  float amax[kVectors];
  for (u32 i = 0; i < kVectors; ++i) {
    const u32 col = (i * kThreads + thread_x()) * 8;
    amax[i] = 0.0f;
    if (col < Spec::n) {
      load8<Spec::act>(in, col, v[i]);
      for (u32 j = 0; j < 8; ++j) amax[i] = max_of(amax[i], abs_of(v[i][j]));
    }
  }
  if constexpr (kE2m1) {
    // 4 lanes x 8 columns = one block; kPerPass is a multiple of 32, so blocks never straddle
    // passes, and every lane takes part in the shuffles.
    u8* scales = static_cast<u8*>(p.scales) + static_cast<i64>(row) * p.scale_ld;
    for (u32 i = 0; i < kVectors; ++i) {
      const u32 col = (i * kThreads + thread_x()) * 8;
      quantize_row_e2m1<Spec>(v[i], col, col < Spec::n ? 1u : 0u, out, scales);
    }
    return;
  }
  float scale[kVectors];
  if constexpr (kBlock) {
    // 16 lanes x 8 columns = one group; kPerPass is a multiple of 128, so a group never spans
    // two passes and lanes past the row's end form whole groups of their own.
    for (u32 i = 0; i < kVectors; ++i) {
      scale[i] = quantization_scale(group_amax<16>(amax[i]));
      const u32 col = (i * kThreads + thread_x()) * 8;
      if (col < Spec::n && col % 128 == 0) static_cast<float*>(p.scales)[static_cast<i64>(row) * p.scale_ld + col / 128] = scale[i];
    }
  } else {
    float m = 0.0f;
    for (u32 i = 0; i < kVectors; ++i) m = max_of(m, amax[i]);
    m = group_amax<32>(m);
    float* warp_max = reinterpret_cast<float*>(dynamic_shared());
    if (lane_id() == 0) warp_max[thread_x() / 32] = m;
    block_sync();
    for (u32 w = 0; w < Spec::warps; ++w) m = max_of(m, warp_max[w]);
    for (u32 i = 0; i < kVectors; ++i) scale[i] = quantization_scale(m);
    if (thread_x() == 0) static_cast<float*>(p.scales)[row] = scale[0];
  }
  for (u32 i = 0; i < kVectors; ++i) {
    const u32 col = (i * kThreads + thread_x()) * 8;
    if (col >= Spec::n) continue;
    u32 w[2];
    for (u32 h = 0; h < 2; ++h) {
      const float* x = v[i] + 4 * h;
      w[h] = static_cast<u32>(pack_e4m3x2(x[0] / scale[i], x[1] / scale[i])) |
             static_cast<u32>(pack_e4m3x2(x[2] / scale[i], x[3] / scale[i])) << 16;
    }
    st_global_v2(out + col, u32x2{w[0], w[1]});
  }
}

}  // namespace moejit::kernels
