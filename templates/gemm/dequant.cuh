#pragma once
// 4-bit weights to mma B-fragment registers, and scales to f32. One packed word (8 nibbles, one
// column, see gemm/grouped_gemm_params.cuh) becomes four bf16x2 or f16x2 registers:
// {step 0: b0, b1}, {step 1: b0, b1} of two m16n8k16 mma's. Values come out unscaled (E2M1
// values, or INT4 q - z as small exact integers); scales are applied to f32 partial sums.

#include "common/bits.cuh"
#include "common/half2.cuh"
#include "common/numeric.cuh"

namespace moejit::gemm {

enum class Half : u32 { bf16, f16 };

// INT4 (NibbleOrder::int4_pairs_p_p4): register r holds (nibble r, nibble r + 4) as
// (low half, high half). The exponent trick: OR-ing a nibble into the mantissa of 128.0 (bf16
// 0x4300, ulp 1) or 1024.0 (f16 0x6400, ulp 1) gives 128 + q or 1024 + q exactly; one fma then
// subtracts the magic plus the zero point, leaving q - z exactly.
template <Half kHalf>
MOEJIT_DEVICE void dequant_int4(u32 word, u32 zero_point, u32 (&out)[4]) {
  using namespace moejit::prim;
  constexpr u32 magic = kHalf == Half::bf16 ? 0x43004300u : 0x64006400u;
  constexpr u32 one = kHalf == Half::bf16 ? 0x3f803f80u : 0x3c003c00u;
  constexpr float magic_value = kHalf == Half::bf16 ? 128.0f : 1024.0f;
  const float offset = -(magic_value + static_cast<float>(zero_point));
  const u32 neg = kHalf == Half::bf16 ? pack_bf16x2(offset, offset) : pack_f16x2(offset, offset);
  for (u32 r = 0; r < 4; ++r) {
    const u32 biased = lop3<kLutAndOr>(word >> (4 * r), 0x000f000fu, magic);
    out[r] = kHalf == Half::bf16 ? fma_bf16x2(biased, one, neg) : fma_f16x2(biased, one, neg);
  }
}

// E2M1 (NibbleOrder::e2m1_pairs_2q): register q holds (nibble 2q, nibble 2q + 1). Magnitudes come
// from byte tables indexed by the nibble's low 3 bits with prmt; the sign bit (nibble bit 3)
// becomes bit 15 of its half.
template <Half kHalf>
MOEJIT_DEVICE void dequant_e2m1(u32 word, u32 (&out)[4]) {
  using namespace moejit::prim;
  // Magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6. bf16: 0x0000 0x3f00 0x3f80 0x3fc0 0x4000 0x4040
  // 0x4080 0x40c0; f16: 0x0000 0x3800 0x3c00 0x3e00 0x4000 0x4200 0x4400 0x4600 (low bytes 0).
  constexpr u32 lo0 = 0xc0800000u, lo1 = 0xc0804000u;
  constexpr u32 hi0 = kHalf == Half::bf16 ? 0x3f3f3f00u : 0x3e3c3800u;
  constexpr u32 hi1 = kHalf == Half::bf16 ? 0x40404040u : 0x46444240u;
  for (u32 h = 0; h < 2; ++h) {
    const u32 nibbles = word >> (16 * h);  // nibbles 4h .. 4h + 3 in bits 0..15
    const u32 sel = nibbles & 0x7777u;
    const u32 signs = nibbles & 0x8888u;  // only these four bits, so the shifts below stay clean
    const u32 hi = prmt(hi0, hi1, sel);
    const u32 lo = kHalf == Half::bf16 ? prmt(lo0, lo1, sel) : 0u;
    for (u32 q = 0; q < 2; ++q) {
      // Bytes (lo, hi) of nibble 2q and of nibble 2q + 1.
      const u32 value = prmt(lo, hi, q == 0 ? 0x5140u : 0x7362u);
      // Sign bits of nibbles 2q (bit 8q + 3) and 2q + 1 (bit 8q + 7) to bits 15 and 31.
      const u32 t = signs >> (8 * q);
      const u32 sign = lop3<(kLopA | kLopB) & kLopC>(t << 12, t << 24, 0x80008000u);
      out[2 * h + q] = value | sign;
    }
  }
}

// E8M0 byte s -> 2^(s - 127) as f32; 0x00 is 2^-127 (an f32 subnormal), 0xFF is NaN.
MOEJIT_DEVICE float e8m0_to_f32(u32 s) {
  using namespace moejit::prim;
  if (s == 0) return twin::f32_from_bits(0x00400000u);
  if (s == 0xff) return twin::f32_from_bits(0x7fffffffu);
  return twin::f32_from_bits(s << 23);
}

}  // namespace moejit::gemm
