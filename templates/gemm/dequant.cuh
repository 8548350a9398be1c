#pragma once
// 4-bit weights to mma B-fragment registers, and the scale operands that go with them. One
// packed word (8 elements of one column, gemm/grouped_gemm_params.cuh) becomes four bf16x2 or
// f16x2 registers: {step 0: b0, b1}, {step 1: b0, b1} of two m16n8k16 mma's. The layout is
// built so that each register costs one to three integer operations; what is rounded where is
// in templates/README.md ("Numerics of the grouped GEMM").

#include "common/bits.cuh"
#include "common/half2.cuh"
#include "common/numeric.cuh"
#include "gemm/grouped_gemm_params.cuh"

namespace moejit::gemm {

enum class Half : u32 { bf16, f16 };

// ---- E2M1 (MXFP4 elements) ----------------------------------------------------------------
// The bits of each element are placed where a 16-bit float wants them (e2m1_word_bit for bf16,
// e2m1_f16_word_bit for f16: the a16f16 order): E1 E0 land in the two lowest exponent bits and
// M in the highest mantissa bit, so the register holds the E2M1 value times 2^-126 as a bf16
// (times 2^-14 as an f16), subnormal codes (0, +-0.5) included. One multiply by a scale operand
// (below) restores the value with its block scale.

// Power of two the raw E2M1 registers are scaled by (value = register * 2^-kE2m1Exponent).
template <Half kHalf>
inline constexpr int kE2m1Exponent = kHalf == Half::bf16 ? 126 : 14;

// The three shifted copies (bf16) and the two (f16) a multiply makes do not overlap, so each
// sum is their OR.
template <Half kHalf>
MOEJIT_DEVICE void e2m1_registers(u32 word, u32 (&out)[4]) {
  using namespace moejit::prim;
  if constexpr (kHalf == Half::bf16) {
    out[0] = word & kE2m1RegisterMask;
    out[1] = rotr(word, kE2m1Rotation[1]) & kE2m1RegisterMask;
    out[2] = rotr(word, kE2m1Rotation[2]) & kE2m1RegisterMask;
    out[3] = ((word & kE2m1GatherMask) * kE2m1GatherMultiplier) & kE2m1RegisterMask;
  } else {
    out[0] = word & kE2m1F16RegisterMask;
    out[1] = rotr(word, kE2m1F16Rotation) & kE2m1F16RegisterMask;
    for (u32 g = 0; g < 2; ++g)
      out[2 + g] = ((word & kE2m1F16GatherMask[g]) * kE2m1F16GatherMultiplier[g]) & kE2m1F16RegisterMask;
  }
}

// ---- Bytes of a scale or zero-point word ----------------------------------------------------
// Byte `w` (0..3) of `bytes` in all four bytes.
MOEJIT_DEVICE u32 broadcast_byte(u32 bytes, u32 w) { return prim::prmt(bytes, 0u, w * 0x1111u); }

// Spread byte `w` (0..3) of `bytes` into bytes 0 and 2: [b, 0, b, 0].
MOEJIT_DEVICE u32 spread_byte(u32 bytes, u32 w) {
  // prmt selector: result byte i = byte sel_i of {0 (bytes 4..7), bytes}; 4 selects a zero.
  return prim::prmt(bytes, 0u, 0x4040u | w | (w << 8));
}

// ---- E8M0 scales ----------------------------------------------------------------------------
// E8M0 byte s -> 2^(s - 127) as f32; 0x00 is 2^-127 (an f32 subnormal), 0xFF is NaN.
// Written as selects, not branches: the accumulator path converts every scale of a group.
MOEJIT_DEVICE float e8m0_to_f32(u32 s) {
  using namespace moejit::prim;
  const u32 bits = s == 0 ? 0x00400000u : s == 0xff ? 0x7fffffffu : s << 23;
  return twin::f32_from_bits(bits);
}

// An expert's scales go onto the B fragment (one packed multiply per register, folding in the
// 2^kE2m1Exponent of the raw registers) when every product stays exact: no NaN scale, and the
// expert's scale bytes span at most kFragmentScaleSpan binades so that with the fixed offset
// 2^(s_max - 128), applied to the f32 results, every dequantized weight is a normal bf16/f16
// and every scale operand is representable. Otherwise the expert takes the accumulator path
// (products of the exact E2M1 values summed per block and scaled in f32), which is exact for
// every byte. `range` is the expert's u32 from the packed scales (grouped_gemm_params.cuh).
template <Half kHalf>
inline constexpr u32 kFragmentScaleSpan = kHalf == Half::bf16 ? 64 : 14;

struct ExpertScaleRange {
  u32 smallest, largest;
};
MOEJIT_DEVICE ExpertScaleRange expert_scale_range(u32 range) { return {range & 0xffu, (range >> 8) & 0xffu}; }

template <Half kHalf>
MOEJIT_DEVICE bool fragment_scales_exact(ExpertScaleRange r) {
  return r.largest < 0xff && r.largest >= 2 && r.smallest <= r.largest &&
         r.largest - r.smallest <= kFragmentScaleSpan<kHalf>;
}

// The scale operand of byte s is 2^(s - 127 + kRaw - (s_max - 128)) for registers that hold the
// value times 2^-kRaw, i.e. the exponent field s + bias + kRaw + 1 - s_max: s + 254 - s_max for
// raw bf16 E2M1 registers, s + 30 - s_max for raw f16 ones, s + 22 - s_max for the f16 pairs of
// e4m3 bytes (kRaw = kE2m1E4m3Exponent: W4A8 where the mma runs in f16). In that last case a
// span of at most 14 keeps the operands within 2^-7 .. 2^7 and every weight (the value times
// 2^(s - s_max + 1)) a normal f16, as for raw f16 registers.
// A strip's scale word holds the bytes of its four n8 tiles (byte w: word w's column). Per strip,
// fragment_scale_strip prepares the word once; per word, fragment_scale makes the operand of
// byte w in both halves (both halves of a B register are the same column). Bytes 0 and 2 are
// spread into the two halves of one word, bytes 1 and 3 into another, and one integer
// multiply-add per word moves them into the exponent fields (bits 7..14 of a bf16, 10..14 of an
// f16) and adds the expert's constant: each half's total is a field in 1..254 (bf16) or 1..30
// (f16), so no half borrows from or carries into the other. Operand w is then half w / 2 of
// word w % 2 in both halves, which the packed multiply selects itself (prim::broadcast_half):
// a prmt and a multiply-add per word of the strip, nothing per operand.
template <Half kHalf>
inline constexpr u32 kExponentShift = kHalf == Half::bf16 ? 7 : 10;
template <Half kHalf, int kRaw = kE2m1Exponent<kHalf>>
MOEJIT_DEVICE u32 fragment_scale_addend(ExpertScaleRange r) {
  constexpr int kBias = kHalf == Half::bf16 ? 127 : 15;
  const u32 field_offset = static_cast<u32>(kBias + kRaw + 1 - static_cast<int>(r.largest));
  return (field_offset << kExponentShift<kHalf>) * 0x10001u;  // two's complement, per half
}
struct FragmentScaleStrip {
  u32 even, odd;  // the operands of bytes 0 and 2, of bytes 1 and 3
};
template <Half kHalf>
MOEJIT_DEVICE FragmentScaleStrip fragment_scale_strip(u32 scale_word, u32 addend) {
  constexpr u32 kField = 1u << kExponentShift<kHalf>;
  return {prim::prmt(scale_word, 0u, 0x4240u) * kField + addend, prim::prmt(scale_word, 0u, 0x4341u) * kField + addend};
}
template <Half kHalf>
MOEJIT_DEVICE u32 fragment_scale(FragmentScaleStrip strip, u32 w) {
  const u32 pair = w % 2 == 0 ? strip.even : strip.odd;
  return w / 2 == 0 ? prim::broadcast_half<0>(pair) : prim::broadcast_half<1>(pair);
}
// What the f32 results of a fragment-scaled expert are multiplied by: 2^(s_max - 128).
MOEJIT_DEVICE float fragment_scale_offset(ExpertScaleRange r) {
  return prim::twin::f32_from_bits((r.largest - 1) << 23);
}
// The accumulator path's constant operand: 2^kE2m1Exponent in both halves (exact E2M1 values).
template <Half kHalf>
inline constexpr u32 kE2m1Unscale = kHalf == Half::bf16 ? 0x7e807e80u /* 2^126 */ : 0x74007400u /* 2^14 */;

// The plain window: an expert whose scale bytes all lie in [kE8m0PlainLow, kE8m0PlainHigh]
// (2^-64 .. 2^63) has no 0x00 or NaN byte, so each byte converts with a shift (below), and an
// f32 sum of e4m3 products (at most 2^11 in magnitude, at least 2^-16 where not zero) times
// its scale is a normal number that cannot overflow: the per-token activation scale can wait
// for the epilogue. Every other expert converts with e8m0_to_f32 and scales each run by its
// activations first.
inline constexpr u32 kE8m0PlainLow = 63, kE8m0PlainHigh = 190;
MOEJIT_DEVICE bool e8m0_scales_plain(ExpertScaleRange r) {
  return r.smallest >= kE8m0PlainLow && r.largest <= kE8m0PlainHigh && r.smallest <= r.largest;
}
// Byte w of `bytes` (a byte in the plain window) as f32: 2^(s - 127).
MOEJIT_DEVICE float e8m0_plain_to_f32(u32 bytes, u32 w) {
  return prim::twin::f32_from_bits(((bytes >> (8 * w)) << 23) & 0x7f800000u);
}

// ---- INT4 -----------------------------------------------------------------------------------
// Register q holds nibbles (q, q + 4). OR-ing a nibble into the mantissa of 128.0 (bf16 0x4300,
// ulp 1) or 1024.0 (f16 0x6400, ulp 1) gives 128 + v or 1024 + v exactly; an f16 nibble taken
// in place at bits 4..7 gives 1024 + 16 v (still exact), which saves a shift. One fma then
// subtracts the bias and the zero point: q - z exactly, a small integer.
struct Int4Offsets {
  u32 low, high;  // added to registers 0, 2 (low) and 1, 3 (high): -(bias + z) in both halves
};

// The offsets for zero point z; `spread` holds z in bytes 0 and 2 ([z, 0, z, 0]).
template <Half kHalf>
MOEJIT_DEVICE Int4Offsets int4_offsets(u32 spread) {
  if constexpr (kHalf == Half::bf16) {
    const u32 v = spread | 0xc300c300u;  // -(128 + z): exponent of 128, mantissa z
    return {v, v};
  } else {
    // -(1024 + z) for nibbles at bits 0..3; -(64 + z) for those at bits 4..7, scaled by 1/16.
    return {spread | 0xe400e400u, (spread << 4) | 0xd400d400u};
  }
}

template <Half kHalf>
MOEJIT_DEVICE void int4_registers(u32 word, Int4Offsets z, u32 (&out)[4]) {
  using namespace moejit::prim;
  if constexpr (kHalf == Half::bf16) {
    constexpr u32 magic = 0x43004300u, one = 0x3f803f80u;
    for (u32 q = 0; q < 4; ++q) {
      const u32 biased = lop3<kLutAndOr>(q == 0 ? word : word >> (4 * q), 0x000f000fu, magic);
      out[q] = fma_bf16x2(biased, one, q % 2 == 0 ? z.low : z.high);
    }
  } else {
    constexpr u32 magic = 0x64006400u, one = 0x3c003c00u, sixteenth = 0x2c002c00u;
    for (u32 pair = 0; pair < 2; ++pair) {
      const u32 x = pair == 0 ? word : word >> 8;
      const u32 low = lop3<kLutAndOr>(x, 0x000f000fu, magic);   // 1024 + v
      const u32 high = lop3<kLutAndOr>(x, 0x00f000f0u, magic);  // 1024 + 16 v
      out[2 * pair] = fma_f16x2(low, one, z.low);
      out[2 * pair + 1] = fma_f16x2(high, sixteenth, z.high);
    }
  }
}

// ---- e4m3 B registers (weights in the 8-bit-activation order, PackedOrder::a8) ----------------
// One packed word becomes the two registers of one m16n8k32 B fragment, each four e4m3 bytes.
// Both formats come out scaled by a power of two that the kernel folds into its f32 results:
// E2M1 as its value times 2^-6, INT4 as (q - z) times 2^-9. Every value is exact.
inline constexpr int kE2m1E4m3Exponent = 6;
inline constexpr int kInt4E4m3Exponent = 9;

MOEJIT_DEVICE void e2m1_e4m3_registers(u32 word, u32 (&out)[2]) {
  using namespace moejit::prim;
  out[0] = word & kE4m3E2m1LowMask;
  out[1] = lop3<kLutAndOr>(word << 2, kE4m3E2m1ShiftUp, (word >> 2) & kE4m3E2m1ShiftDown);
}

// E2M1 to e4m3 with the block scale in the bytes (sm_90a's e4m3 wgmma, which has no scale
// operand): the byte of code (E, M) becomes the value times 2^(s - s_max + 6), whose exponent
// field is E + k with k = s - s_max + 12: a normal e4m3 for every nonzero code when k is 1..12
// (0.5 is 1.0 x 2^-1, exponent field k, mantissa 0), so an expert folds exactly when its scale
// bytes span at most kE4m3FoldSpan binades; its f32 sums are then multiplied by 2^(s_max - 133)
// (e4m3_fold_offset). Blocks whose codes are all zero never widen the range (the packer gives
// them the largest byte), and their bytes stay zero. s_max is also kept in the plain window
// (kE8m0PlainLow .. kE8m0PlainHigh, below), so that a sum of e4m3 products (at most 2^34 for
// K <= 2^16, at least 2^-18 where not zero) times the offset (2^-70 .. 2^57) is a normal f32
// before any activation scale multiplies it: the order the epilogue takes.
inline constexpr u32 kE4m3FoldSpan = 11;
MOEJIT_DEVICE bool e4m3_fold_exact(ExpertScaleRange r) {
  return r.largest >= kE8m0PlainLow && r.largest <= kE8m0PlainHigh && r.smallest <= r.largest &&
         r.largest - r.smallest <= kE4m3FoldSpan;
}

// A column's lookup table for one block: the unsigned e4m3 byte of each magnitude code
// E1 E0 M = 0..7 (entries 0..3 in `low`, 4..7 in `high`, one byte each, as prmt indexes them):
// 0 for code 0, k << 3 for 0.5, (E + k) << 3 | M << 2 for the others. Largest entry
// (3 + 12) << 3 | 4 = 0x7c (384: code 6 at s = s_max; never the NaN byte 0x7f).
struct E4m3FoldTable {
  u32 low, high;
};
// The expert's part of every table: k = 12 - s_max in each entry's exponent field (two's
// complement), plus the codes' own fields (0.5: 0, 1 and 1.5: 1, 2 and 3: 2, 4 and 6: 3).
MOEJIT_DEVICE E4m3FoldTable e4m3_fold_base(ExpertScaleRange r) {
  const u32 k = 12u - r.largest;
  return {k * 0x08080800u + 0x0c080000u, k * 0x08080808u + 0x1c181410u};
}
// A column's table for its block's scale byte s (in byte 0 of `s_byte`, the others zero): the
// base plus s << 3 in every entry but code 0's. Each entry ends at (s - s_max + 12 + E) << 3 |
// M << 2 < 0x80, so the carries and borrows of the two's-complement base cancel.
MOEJIT_DEVICE E4m3FoldTable e4m3_fold_table(u32 s_byte, E4m3FoldTable base) {
  return {s_byte * 0x08080800u + base.low, s_byte * 0x08080808u + base.high};
}
MOEJIT_DEVICE float e4m3_fold_offset(ExpertScaleRange r) { return prim::twin::f32_from_bits((r.largest - 6) << 23); }

// The two registers of a word of one column (the a8 order: register 0's code j at bits 7 (sign),
// 4..2 (E1 E0 M) of byte j, register 1's at bits 5 (sign), 6 (E1), 1..0 (E0 M)), its block's
// table applied: each register's four magnitude codes become one prmt selector (code j in
// nibble j), the table's bytes come out in fragment order, and the signs are ORed back in.
// 17 integer operations per word with the table's three, where adding the scale to the
// exponents of e2m1_e4m3_registers' bytes (gating codes 0 and 0.5 with sign-replicating masks)
// took 23.
MOEJIT_DEVICE void e2m1_e4m3_folded_registers(u32 word, E4m3FoldTable table, u32 (&out)[2]) {
  using namespace moejit::prim;
  const u32 codes0 = (word >> 2) & 0x07070707u;                           // byte j: code j of register 0
  const u32 codes1 = (word & 0x03030303u) | ((word >> 4) & 0x04040404u);  // byte j: code j of register 1
  // Bytes 0..3: codes 0, 2 of register 0, then of register 1; the odd codes 4 bits up.
  const u32 nibbles = prmt(codes0, codes1, 0x6420u) + (prmt(codes0, codes1, 0x7531u) << 4);
  out[0] = lop3<kLutAndOr>(word, 0x80808080u, prmt(table.low, table.high, nibbles));
  out[1] = lop3<kLutAndOr>(word << 2, 0x80808080u, prmt(table.low, table.high, nibbles >> 16));
}

// INT4 to e4m3 with the zero point subtracted exactly: q - z in [-15, 15] is the byte |q - z|
// (an e4m3 worth |q - z| * 2^-9) with the sign at bit 7. Per byte, d = 0x80 + q - z and
// e = 0x80 + z - q never borrow from a neighbour; d's top bit says q >= z, and then d - 0x80
// is the answer, else e (its top bit set) is. `below` / `above` are 0x80 - z and 0x80 + z in
// every byte, computed once per column and group.
struct Int4E4m3Offsets {
  u32 below, above;
};
MOEJIT_DEVICE Int4E4m3Offsets int4_e4m3_offsets(u32 zero_in_every_byte) {
  return {0x80808080u - zero_in_every_byte, 0x80808080u + zero_in_every_byte};
}

inline constexpr u32 kLutSelect = (prim::kLopA & prim::kLopB) | (~prim::kLopA & prim::kLopC & 0xffu);  // a ? b : c
inline constexpr u32 kLutXorAnd = prim::kLopA ^ (prim::kLopB & prim::kLopC);                           // a ^ (b & c)

MOEJIT_DEVICE u32 int4_e4m3_register(u32 codes, Int4E4m3Offsets z) {
  using namespace moejit::prim;
  const u32 d = codes + z.below;                 // 0x80 + q - z
  const u32 e = z.above - codes;                 // 0x80 + z - q
  const u32 nonnegative = prmt(d, 0u, 0xba98u);  // 0xff in the bytes where q >= z
  return lop3<kLutXorAnd>(lop3<kLutSelect>(nonnegative, d, e), nonnegative, 0x80808080u);
}

MOEJIT_DEVICE void int4_e4m3_registers(u32 word, Int4E4m3Offsets z, u32 (&out)[2]) {
  out[0] = int4_e4m3_register(word & kE4m3Int4Mask, z);
  out[1] = int4_e4m3_register((word >> 4) & kE4m3Int4Mask, z);
}

}  // namespace moejit::gemm
