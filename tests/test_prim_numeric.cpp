// Host twins of the numeric primitives (templates/common/numeric.cuh, half2.cuh): conversions
// and packed fma, against independent references.

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/half2.cuh"
#include "common/numeric.cuh"
#include "fp4_reference.hpp"
#include "moe/quantize_params.cuh"

using namespace moejit;
using namespace moejit::prim;

namespace {

float bits_to_float(u32 b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// An IEEE-like binary format: explicit mantissa bits, exponent bits, bias.
struct Format {
  int man, exp_bits, bias;
};
constexpr Format kF16{10, 5, 15}, kBF16{7, 8, 127};

// The value of a finite 16-bit float as an integer multiple of 2^unit_exp (unit_exp must be at
// or below the format's smallest subnormal exponent for exactness).
__int128 to_units(u16 h, Format f, int unit_exp) {
  const int exp = (h >> f.man) & ((1 << f.exp_bits) - 1), man = h & ((1 << f.man) - 1);
  const int lsb_exp = (exp == 0 ? 1 : exp) - f.bias - f.man;
  __int128 v = exp == 0 ? man : (static_cast<__int128>(1) << f.man) + man;
  v <<= (lsb_exp - unit_exp);
  return (h >> 15) ? -v : v;
}

// Rounds v * 2^unit_exp to the format, to nearest even: the exact reference.
u16 round_units(__int128 v, int unit_exp, Format f) {
  const u16 sign = v < 0 ? 0x8000 : 0;
  unsigned __int128 a = v < 0 ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  if (a == 0) return sign;
  int msb = 127;
  while (!((a >> msb) & 1)) --msb;
  const int emin = 1 - f.bias;
  int lsb_exp = std::max(msb + unit_exp, emin) - f.man;
  const int shift = lsb_exp - unit_exp;
  unsigned __int128 q = a;
  if (shift > 0) {
    const unsigned __int128 rest = a & ((static_cast<unsigned __int128>(1) << shift) - 1);
    const unsigned __int128 half = static_cast<unsigned __int128>(1) << (shift - 1);
    q = a >> shift;
    if (rest > half || (rest == half && (q & 1))) ++q;
  } else {
    q = a << -shift;
  }
  if (q >> (f.man + 1)) {
    q >>= 1;
    ++lsb_exp;
  }
  if (!(q >> f.man)) return sign | static_cast<u16>(q);  // subnormal
  const int exp_field = lsb_exp + f.man + f.bias;
  if (exp_field >= (1 << f.exp_bits) - 1) return sign | static_cast<u16>(((1 << f.exp_bits) - 1) << f.man);
  return sign | static_cast<u16>(exp_field << f.man) | static_cast<u16>(q & ((1u << f.man) - 1));
}

}  // namespace

TEST_CASE("f16 <-> f32 conversions match the compiler's _Float16 bit for bit") {
  for (u32 h = 0; h < 65536; ++h) {
    _Float16 x;
    u16 hb = static_cast<u16>(h);
    std::memcpy(&x, &hb, 2);
    float ref = static_cast<float>(x), got = twin::f16_to_f32(hb);
    if (std::isnan(ref)) {
      CHECK(std::isnan(got));
    } else {
      REQUIRE(std::memcmp(&ref, &got, 4) == 0);
    }
  }
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 2000000; ++i) {
    float f = bits_to_float(static_cast<u32>(rng()));
    if (std::isnan(f)) {
      CHECK(twin::f32_to_f16(f) == 0x7fff);
      continue;
    }
    _Float16 x = static_cast<_Float16>(f);
    u16 ref;
    std::memcpy(&ref, &x, 2);
    CAPTURE(f);
    REQUIRE(twin::f32_to_f16(f) == ref);
  }
}

TEST_CASE("f32 -> bf16 rounds to nearest even and keeps NaN, infinities and subnormals") {
  CHECK(twin::f32_to_bf16(1.0f) == 0x3f80);
  CHECK(twin::f32_to_bf16(bits_to_float(0x3f808000)) == 0x3f80);  // tie, even stays
  CHECK(twin::f32_to_bf16(bits_to_float(0x3f818000)) == 0x3f82);  // tie, odd rounds up
  CHECK(twin::f32_to_bf16(bits_to_float(0x3f808001)) == 0x3f81);  // above the tie
  CHECK(twin::f32_to_bf16(bits_to_float(0x7f7fffff)) == 0x7f80);  // rounds to infinity
  CHECK(twin::f32_to_bf16(-INFINITY) == 0xff80);
  CHECK(twin::f32_to_bf16(NAN) == 0x7fff);
  CHECK(twin::f32_to_bf16(bits_to_float(0x00010000)) == 0x0001);  // smallest bf16 subnormal
  CHECK(twin::f32_to_bf16(bits_to_float(0x00008000)) == 0x0000);  // half of it: tie to even (0)
  CHECK(twin::f32_to_bf16(bits_to_float(0x80018000)) == 0x8002);
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 100000; ++i) {
    u16 h = static_cast<u16>(rng());
    if (((h >> 7) & 0xff) == 0xff) continue;  // NaN/inf
    CHECK(twin::f32_to_bf16(twin::bf16_to_f32(h)) == h);
  }
}

TEST_CASE("e4m3: every code decodes per the OCP e4m3fn table and round-trips") {
  for (u32 v = 0; v < 256; ++v) {
    CAPTURE(v);
    const int sign = v & 0x80 ? -1 : 1, exp = (v >> 3) & 15, man = v & 7;
    float got = twin::e4m3_to_f32(static_cast<u8>(v));
    if (exp == 15 && man == 7) {
      CHECK(std::isnan(got));
      continue;
    }
    double expected = exp == 0 ? sign * man * std::ldexp(1.0, -9)
                               : sign * (1.0 + man / 8.0) * std::ldexp(1.0, exp - 7);
    CHECK(got == expected);
    if (v != 0x80) CHECK(twin::f32_to_e4m3(got) == v);
  }
  CHECK(twin::e4m3_to_f32(0x7e) == 448.0f);
  CHECK(twin::f32_to_e4m3(1e9f) == 0x7e);       // satfinite
  CHECK(twin::f32_to_e4m3(-INFINITY) == 0xfe);
  CHECK(twin::f32_to_e4m3(NAN) == 0x7f);
  CHECK(twin::f32_to_e4m3(464.0f) == 0x7e);     // between 448 and the would-be 480: saturates
  CHECK(twin::f32_to_e4m3(1.0625f) == 0x38);    // tie between 1 and 1.125: even (1)
  CHECK(twin::f32_to_e4m3(1.1875f) == 0x3a);    // tie between 1.125 and 1.25: even (1.25)
  CHECK(twin::f32_to_e4m3(std::ldexp(1.0f, -10)) == 0x00);         // half the smallest: to even
  CHECK(twin::f32_to_e4m3(std::ldexp(1.5f, -10)) == 0x01);
  CHECK(twin::f32_to_e4m3(std::ldexp(1.0f, -6) * 0.9375f) == 0x08);  // rounds up into normals
}

TEST_CASE("e4m3x2 -> f16x2: every pair of codes converts exactly, byte 0 to the low half, NaN to NaN") {
  for (u32 v = 0; v < 65536; ++v) {
    const u32 r = e4m3x2_to_f16x2(static_cast<u16>(v));
    for (u32 half = 0; half < 2; ++half) {
      const u32 code = (v >> (8 * half)) & 0xff;
      const float got = twin::f16_to_f32(static_cast<u16>(r >> (16 * half)));
      const int sign = code & 0x80 ? -1 : 1, exp = (code >> 3) & 15, man = code & 7;
      if (exp == 15 && man == 7) {
        CHECK(std::isnan(got));
        continue;
      }
      const double expected = exp == 0 ? sign * man * std::ldexp(1.0, -9) : sign * (1.0 + man / 8.0) * std::ldexp(1.0, exp - 7);
      if (got != expected || std::signbit(got) != (sign < 0)) {
        CAPTURE(v);
        CAPTURE(half);
        CHECK(got == expected);
        CHECK(std::signbit(got) == (sign < 0));
      }
    }
  }
}

TEST_CASE("e4m3x2_to_f16x2_high converts bytes 2 and 3 of a word, as the 16-bit form does them") {
  for (u32 v = 0; v < 65536; v += 7) {
    const u32 word = v << 16 | (v * 40503u & 0xffffu);
    CHECK(e4m3x2_to_f16x2_high(word) == e4m3x2_to_f16x2(static_cast<u16>(v)));
  }
}

TEST_CASE("packed conversions put lo in the low half") {
  CHECK(pack_bf16x2(1.0f, -2.0f) == (0x3f80u | 0xc000u << 16));
  CHECK(pack_f16x2(1.0f, -2.0f) == (0x3c00u | 0xc000u << 16));
  CHECK(pack_e4m3x2(1.0f, -2.0f) == (0x38u | 0xc0u << 8));
}

TEST_CASE("fma.rn.f16x2 twin equals the exactly rounded result") {
  std::mt19937 rng(std::random_device{}());
  auto random_f16 = [&] {
    for (;;) {
      u16 h = static_cast<u16>(rng());
      if (((h >> 10) & 31) != 31) return h;
    }
  };
  for (int i = 0; i < 300000; ++i) {
    u16 a = random_f16(), b = random_f16(), c = random_f16();
    // Units of 2^-48: the product of two multiples of 2^-24.
    __int128 exact = to_units(a, kF16, -24) * to_units(b, kF16, -24) + to_units(c, kF16, -48);
    u16 expected = round_units(exact, -48, kF16), got = twin::fma_f16(a, b, c);
    CAPTURE(a);
    CAPTURE(b);
    CAPTURE(c);
    if ((expected & 0x7fff) == 0 && (got & 0x7fff) == 0) continue;  // the sign of an exact zero
    REQUIRE(got == expected);
  }
  // Packed: the halves are independent. 1*3+1 = 4 and 2*0.5-1 = 0.
  u32 a = 0x3c00u | 0x4000u << 16, b = 0x4200u | 0x3800u << 16, c = 0x3c00u | 0xbc00u << 16;
  CHECK(twin::fma_f16x2(a, b, c) == 0x4400u);
}

TEST_CASE("fma.rn.bf16x2 twin equals the exactly rounded result, ties far below f32 precision too") {
  std::mt19937 rng(std::random_device{}());
  // bf16 values with exponents in [-20, 20] are multiples of 2^-27, so products and sums are
  // exact in 128-bit integers of units 2^-54.
  auto random_bf16 = [&] {
    const u16 sign = (rng() & 1) ? 0x8000 : 0;
    const u16 exp = static_cast<u16>(127 - 20 + rng() % 41);
    return static_cast<u16>(sign | exp << 7 | (rng() & 0x7f));
  };
  for (int i = 0; i < 300000; ++i) {
    u16 a = random_bf16(), b = random_bf16(), c = random_bf16();
    __int128 exact = to_units(a, kBF16, -27) * to_units(b, kBF16, -27) + to_units(c, kBF16, -54);
    CAPTURE(a);
    CAPTURE(b);
    CAPTURE(c);
    u16 expected = round_units(exact, -54, kBF16), got = twin::fma_bf16(a, b, c);
    if ((expected & 0x7fff) == 0 && (got & 0x7fff) == 0) continue;
    REQUIRE(got == expected);
  }
  // 3 * (1 + 2^-7) = 3 + 1.5 ulp is a tie between 0x4041 and 0x4042 (even). An addend of -2^-60,
  // far below f32 precision, must still decide it downwards: a twin that rounded through f32
  // to nearest would see the tie and pick the even neighbour.
  const u16 three = 0x4040, one_plus = 0x3f81;
  CHECK(twin::fma_bf16(three, one_plus, 0x0000) == 0x4042);
  CHECK(twin::fma_bf16(three, one_plus, twin::f32_to_bf16(-std::ldexp(1.0f, -60))) == 0x4041);
  CHECK(twin::fma_bf16(three, one_plus, twin::f32_to_bf16(std::ldexp(1.0f, -60))) == 0x4042);
}

TEST_CASE("f32 -> e2m1 rounds to the nearest of +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}, ties to the even code, past 6 saturated") {
  // Against fp4_reference.hpp's search over the code table (written from the OCP definition):
  // every midpoint and its f32 neighbours, the grid values, random magnitudes and signs.
  std::vector<float> xs = {0.0f, -0.0f, 1e-30f, 6.0f, 7.0f, 1e30f, std::numeric_limits<float>::infinity()};
  for (float mid : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f})
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 10.0f)}) xs.push_back(x);
  for (std::uint8_t c = 0; c < 8; ++c) xs.push_back(static_cast<float>(test::fp4::e2m1_value(c)));
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> u(0.0f, 7.0f);
  for (int i = 0; i < 20000; ++i) xs.push_back(u(rng));
  for (float x : xs)
    for (float sign : {1.0f, -1.0f}) {
      const float v = sign * x;
      CAPTURE(v);
      const std::uint8_t want = std::isinf(v) ? static_cast<std::uint8_t>((v < 0 ? 8 : 0) | 7) : test::fp4::e2m1_code(v);
      CHECK(prim::twin::f32_to_e2m1(v) == want);
    }
}

TEST_CASE("the MXFP4 recipe's E8M0 byte is the smallest 2^e >= amax / 6 (e >= -127), 127 for 0, 0xFF for inf/NaN") {
  std::vector<float> amax = {0.0f, 6.0f, std::nextafter(6.0f, 7.0f), 1.0f, 1.5f, std::nextafter(1.5f, 2.0f), 3.0f,
                             std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                             std::numeric_limits<float>::max(), std::ldexp(6.0f, -127), std::ldexp(6.0f, -126)};
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 20000; ++i) {
    const std::uint32_t bits = static_cast<std::uint32_t>(rng()) & 0x7f7fffffu;  // finite, non-negative
    float f;
    std::memcpy(&f, &bits, 4);
    amax.push_back(f);
  }
  for (float a : amax) {
    CAPTURE(a);
    std::uint32_t bits;
    std::memcpy(&bits, &a, 4);
    CHECK(e2m1_block_scale_byte(bits) == test::fp4::scale_byte(a));
  }
  CHECK(e2m1_block_scale_byte(0x7f800000u) == 0xff);
  CHECK(e2m1_block_scale_byte(0x7fc00000u) == 0xff);
  CHECK(test::fp4::scale_byte(std::numeric_limits<double>::quiet_NaN()) == 0xff);
}
