#pragma once
// Bit manipulation. PTX ISA: lop3.b32 d, a, b, c, immLut (any function of three inputs, the
// table being F(0xF0, 0xCC, 0xAA)); prmt.b32 d, a, b, c (byte permute, default mode);
// shf.r.wrap.b32 d, a, b, c (funnel shift right of {b, a} by c mod 32: with a == b, a rotation);
// mov.b32 {lo, hi}, a and mov.b32 d, {h, h} (unpack a into its 16-bit halves, pack one twice).

#include "common/platform.cuh"

namespace moejit::prim {

namespace twin {

// Bit i of the result is bit (4 a_i + 2 b_i + c_i) of `lut`.
constexpr u32 lop3(u32 a, u32 b, u32 c, u32 lut) {
  u32 d = 0;
  for (u32 i = 0; i < 32; ++i) {
    const u32 index = ((a >> i & 1u) << 2) | ((b >> i & 1u) << 1) | (c >> i & 1u);
    d |= ((lut >> index) & 1u) << i;
  }
  return d;
}

// Byte i of the result is byte (c >> 4i) & 7 of the 8-byte value {b, a} (a = bytes 0..3);
// if bit 3 of that selector nibble is set, the selected byte's sign bit is replicated instead.
constexpr u32 prmt(u32 a, u32 b, u32 c) {
  const u64 bytes = static_cast<u64>(a) | static_cast<u64>(b) << 32;
  u32 d = 0;
  for (u32 i = 0; i < 4; ++i) {
    const u32 sel = (c >> (4 * i)) & 0xfu;
    u32 byte = static_cast<u32>(bytes >> (8 * (sel & 7u))) & 0xffu;
    if (sel & 8u) byte = (byte & 0x80u) ? 0xffu : 0x00u;
    d |= byte << (8 * i);
  }
  return d;
}

// Rotation right by n mod 32.
constexpr u32 rotr(u32 x, u32 n) {
  n %= 32;
  return n == 0 ? x : (x >> n) | (x << (32 - n));
}

// Half `half` (0: bits 0..15) of x in both halves.
constexpr u32 broadcast_half(u32 x, u32 half) {
  const u32 h = half == 0 ? x & 0xffffu : x >> 16;
  return h | h << 16;
}

}  // namespace twin

#if MOEJIT_TARGET_DEVICE

template <u32 kLut>
MOEJIT_DEVICE u32 lop3(u32 a, u32 b, u32 c) {
  u32 d;
  asm("lop3.b32 %0, %1, %2, %3, %4;" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(kLut));
  return d;
}

MOEJIT_DEVICE u32 prmt(u32 a, u32 b, u32 selector) {
  u32 d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

MOEJIT_DEVICE u32 rotr(u32 x, u32 n) {
  u32 d;
  asm("shf.r.wrap.b32 %0, %1, %1, %2;" : "=r"(d) : "r"(x), "r"(n));
  return d;
}

// Where the result feeds a packed 16-bit multiply or fma, ptxas folds the two moves into that
// instruction's operand selector (.H0_H0, .H1_H1): no instruction of its own.
template <u32 kHalf>
MOEJIT_DEVICE u32 broadcast_half(u32 x) {
  static_assert(kHalf < 2);
  u32 d;
  if constexpr (kHalf == 0)
    asm("{.reg .b16 lo, hi; mov.b32 {lo, hi}, %1; mov.b32 %0, {lo, lo};}" : "=r"(d) : "r"(x));
  else
    asm("{.reg .b16 lo, hi; mov.b32 {lo, hi}, %1; mov.b32 %0, {hi, hi};}" : "=r"(d) : "r"(x));
  return d;
}

#else

template <u32 kLut>
MOEJIT_DEVICE u32 lop3(u32 a, u32 b, u32 c) { return twin::lop3(a, b, c, kLut); }
MOEJIT_DEVICE u32 prmt(u32 a, u32 b, u32 selector) { return twin::prmt(a, b, selector); }
MOEJIT_DEVICE u32 rotr(u32 x, u32 n) { return twin::rotr(x, n); }
template <u32 kHalf>
MOEJIT_DEVICE u32 broadcast_half(u32 x) {
  static_assert(kHalf < 2);
  return twin::broadcast_half(x, kHalf);
}

#endif

// Lookup tables for lop3, built the PTX way from the three operand patterns.
inline constexpr u32 kLopA = 0xF0, kLopB = 0xCC, kLopC = 0xAA;
inline constexpr u32 kLutAndOr = (kLopA & kLopB) | kLopC;  // (a & b) | c

}  // namespace moejit::prim
