#pragma once
// Packed 16-bit float arithmetic. PTX ISA: fma.rn.bf16x2, fma.rn.f16x2 (sm_80+): each half is
// a*b+c rounded once to nearest even; subnormals are kept.

#include "common/numeric.cuh"

namespace moejit::prim {

namespace twin {

// a*b + c of 16-bit floats rounded once, as fma.rn does. The product is exact in double and
// TwoSum gives the sum's exact error e, so s + e is the exact result; it is rounded to a float
// by rounding to odd (an inexact float gets its last bit set), and that float rounded to nearest
// even at 16 bits equals the exact result rounded once: the float keeps 13+ extra bits.
inline float exact_sum_to_f32_round_odd(double p, double c) {
  const double s = p + c;
  const double bb = s - p;
  const double e = (p - (s - bb)) + (c - bb);
  const float f = static_cast<float>(s);
  const double diff = (s - static_cast<double>(f)) + e;  // sign: where the exact value lies
  if (diff == 0 || diff != diff || f - f != 0) return f;  // exact, NaN, or infinite
  u32 bits = f32_bits(f);
  if (bits & 1u) return f;  // already the odd neighbour
  if (f == 0) return f32_from_bits((diff > 0 ? 0u : 0x80000000u) | 1u);
  const bool grow = (diff > 0) == (f > 0);
  return f32_from_bits(grow ? bits + 1 : bits - 1);
}

inline u16 fma_bf16(u16 a, u16 b, u16 c) {
  const double p = static_cast<double>(bf16_to_f32(a)) * bf16_to_f32(b);
  return f32_to_bf16(exact_sum_to_f32_round_odd(p, bf16_to_f32(c)));
}
inline u16 fma_f16(u16 a, u16 b, u16 c) {
  const double p = static_cast<double>(f16_to_f32(a)) * f16_to_f32(b);
  return f32_to_f16(exact_sum_to_f32_round_odd(p, f16_to_f32(c)));
}
inline u32 fma_bf16x2(u32 a, u32 b, u32 c) {
  return fma_bf16(static_cast<u16>(a), static_cast<u16>(b), static_cast<u16>(c)) |
         static_cast<u32>(fma_bf16(static_cast<u16>(a >> 16), static_cast<u16>(b >> 16),
                                   static_cast<u16>(c >> 16))) << 16;
}
inline u32 fma_f16x2(u32 a, u32 b, u32 c) {
  return fma_f16(static_cast<u16>(a), static_cast<u16>(b), static_cast<u16>(c)) |
         static_cast<u32>(fma_f16(static_cast<u16>(a >> 16), static_cast<u16>(b >> 16),
                                  static_cast<u16>(c >> 16))) << 16;
}

}  // namespace twin

#if MOEJIT_TARGET_DEVICE
MOEJIT_DEVICE u32 fma_bf16x2(u32 a, u32 b, u32 c) {
  u32 d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
MOEJIT_DEVICE u32 fma_f16x2(u32 a, u32 b, u32 c) {
  u32 d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
#else
MOEJIT_DEVICE u32 fma_bf16x2(u32 a, u32 b, u32 c) { return twin::fma_bf16x2(a, b, c); }
MOEJIT_DEVICE u32 fma_f16x2(u32 a, u32 b, u32 c) { return twin::fma_f16x2(a, b, c); }
#endif

// a * b rounded once: an fma adding -0, which leaves every product (+0 and -0 included)
// unchanged; the compiler emits it as a plain packed multiply (HMUL2).
inline constexpr u32 kNegativeZeroX2 = 0x80008000u;
MOEJIT_DEVICE u32 mul_bf16x2(u32 a, u32 b) { return fma_bf16x2(a, b, kNegativeZeroX2); }
MOEJIT_DEVICE u32 mul_f16x2(u32 a, u32 b) { return fma_f16x2(a, b, kNegativeZeroX2); }

}  // namespace moejit::prim
