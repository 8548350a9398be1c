// The grouped GEMM's in-register dequantization (templates/gemm/dequant.cuh) on the host: every
// element of a packed word lands in the B-fragment position the packed layout promises, with the
// value of its code; the fragment scale operands reproduce 2^(s - 127) exactly over the range
// the kernel uses them for. The bit positions below are written out from the contract in
// templates/README.md, not taken from the header's helpers.

#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "gemm/dequant.cuh"
#include "gemm/grouped_gemm_params.cuh"

using namespace moejit;

namespace {

constexpr double kE2M1[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

double half_value(gemm::Half h, u32 reg, u32 which) {
  const u16 bits = static_cast<u16>(reg >> (16 * which));
  return h == gemm::Half::bf16 ? prim::twin::bf16_to_f32(bits) : prim::twin::f16_to_f32(bits);
}

// Fragment element e (0..7) of the registers: step e / 4, register (e / 2) % 2, half e % 2,
// i.e. out[e / 2], half e % 2.
double fragment_element(gemm::Half h, const u32 (&out)[4], u32 e) { return half_value(h, out[e / 2], e % 2); }

// k offset within the tile of fragment element e for lane (., t): as mma's B fragment says.
u32 fragment_k(u32 lane, u32 e) { return 16 * (e / 4) + 8 * ((e / 2) % 2) + 2 * (lane % 4) + e % 2; }

// int4: element e is nibble (e / 2) + 4 (e % 2).
constexpr u32 kInt4Nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// E2M1: the word bits of element e's M, E0, E1 and sign (templates/README.md).
constexpr u32 kE2m1Bits[8][4] = {{6, 7, 8, 15},   {22, 23, 24, 31}, {9, 10, 11, 18}, {25, 26, 27, 2},
                                 {12, 13, 14, 21}, {28, 29, 30, 5},  {3, 4, 0, 1},    {19, 20, 16, 17}};
// The same for f16 activations (the a16f16 order).
constexpr u32 kE2m1F16Bits[8][4] = {{9, 10, 11, 15},  {25, 26, 27, 31}, {12, 13, 14, 18}, {28, 29, 30, 2},
                                    {6, 7, 1, 5},     {22, 23, 17, 21}, {0, 3, 4, 8},     {16, 19, 20, 24}};
const u32 (&e2m1_bits(gemm::Half h))[8][4] { return h == gemm::Half::bf16 ? kE2m1Bits : kE2m1F16Bits; }

u32 spread(u32 byte) { return byte | byte << 16; }

// The scale operand the kernel makes for byte s of a strip's scale word, s at byte w (w = s % 4)
// beside other bytes of the expert's range (each strip word is prepared once, then read per byte).
template <gemm::Half kHalf>
u32 scale_operand(u32 s, gemm::ExpertScaleRange range, u32 addend) {
  const u32 w = s % 4;
  u32 word = 0;
  for (u32 b = 0; b < 4; ++b) {
    const u32 other = range.smallest + (s * 7 + b * 13) % (range.largest - range.smallest + 1);
    word |= (b == w ? s : other) << (8 * b);
  }
  return gemm::fragment_scale<kHalf>(gemm::fragment_scale_strip<kHalf>(word, addend), w);
}

}  // namespace

TEST_CASE("the E2M1 bit table of the contract is the one the packer and kernel use") {
  for (u32 e = 0; e < 8; ++e)
    for (u32 b = 0; b < 4; ++b) {
      CHECK(e2m1_word_bit(e, b) == kE2m1Bits[e][b]);
      CHECK(e2m1_f16_word_bit(e, b) == kE2m1F16Bits[e][b]);
      CHECK(packed_word_bit(PackedOrder::a16, true, e, b) == kE2m1Bits[e][b]);
      CHECK(packed_word_bit(PackedOrder::a16f16, true, e, b) == kE2m1F16Bits[e][b]);
    }
  for (u32 e = 0; e < 8; ++e) CHECK(int4_nibble_of_element(e) == kInt4Nibble[e]);
}

TEST_CASE("int4 words dequantize to q - z in the promised fragment positions") {
  std::mt19937 rng(std::random_device{}());
  for (gemm::Half h : {gemm::Half::bf16, gemm::Half::f16}) {
    for (int rep = 0; rep < 2000; ++rep) {
      const u32 lane = rng() % 32, zero = rng() % 16;
      u32 code_at_k[32] = {};
      u32 word = 0;
      for (u32 e = 0; e < 8; ++e) {
        const u32 code = rng() % 16;
        word |= code << (4 * kInt4Nibble[e]);
        code_at_k[fragment_k(lane, e)] = code;
      }
      u32 out[4];
      if (h == gemm::Half::bf16)
        gemm::int4_registers<gemm::Half::bf16>(word, gemm::int4_offsets<gemm::Half::bf16>(spread(zero)), out);
      else
        gemm::int4_registers<gemm::Half::f16>(word, gemm::int4_offsets<gemm::Half::f16>(spread(zero)), out);
      for (u32 e = 0; e < 8; ++e) {
        CAPTURE(e);
        CHECK(fragment_element(h, out, e) == static_cast<int>(code_at_k[fragment_k(lane, e)]) - static_cast<int>(zero));
      }
    }
  }
}

TEST_CASE("E2M1 words give their values times 2^-126 (bf16) or 2^-14 (f16), signs included, in place") {
  std::mt19937 rng(std::random_device{}());
  for (gemm::Half h : {gemm::Half::bf16, gemm::Half::f16}) {
    const int shift = h == gemm::Half::bf16 ? 126 : 14;
    for (int rep = 0; rep < 2000; ++rep) {
      const u32 lane = rng() % 32;
      u32 code_at_k[32] = {};
      u32 word = 0;
      for (u32 e = 0; e < 8; ++e) {
        const u32 code = rng() % 16;
        for (u32 b = 0; b < 4; ++b) word |= ((code >> b) & 1u) << e2m1_bits(h)[e][b];
        code_at_k[fragment_k(lane, e)] = code;
      }
      u32 raw[4];
      if (h == gemm::Half::bf16) gemm::e2m1_registers<gemm::Half::bf16>(word, raw);
      else gemm::e2m1_registers<gemm::Half::f16>(word, raw);
      for (u32 e = 0; e < 8; ++e) {
        const u32 code = code_at_k[fragment_k(lane, e)];
        const double expected = (code & 8 ? -1.0 : 1.0) * kE2M1[code & 7];
        const double got = std::ldexp(fragment_element(h, raw, e), shift);
        CAPTURE(code);
        CHECK(got == expected);
        CHECK(std::signbit(got) == ((code & 8) != 0));  // -0 stays -0
      }
    }
  }
}

TEST_CASE("fragment scale operands give w * 2^(s-127) exactly for every byte of an exact expert range") {
  // For every expert range the kernel accepts and every byte s in it, every E2M1 value times
  // its scale comes out of one packed multiply exactly, up to the expert's f32 offset.
  for (gemm::Half h : {gemm::Half::bf16, gemm::Half::f16}) {
    const u32 span = h == gemm::Half::bf16 ? 64 : 14;
    for (u32 largest = 0; largest < 256; ++largest)
      for (u32 smallest : {largest >= span ? largest - span : 0u, largest / 2, largest}) {
        const gemm::ExpertScaleRange range{smallest, largest};
        const bool exact =
            h == gemm::Half::bf16 ? gemm::fragment_scales_exact<gemm::Half::bf16>(range) : gemm::fragment_scales_exact<gemm::Half::f16>(range);
        CAPTURE(largest);
        CAPTURE(smallest);
        CHECK(exact == (largest < 255 && largest >= 2 && largest - smallest <= span));
        if (!exact) continue;
        const u32 addend = h == gemm::Half::bf16 ? gemm::fragment_scale_addend<gemm::Half::bf16>(range)
                                                 : gemm::fragment_scale_addend<gemm::Half::f16>(range);
        const double offset = gemm::fragment_scale_offset(range);
        CHECK(offset == std::ldexp(1.0, static_cast<int>(largest) - 128));
        for (u32 s = smallest; s <= largest; ++s)
          for (u32 code = 0; code < 16; ++code) {
            // The raw register of this code in both halves, then the multiply.
            u32 word = 0;
            for (u32 b = 0; b < 4; ++b) word |= ((code >> b) & 1u) << e2m1_bits(h)[0][b] | ((code >> b) & 1u) << e2m1_bits(h)[1][b];
            u32 raw[4];
            u32 operand, product;
            if (h == gemm::Half::bf16) {
              gemm::e2m1_registers<gemm::Half::bf16>(word, raw);
              operand = scale_operand<gemm::Half::bf16>(s, range, addend);
              product = prim::mul_bf16x2(raw[0], operand);
            } else {
              gemm::e2m1_registers<gemm::Half::f16>(word, raw);
              operand = scale_operand<gemm::Half::f16>(s, range, addend);
              product = prim::mul_f16x2(raw[0], operand);
            }
            const double expected = (code & 8 ? -1.0 : 1.0) * kE2M1[code & 7] * std::ldexp(1.0, static_cast<int>(s) - 127);
            CAPTURE(s);
            CAPTURE(code);
            CHECK(half_value(h, product, 0) * offset == expected);
            CHECK(half_value(h, product, 1) * offset == expected);
          }
      }
  }
}

TEST_CASE("the accumulator path's operand restores exact E2M1 values") {
  for (gemm::Half h : {gemm::Half::bf16, gemm::Half::f16})
    for (u32 code = 0; code < 16; ++code) {
      u32 word = 0;
      for (u32 b = 0; b < 4; ++b) word |= ((code >> b) & 1u) << e2m1_bits(h)[0][b];
      u32 raw[4];
      u32 value;
      if (h == gemm::Half::bf16) {
        gemm::e2m1_registers<gemm::Half::bf16>(word, raw);
        value = prim::mul_bf16x2(raw[0], gemm::kE2m1Unscale<gemm::Half::bf16>);
      } else {
        gemm::e2m1_registers<gemm::Half::f16>(word, raw);
        value = prim::mul_f16x2(raw[0], gemm::kE2m1Unscale<gemm::Half::f16>);
      }
      CHECK(half_value(h, value, 0) == (code & 8 ? -1.0 : 1.0) * kE2M1[code & 7]);
    }
}

TEST_CASE("spread_byte puts byte w of a word into bytes 0 and 2") {
  const u32 bytes = 0xa1b2c3d4u;
  CHECK(gemm::spread_byte(bytes, 0) == 0x00d400d4u);
  CHECK(gemm::spread_byte(bytes, 1) == 0x00c300c3u);
  CHECK(gemm::spread_byte(bytes, 2) == 0x00b200b2u);
  CHECK(gemm::spread_byte(bytes, 3) == 0x00a100a1u);
}

TEST_CASE("E8M0 scales: 0x00 is 2^-127, 0xFE is 2^127, 0xFF is NaN") {
  CHECK(gemm::e8m0_to_f32(0x00) == std::ldexp(1.0f, -127));
  CHECK(gemm::e8m0_to_f32(0x01) == std::ldexp(1.0f, -126));
  CHECK(gemm::e8m0_to_f32(0x7f) == 1.0f);
  CHECK(gemm::e8m0_to_f32(0xfe) == std::ldexp(1.0f, 127));
  CHECK(std::isnan(gemm::e8m0_to_f32(0xff)));
  for (u32 s = 1; s < 255; ++s) CHECK(gemm::e8m0_to_f32(s) == std::ldexp(1.0f, static_cast<int>(s) - 127));
}

// ---- The 8-bit-activation order (PackedOrder::a8) -------------------------------------------
// mma.m16n8k32's e4m3 B fragment (PTX ISA): lane (g, t) register r byte j is row (k)
// 16 r + 4 t + j of column g. Element e of the packed word goes to register e / 4, byte e % 4.
namespace {

u32 a8_fragment_k(u32 lane, u32 e) { return 16 * (e / 4) + 4 * (lane % 4) + e % 4; }

// The contract's bit tables (templates/README.md): int4 element e is the nibble at bit
// 8 (e % 4) + 4 (e / 4); E2M1 element e keeps M, E0, E1, sign at these bits of byte e % 4.
constexpr u32 kA8E2m1ByteBits[2][4] = {{2, 3, 4, 7}, {0, 1, 6, 5}};

double e4m3_byte(const u32 (&regs)[2], u32 e) {
  return prim::twin::e4m3_to_f32(static_cast<u8>(regs[e / 4] >> (8 * (e % 4))));
}

}  // namespace

TEST_CASE("the a8 order's k offsets and bit positions are the contract's") {
  for (u32 lane = 0; lane < 32; ++lane)
    for (u32 e = 0; e < 8; ++e) {
      CHECK(packed8_k_of_element(lane, e) == a8_fragment_k(lane, e));
      CHECK(packed_k_of(PackedOrder::a8, lane, e) == a8_fragment_k(lane, e));
      CHECK(packed_k_of(PackedOrder::a16, lane, e) == fragment_k(lane, e));
    }
  for (u32 e = 0; e < 8; ++e)
    for (u32 b = 0; b < 4; ++b) {
      CHECK(packed_word_bit(PackedOrder::a8, false, e, b) == 8 * (e % 4) + 4 * (e / 4) + b);
      CHECK(packed_word_bit(PackedOrder::a8, true, e, b) == 8 * (e % 4) + kA8E2m1ByteBits[e / 4][b]);
      CHECK(packed_word_bit(PackedOrder::a16, true, e, b) == kE2m1Bits[e][b]);
      CHECK(packed_word_bit(PackedOrder::a16, false, e, b) == 4 * kInt4Nibble[e] + b);
    }
  // Every lane's 8 elements cover 8 distinct k, and the 4 lanes of a column cover all 32.
  for (u32 g = 0; g < 8; ++g) {
    u32 seen = 0;
    for (u32 t = 0; t < 4; ++t)
      for (u32 e = 0; e < 8; ++e) seen |= 1u << packed8_k_of_element(4 * g + t, e);
    CHECK(seen == 0xffffffffu);
  }
}

TEST_CASE("E2M1 words in the a8 order give e4m3 bytes worth the value times 2^-6, in place") {
  std::mt19937 rng(std::random_device{}());
  for (int rep = 0; rep < 4000; ++rep) {
    u32 codes[8], word = 0;
    for (u32 e = 0; e < 8; ++e) {
      codes[e] = rep < 16 ? static_cast<u32>(rep) : rng() % 16;  // every code in every position first
      for (u32 b = 0; b < 4; ++b) word |= ((codes[e] >> b) & 1u) << (8 * (e % 4) + kA8E2m1ByteBits[e / 4][b]);
    }
    u32 regs[2];
    gemm::e2m1_e4m3_registers(word, regs);
    for (u32 e = 0; e < 8; ++e) {
      const double expected = (codes[e] & 8 ? -1.0 : 1.0) * kE2M1[codes[e] & 7];
      const double got = std::ldexp(e4m3_byte(regs, e), gemm::kE2m1E4m3Exponent);
      CAPTURE(e);
      CAPTURE(codes[e]);
      CHECK(got == expected);
      CHECK(std::signbit(got) == ((codes[e] & 8) != 0));
    }
  }
}

TEST_CASE("W4A8 on f16-mma targets: e4m3 pairs of E2M1 words times the fragment operand give w * 2^(s-127) exactly") {
  // sm_90 / sm_100: the a8 word's e4m3 bytes become f16 pairs (the primitive's conversion), and
  // one packed multiply by the operand of fragment_scale_addend<f16, kE2m1E4m3Exponent> scales
  // them; for every accepted expert range and byte, every code, both halves, exact.
  for (u32 largest = 0; largest < 256; ++largest)
    for (u32 smallest : {largest >= 14 ? largest - 14 : 0u, largest / 2, largest}) {
      const gemm::ExpertScaleRange range{smallest, largest};
      if (!gemm::fragment_scales_exact<gemm::Half::f16>(range)) continue;
      const u32 addend = gemm::fragment_scale_addend<gemm::Half::f16, gemm::kE2m1E4m3Exponent>(range);
      const double offset = gemm::fragment_scale_offset(range);
      for (u32 s = smallest; s <= largest; ++s)
        for (u32 code = 0; code < 16; ++code) {
          u32 word = 0;  // the code in elements 0 and 1 (bytes 0 and 1 of register 0)
          for (u32 e = 0; e < 2; ++e)
            for (u32 b = 0; b < 4; ++b) word |= ((code >> b) & 1u) << (8 * e + kA8E2m1ByteBits[0][b]);
          u32 regs[2];
          gemm::e2m1_e4m3_registers(word, regs);
          const u32 pair = prim::e4m3x2_to_f16x2(static_cast<u16>(regs[0]));
          const u32 product = prim::mul_f16x2(pair, scale_operand<gemm::Half::f16>(s, range, addend));
          const double expected = (code & 8 ? -1.0 : 1.0) * kE2M1[code & 7] * std::ldexp(1.0, static_cast<int>(s) - 127);
          CAPTURE(largest);
          CAPTURE(s);
          CAPTURE(code);
          for (u32 h = 0; h < 2; ++h) {
            const u16 bits = static_cast<u16>(product >> (16 * h));
            CHECK(((bits & 0x7c00u) != 0 || (bits & 0x3ffu) == 0));  // normal or zero, never subnormal
            CHECK(half_value(gemm::Half::f16, product, h) * offset == expected);
            CHECK(std::signbit(half_value(gemm::Half::f16, product, h)) == ((code & 8) != 0));
          }
        }
    }
}

// e4m3 (OCP FP8 E4M3): sign, 4 exponent bits of bias 7, 3 mantissa bits; exponent 0 is
// subnormal, S.1111.111 is NaN. Written from the format, not from the twins.
double e4m3_value(u32 byte) {
  const u32 exponent = (byte >> 3) & 0xf, mantissa = byte & 7;
  const double sign = byte & 0x80 ? -1.0 : 1.0;
  if (exponent == 15 && mantissa == 7) return std::nan("");
  if (exponent == 0) return sign * std::ldexp(mantissa / 8.0, -6);
  return sign * std::ldexp(1.0 + mantissa / 8.0, static_cast<int>(exponent) - 7);
}

TEST_CASE("sm_90a W4A8 wgmma: E2M1 words with the block scale folded into the e4m3 bytes are exact") {
  // For every expert range the fold accepts, every block byte s in it, every code in every
  // element: the byte, times the expert's offset, is the weight w * 2^(s - 127), and is a
  // normal e4m3 or a zero of the code's sign.
  std::mt19937 rng(std::random_device{}());
  u32 ranges = 0;
  for (u32 largest = 0; largest < 256; ++largest)
    for (u32 smallest : {largest >= gemm::kE4m3FoldSpan ? largest - gemm::kE4m3FoldSpan : 0u, largest}) {
      const gemm::ExpertScaleRange range{smallest, largest};
      if (!gemm::e4m3_fold_exact(range)) continue;
      ++ranges;
      const gemm::E4m3FoldTable base = gemm::e4m3_fold_base(range);
      const double offset = gemm::e4m3_fold_offset(range);
      CHECK(offset == std::ldexp(1.0, static_cast<int>(largest) - 133));
      for (u32 s = smallest; s <= largest; ++s) {
        const gemm::E4m3FoldTable table = gemm::e4m3_fold_table(s, base);
        for (int rep = 0; rep < 20; ++rep) {
          u32 codes[8], word = 0;
          for (u32 e = 0; e < 8; ++e) {
            codes[e] = rep == 0 ? e : rep == 1 ? 8 + e : rng() % 16;  // every code, both signs, first
            for (u32 b = 0; b < 4; ++b) word |= ((codes[e] >> b) & 1u) << (8 * (e % 4) + kA8E2m1ByteBits[e / 4][b]);
          }
          u32 regs[2];
          gemm::e2m1_e4m3_folded_registers(word, table, regs);
          for (u32 e = 0; e < 8; ++e) {
            const u32 byte = (regs[e / 4] >> (8 * (e % 4))) & 0xff;
            const double expected =
                (codes[e] & 8 ? -1.0 : 1.0) * kE2M1[codes[e] & 7] * std::ldexp(1.0, static_cast<int>(s) - 127);
            CAPTURE(largest);
            CAPTURE(s);
            CAPTURE(codes[e]);
            CAPTURE(byte);
            CHECK(e4m3_value(byte) * offset == expected);
            CHECK(((byte & 0x78) != 0 || (byte & 0x7f) == 0));  // normal, or zero
            CHECK((byte >> 7) == (codes[e] >> 3));              // the code's sign, zeros included
          }
        }
      }
    }
  CHECK(ranges == 2 * (190 - 63 + 1));
  // What the fold refuses: a NaN byte, a span past 11 binades, a largest byte outside the plain
  // window 63 .. 190 (where sums times the offset could leave f32's normals).
  CHECK_FALSE(gemm::e4m3_fold_exact({120, 0xff}));
  CHECK_FALSE(gemm::e4m3_fold_exact({120, 120 + gemm::kE4m3FoldSpan + 1}));
  CHECK(gemm::e4m3_fold_exact({120, 120 + gemm::kE4m3FoldSpan}));
  CHECK(gemm::e4m3_fold_exact({52, 63}));
  CHECK_FALSE(gemm::e4m3_fold_exact({52, 62}));
  CHECK(gemm::e4m3_fold_exact({179, 190}));
  CHECK_FALSE(gemm::e4m3_fold_exact({180, 191}));
  CHECK_FALSE(gemm::e4m3_fold_exact({130, 120}));
}

TEST_CASE("int4 words in the a8 order give e4m3 bytes worth (q - z) times 2^-9 for every zero point") {
  std::mt19937 rng(std::random_device{}());
  for (u32 zero = 0; zero < 16; ++zero) {
    const gemm::Int4E4m3Offsets offsets = gemm::int4_e4m3_offsets(zero * 0x01010101u);
    for (int rep = 0; rep < 500; ++rep) {
      u32 codes[8], word = 0;
      for (u32 e = 0; e < 8; ++e) {
        codes[e] = rep < 2 ? (rep == 0 ? e : 15 - e) : rng() % 16;
        word |= codes[e] << (8 * (e % 4) + 4 * (e / 4));
      }
      u32 regs[2];
      gemm::int4_e4m3_registers(word, offsets, regs);
      for (u32 e = 0; e < 8; ++e) {
        CAPTURE(zero);
        CAPTURE(codes[e]);
        CHECK(std::ldexp(e4m3_byte(regs, e), gemm::kInt4E4m3Exponent) ==
              static_cast<double>(static_cast<int>(codes[e]) - static_cast<int>(zero)));
      }
    }
  }
}

TEST_CASE("broadcast_byte puts byte w of a word into all four bytes") {
  const u32 bytes = 0xa1b2c3d4u;
  CHECK(gemm::broadcast_byte(bytes, 0) == 0xd4d4d4d4u);
  CHECK(gemm::broadcast_byte(bytes, 1) == 0xc3c3c3c3u);
  CHECK(gemm::broadcast_byte(bytes, 2) == 0xb2b2b2b2u);
  CHECK(gemm::broadcast_byte(bytes, 3) == 0xa1a1a1a1u);
}

TEST_CASE("E8M0 plain window: bytes 63..190 convert with a shift, and the window is what the kernel tests") {
  for (u32 s = gemm::kE8m0PlainLow; s <= gemm::kE8m0PlainHigh; ++s)
    for (u32 w = 0; w < 4; ++w) {
      const u32 bytes = 0xa5a5a5a5u & ~(0xffu << (8 * w)) | (s << (8 * w));
      CHECK(gemm::e8m0_plain_to_f32(bytes, w) == std::ldexp(1.0f, static_cast<int>(s) - 127));
    }
  CHECK(gemm::e8m0_scales_plain({63, 190}));
  CHECK(gemm::e8m0_scales_plain({127, 127}));
  CHECK_FALSE(gemm::e8m0_scales_plain({62, 127}));
  CHECK_FALSE(gemm::e8m0_scales_plain({127, 191}));
  CHECK_FALSE(gemm::e8m0_scales_plain({0, 0xff}));
  CHECK_FALSE(gemm::e8m0_scales_plain({130, 120}));
}
