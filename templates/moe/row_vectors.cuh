#pragma once
// Eight consecutive elements of a row of activations, as f32: one 16-byte vector of 16-bit
// values (two for f32). The reduction and the FP8 quantization read rows this way.

#include "common/kernel_enums.cuh"
#include "common/memory.cuh"
#include "common/numeric.cuh"
#include "common/platform.cuh"

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

}  // namespace moejit::kernels
