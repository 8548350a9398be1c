#pragma once
// Narrow floating-point formats: bf16, f16, e4m3 (fn: no infinities) and their conversions.
// PTX ISA: cvt.rn.bf16x2.f32, cvt.rn.f16x2.f32, cvt.rn.satfinite.e4m3x2.f32,
// cvt.rn.f16x2.e4m3x2, cvt.f32.f16. The twins are bit-exact software versions (round to nearest
// even, subnormals kept, canonical NaN 0x7FFF for bf16/f16 and 0x7F for e4m3); the host library
// and tests use them too.

#include "common/platform.cuh"

namespace moejit {

// Storage types: the bits, nothing else (arithmetic happens in f32 or in packed registers).
struct bf16 {
  u16 bits;
};
struct f16 {
  u16 bits;
};
struct e4m3 {
  u8 bits;
};

}  // namespace moejit

namespace moejit::prim::twin {

#if MOEJIT_TARGET_HOST
inline u32 f32_bits(float f) { return __builtin_bit_cast(u32, f); }
inline float f32_from_bits(u32 b) { return __builtin_bit_cast(float, b); }
#else
MOEJIT_DEVICE u32 f32_bits(float f) { return __float_as_uint(f); }
MOEJIT_DEVICE float f32_from_bits(u32 b) { return __uint_as_float(b); }
#endif

MOEJIT_DEVICE float bf16_to_f32(u16 h) { return f32_from_bits(static_cast<u32>(h) << 16); }

MOEJIT_DEVICE u16 f32_to_bf16(float f) {
  const u32 b = f32_bits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  // NaN
  const u32 rounding = 0x7fffu + ((b >> 16) & 1u);       // ties to even
  return static_cast<u16>((b + rounding) >> 16);
}

MOEJIT_DEVICE float f16_to_f32(u16 h) {
  const u32 sign = static_cast<u32>(h & 0x8000u) << 16;
  const u32 exp = (h >> 10) & 0x1fu;
  u32 man = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (man << 13));  // inf / NaN
  if (exp != 0) return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
  if (man == 0) return f32_from_bits(sign);
  // Subnormal: value = man * 2^-24; normalize.
  u32 e = 113;
  while ((man & 0x400u) == 0) {
    man <<= 1;
    --e;
  }
  return f32_from_bits(sign | (e << 23) | ((man & 0x3ffu) << 13));
}

MOEJIT_DEVICE u16 f32_to_f16(float f) {
  const u32 b = f32_bits(f);
  const u16 sign = static_cast<u16>((b >> 16) & 0x8000u);
  const u32 abs = b & 0x7fffffffu;
  if (abs > 0x7f800000u) return 0x7fff;                    // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;           // rounds to >= 65520: inf
  const i32 exp = static_cast<i32>(abs >> 23) - 127;
  if (exp >= -14) {                                         // normal f16
    const u32 man = abs & 0x7fffffu;
    u32 h = (static_cast<u32>(exp + 15) << 10) | (man >> 13);
    const u32 rest = man & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent
    return static_cast<u16>(sign | h);
  }
  if (exp < -25) return sign;                               // below half the smallest subnormal
  // Subnormal f16: value = m * 2^-24 with m = round(abs_value * 2^24).
  const u32 man = (abs & 0x7fffffu) | 0x800000u;            // 24-bit significand, value man * 2^(exp-23)
  const u32 shift = static_cast<u32>(-exp - 1);             // 14 .. 24: man >> shift is m's integer part
  u32 m = man >> shift;
  const u32 rest = man & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (m & 1u))) ++m;
  return static_cast<u16>(sign | m);
}

// e4m3 (OCP "e4m3fn"): bias 7, no infinities, 0x7f / 0xff NaN, largest finite 448.
MOEJIT_DEVICE float e4m3_to_f32(u8 v) {
  const u32 sign = static_cast<u32>(v & 0x80u) << 24;
  const u32 exp = (v >> 3) & 0xfu, man = v & 0x7u;
  if (exp == 0xf && man == 0x7) return f32_from_bits(0x7fffffffu);
  if (exp != 0) return f32_from_bits(sign | ((exp + 120) << 23) | (man << 20));
  // Subnormal: man * 2^-9.
  return f32_from_bits(sign) + (sign ? -1.0f : 1.0f) * static_cast<float>(man) * (1.0f / 512.0f);
}

// cvt.rn.satfinite.e4m3 semantics: round to nearest even, saturate to +-448, NaN -> 0x7f.
MOEJIT_DEVICE u8 f32_to_e4m3(float f) {
  const u32 b = f32_bits(f);
  const u8 sign = static_cast<u8>((b >> 24) & 0x80u);
  const u32 abs = b & 0x7fffffffu;
  if (abs > 0x7f800000u) return 0x7f;
  if (abs >= 0x43e00000u) return sign | 0x7eu;              // >= 448 (and inf): saturate
  const i32 exp = static_cast<i32>(abs >> 23) - 127;
  if (exp >= -6) {                                           // normal e4m3
    const u32 man = abs & 0x7fffffu;
    u32 v = (static_cast<u32>(exp + 7) << 3) | (man >> 20);
    const u32 rest = man & 0xfffffu;
    if (rest > 0x80000u || (rest == 0x80000u && (v & 1u))) ++v;
    if (v > 0x7eu) v = 0x7eu;                                 // rounding past 448 saturates
    return static_cast<u8>(sign | v);
  }
  if (exp < -10) return sign;                                 // below half of 2^-9
  const u32 man = (abs & 0x7fffffu) | 0x800000u;
  const u32 shift = static_cast<u32>(20 + (-6 - exp));       // m = man * 2^(exp-23) / 2^-9
  u32 m = man >> shift;
  const u32 rest = man & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rest > half || (rest == half && (m & 1u))) ++m;
  return static_cast<u8>(sign | m);                           // m == 8 is the smallest normal
}

// e2m1 (OCP FP4): sign, 2 exponent bits (bias 1), 1 mantissa bit: +-{0, 0.5, 1, 1.5, 2, 3, 4, 6},
// no infinities or NaN. Round to nearest even (a tie takes the code whose mantissa bit is 0),
// saturating to +-6; a finite input is expected (NaN gives 6 with its sign). Code in bits 0..3.
MOEJIT_DEVICE u32 f32_to_e2m1(float f) {
  const u32 b = f32_bits(f);
  const u32 sign = (b >> 28) & 0x8u;
  const float a = f32_from_bits(b & 0x7fffffffu);
  // The midpoints between neighbouring magnitudes; <= where the lower code is even, < where odd.
  const u32 code = a <= 0.25f ? 0u : a < 0.75f ? 1u : a <= 1.25f ? 2u : a < 1.75f ? 3u
                 : a <= 2.5f  ? 4u : a < 3.5f  ? 5u : a <= 5.0f  ? 6u : 7u;
  return sign | code;
}

// cvt.rn.f16x2.e4m3x2: two e4m3 bytes to f16x2 (byte 0 to the low half), exactly.
MOEJIT_DEVICE u32 e4m3x2_to_f16x2(u16 v) {
  return static_cast<u32>(f32_to_f16(e4m3_to_f32(static_cast<u8>(v)))) |
         static_cast<u32>(f32_to_f16(e4m3_to_f32(static_cast<u8>(v >> 8)))) << 16;
}

}  // namespace moejit::prim::twin

namespace moejit::prim {

// Two f32 to a bf16x2 / f16x2 register: `lo` in bits 0..15, `hi` in bits 16..31.
#if MOEJIT_TARGET_DEVICE
MOEJIT_DEVICE u32 pack_bf16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
MOEJIT_DEVICE u32 pack_f16x2(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
// Two f32 to two e4m3 bytes: `lo` in bits 0..7, `hi` in bits 8..15. The instruction is
// sm_89+; older targets run the twin (the same result, in software).
MOEJIT_DEVICE u16 pack_e4m3x2(float lo, float hi) {
#if __CUDA_ARCH__ >= 890
  u16 r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return static_cast<u16>(twin::f32_to_e4m3(lo) | twin::f32_to_e4m3(hi) << 8);
#endif
}
MOEJIT_DEVICE float f16_to_f32(u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
// Two e4m3 bytes to an f16x2 register (byte 0 to the low half), exactly: cvt.rn.f16x2.e4m3x2,
// sm_89+; older targets run the twin. The _high form converts bytes 2 and 3 of a word, taking
// the upper half in PTX so that ptxas reads it in place (no shift).
MOEJIT_DEVICE u32 e4m3x2_to_f16x2(u16 v) {
#if __CUDA_ARCH__ >= 890
  u32 r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(v));
  return r;
#else
  return twin::e4m3x2_to_f16x2(v);
#endif
}
MOEJIT_DEVICE u32 e4m3x2_to_f16x2_high(u32 word) {
#if __CUDA_ARCH__ >= 890
  u32 r;
  asm("{\n .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %1;\n cvt.rn.f16x2.e4m3x2 %0, hi;\n}" : "=r"(r) : "r"(word));
  return r;
#else
  return e4m3x2_to_f16x2(static_cast<u16>(word >> 16));
#endif
}
#else
MOEJIT_DEVICE u32 pack_bf16x2(float lo, float hi) {
  return static_cast<u32>(twin::f32_to_bf16(lo)) | static_cast<u32>(twin::f32_to_bf16(hi)) << 16;
}
MOEJIT_DEVICE u32 pack_f16x2(float lo, float hi) {
  return static_cast<u32>(twin::f32_to_f16(lo)) | static_cast<u32>(twin::f32_to_f16(hi)) << 16;
}
MOEJIT_DEVICE u16 pack_e4m3x2(float lo, float hi) {
  return static_cast<u16>(twin::f32_to_e4m3(lo) | twin::f32_to_e4m3(hi) << 8);
}
MOEJIT_DEVICE float f16_to_f32(u16 h) { return twin::f16_to_f32(h); }
MOEJIT_DEVICE u32 e4m3x2_to_f16x2(u16 v) { return twin::e4m3x2_to_f16x2(v); }
MOEJIT_DEVICE u32 e4m3x2_to_f16x2_high(u32 word) { return twin::e4m3x2_to_f16x2(static_cast<u16>(word >> 16)); }
#endif

MOEJIT_DEVICE float bf16_to_f32(u16 h) { return twin::bf16_to_f32(h); }

}  // namespace moejit::prim
