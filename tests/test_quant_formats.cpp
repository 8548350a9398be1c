// src/quant formats: E2M1 both ways (every code, every midpoint), E8M0 bytes, INT4 rounding,
// scale dtypes, and the format checks' messages.

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "quant/formats.hpp"
#include "test_quant_support.hpp"

using namespace moejit;
using namespace moejit::quant;
using namespace moejit::test;

TEST_CASE("E2M1 decodes all 16 codes") {
  const double expected[16] = {0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6};
  for (u8 code = 0; code < 16; ++code) {
    CAPTURE(code);
    CHECK(e2m1_decode(code) == expected[code]);
    CHECK(std::signbit(e2m1_decode(code)) == (code >= 8));
    CHECK(e2m1_decode(static_cast<u8>(code | 0xF0)) == expected[code]);  // only the low nibble counts
  }
}

TEST_CASE("E2M1 encodes every code's value to that code") {
  for (u8 code = 0; code < 16; ++code) {
    CAPTURE(code);
    CHECK(e2m1_encode(e2m1_decode(code)) == code);
  }
}

TEST_CASE("E2M1 rounds every midpoint to the even code, and saturates") {
  struct Case {
    double x;
    u8 code;
  };
  // Midpoints between neighbours: the even code (mantissa bit 0) wins.
  const Case midpoints[] = {{0.25, 0}, {0.75, 2}, {1.25, 2}, {1.75, 4}, {2.5, 4}, {3.5, 6}, {5.0, 6}};
  for (const auto& c : midpoints) {
    CAPTURE(c.x);
    CHECK(e2m1_encode(c.x) == c.code);
    CHECK(e2m1_encode(-c.x) == (c.code | 0x8));
  }
  // Off-midpoint values go to the nearest.
  CHECK(e2m1_encode(std::nextafter(0.25, 1.0)) == 1);
  CHECK(e2m1_encode(std::nextafter(0.75, 0.0)) == 1);
  CHECK(e2m1_encode(std::nextafter(1.25, 2.0)) == 3);
  CHECK(e2m1_encode(std::nextafter(1.75, 0.0)) == 3);
  CHECK(e2m1_encode(std::nextafter(2.5, 3.0)) == 5);
  CHECK(e2m1_encode(std::nextafter(3.5, 0.0)) == 5);
  CHECK(e2m1_encode(std::nextafter(5.0, 6.0)) == 7);
  CHECK(e2m1_encode(std::nextafter(5.0, 0.0)) == 6);
  // Saturation: 7 (halfway to a nonexistent 8), anything larger, and infinities.
  CHECK(e2m1_encode(6.5) == 7);
  CHECK(e2m1_encode(7.0) == 7);
  CHECK(e2m1_encode(1e30) == 7);
  CHECK(e2m1_encode(-1e30) == 15);
  CHECK(e2m1_encode(std::numeric_limits<double>::infinity()) == 7);
  CHECK(e2m1_encode(-std::numeric_limits<double>::infinity()) == 15);
  // The sign survives rounding to zero.
  CHECK(e2m1_encode(0.0) == 0);
  CHECK(e2m1_encode(-0.0) == 8);
  CHECK(e2m1_encode(-0.1) == 8);
  CHECK(e2m1_encode(0.1) == 0);
}

TEST_CASE("E2M1 encode is the nearest code on random inputs") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  for (int i = 0; i < 20000; ++i) {
    const double x = rng.uniform(-8.0, 8.0);
    const u8 code = e2m1_encode(x);
    CAPTURE(x);
    const double err = std::fabs(e2m1_decode(code) - x);
    for (u8 other = 0; other < 16; ++other) {
      if (std::fabs(x) > 6.0) break;
      CHECK(err <= std::fabs(e2m1_decode(other) - x));
    }
    if (std::fabs(x) > 6.0) CHECK((code & 0x7) == 7);
    CHECK((code >= 8) == (x < 0));
  }
}

TEST_CASE("E8M0 bytes decode to 2^(s-127), 0xFF is NaN") {
  CHECK(e8m0_decode(0x00) == std::ldexp(1.0, -127));
  CHECK(e8m0_decode(0x00) > 0.0);  // neither zero nor flushed
  CHECK(e8m0_decode(0x01) == std::ldexp(1.0, -126));
  CHECK(e8m0_decode(0x7F) == 1.0);
  CHECK(e8m0_decode(0x80) == 2.0);
  CHECK(e8m0_decode(0xFE) == std::ldexp(1.0, 127));
  CHECK(std::isnan(e8m0_decode(0xFF)));
  // 2^-127 is an f32 subnormal: exact in f32, as kernels apply it.
  CHECK(static_cast<double>(static_cast<float>(e8m0_decode(0x00))) == std::ldexp(1.0, -127));
}

TEST_CASE("E8M0 encode: exponents clamp, exact values round-trip") {
  CHECK(e8m0_encode_exponent(0) == 0x7F);
  CHECK(e8m0_encode_exponent(-127) == 0x00);
  CHECK(e8m0_encode_exponent(-200) == 0x00);
  CHECK(e8m0_encode_exponent(127) == 0xFE);
  CHECK(e8m0_encode_exponent(128) == 0xFE);  // never NaN from a finite exponent
  for (int s = 0; s < 255; ++s) {
    CAPTURE(s);
    CHECK(e8m0_encode_exact(e8m0_decode(static_cast<u8>(s))) == static_cast<u8>(s));
  }
  CHECK(e8m0_encode_exact(std::numeric_limits<double>::quiet_NaN()) == u8{0xFF});
  CHECK_FALSE(e8m0_encode_exact(3.0).has_value());
  CHECK_FALSE(e8m0_encode_exact(0.0).has_value());
  CHECK_FALSE(e8m0_encode_exact(-1.0).has_value());
  CHECK_FALSE(e8m0_encode_exact(std::ldexp(1.0, -128)).has_value());
  CHECK_FALSE(e8m0_encode_exact(std::ldexp(1.0, 128)).has_value());
}

TEST_CASE("INT4 rounding: half to even, clamped, around the zero point") {
  CHECK(round_half_even(0.5) == 0.0);
  CHECK(round_half_even(1.5) == 2.0);
  CHECK(round_half_even(2.5) == 2.0);
  CHECK(round_half_even(-0.5) == 0.0);
  CHECK(round_half_even(-1.5) == -2.0);
  CHECK(round_half_even(0.49999999999999994) == 0.0);
  CHECK(round_half_even(-2.7) == -3.0);
  CHECK(int4_encode(0.0, 8) == 8);
  CHECK(int4_encode(-8.0, 8) == 0);
  CHECK(int4_encode(-9.0, 8) == 0);
  CHECK(int4_encode(7.0, 8) == 15);
  CHECK(int4_encode(7.5, 8) == 15);  // 16 clamps
  CHECK(int4_encode(6.5, 8) == 14);  // tie to even (6), + 8
  CHECK(int4_encode(2.5, 3) == 5);
  CHECK(int4_decode(3, 8, 0.25) == -1.25);
  CHECK(int4_decode(15, 0, 2.0) == 30.0);
}

TEST_CASE("scale dtypes round with the numeric.cuh twins and decode exactly") {
  auto bf = encode_scale(DType::bf16, 1.00390625f);  // 1 + 2^-8: a tie, rounds to even (1.0)
  REQUIRE(bf.ok());
  CHECK(*bf == 0x3F80);
  CHECK(decode_scale(DType::bf16, 0x3F81) == 1.0078125);
  auto h = encode_scale(DType::f16, 0.1f);
  REQUIRE(h.ok());
  CHECK(*h == 0x2E66);
  CHECK(decode_scale(DType::f16, 0x3C00) == 1.0);
  CHECK(decode_scale(DType::e8m0, 0x7F) == 1.0);
  CHECK(std::isnan(decode_scale(DType::f32, 0)));
  check_error(encode_scale(DType::e8m0, 1.0f).status(), Code::invalid_argument, {"e8m0", "bf16 or f16"});
  CHECK(scale_bytes(DType::e8m0) == 1);
  CHECK(scale_bytes(DType::bf16) == 2);
}

TEST_CASE("weight format checks name the argument and the expectation") {
  CHECK(check_weight_format(WeightFormat::mxfp4, 32, DType::e8m0, 64).ok());
  CHECK(check_weight_format(WeightFormat::int4_sym, 128, DType::bf16, 256).ok());
  CHECK(check_weight_format(WeightFormat::int4_asym, 96, DType::f16, 96).ok());  // per-channel
  check_error(check_weight_format(WeightFormat::mxfp4, 64, DType::e8m0, 128), Code::invalid_argument,
              {"'group_size' = 64", "32 for mxfp4"});
  check_error(check_weight_format(WeightFormat::mxfp4, 32, DType::bf16, 128), Code::invalid_argument,
              {"'scale_dtype' = bf16", "e8m0 for mxfp4"});
  check_error(check_weight_format(WeightFormat::int4_sym, 48, DType::bf16, 96), Code::invalid_argument,
              {"'group_size' = 48", "32, 64, 128 or K = 96"});
  check_error(check_weight_format(WeightFormat::int4_sym, 128, DType::bf16, 192), Code::invalid_argument,
              {"'k' = 192", "group_size = 128"});
  check_error(check_weight_format(WeightFormat::int4_asym, 32, DType::e8m0, 64), Code::invalid_argument,
              {"'scale_dtype' = e8m0", "bf16 or f16"});
  check_error(check_weight_format(WeightFormat::none, 32, DType::bf16, 64), Code::invalid_argument,
              {"'format'", "mxfp4, int4_sym or int4_asym"});
  // Under an owner, as the caller spells the field.
  check_error(check_weight_format(WeightFormat::mxfp4, 32, DType::f16, 64, "args->w2->"), Code::invalid_argument,
              {"'args->w2->scale_dtype' = f16", "e8m0 for mxfp4"});
}
