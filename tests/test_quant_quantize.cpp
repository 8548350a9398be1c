// Quantizers: the MX rule exactly, INT4 codes from the rounded scale, error bounds on fresh random
// data, all-zero and non-finite groups, and argument checks.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "quant/formats.hpp"
#include "reference/quantize.hpp"
#include "test_quant_support.hpp"

using namespace moejit;
using namespace moejit::quant;
using namespace moejit::test;

namespace {

// The E2M1 code nearest to v with v's sign, ties to the even code, |v| > 6 saturating:
// a brute-force search, independent of e2m1_encode's bracket walk.
u8 nearest_e2m1(double v) {
  const u8 sign = std::signbit(v) ? 8 : 0;
  if (std::fabs(v) >= 6.0) return sign | 7;
  u8 best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (u8 c = 0; c < 8; ++c) {
    const double err = std::fabs(e2m1_decode(c) - std::fabs(v));
    if (err < best_err || (err == best_err && c % 2 == 0)) {
      best = c;
      best_err = err;
    }
  }
  return sign | best;
}

double rel_frobenius(const std::vector<float>& w, const QuantizedWeights& q) {
  double d2 = 0, r2 = 0;
  for (u32 e = 0; e < q.experts; ++e)
    for (u32 n = 0; n < q.n; ++n)
      for (u32 k = 0; k < q.k; ++k) {
        const double x = w[q.code_index(e, n, k)], y = q.dequantized(e, n, k);
        d2 += (x - y) * (x - y);
        r2 += x * x;
      }
  return std::sqrt(d2 / r2);
}

}  // namespace

TEST_CASE("MXFP4 quantization follows the OCP MX reference rule exactly") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  const u32 E = 2, N = 16, K = 256;
  auto w = random_weights(rng, E, N, K);
  auto q = quantize(w, E, N, K, {WeightFormat::mxfp4, 32, DType::e8m0});
  REQUIRE(q.ok());
  REQUIRE(q->validate().ok());
  for (u32 e = 0; e < E; ++e)
    for (u32 n = 0; n < N; ++n)
      for (u32 b = 0; b < K / 32; ++b) {
        double amax = 0;
        for (u32 i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(double{w[q->code_index(e, n, 32 * b + i)]}));
        const int x = static_cast<int>(std::floor(std::log2(amax))) - 2;
        CAPTURE(amax);
        REQUIRE(q->scales[q->group_index(e, n, b)] == x + 127);
        for (u32 i = 0; i < 32; ++i) {
          const u32 k = 32 * b + i;
          const double v = std::ldexp(double{w[q->code_index(e, n, k)]}, -x);
          CAPTURE(v);
          CHECK(q->codes[q->code_index(e, n, k)] == nearest_e2m1(v));
          // Error bound: half the E2M1 spacing at |v| (at most 1), or the saturation at 6.
          const double err = std::fabs(q->dequantized(e, n, k) - w[q->code_index(e, n, k)]);
          CHECK(err <= std::ldexp(std::max(1.0, std::fabs(v) - 6.0), x));
        }
      }
  CHECK(rel_frobenius(w, *q) < 0.25);
}

TEST_CASE("MXFP4: all-zero blocks get scale 0x00, non-finite blocks scale 0xFF") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  const u32 K = 128;
  auto w = random_weights(rng, 1, 1, K);
  std::fill(w.begin(), w.begin() + 32, 0.0f);
  w[5] = -0.0f;
  w[40] = std::numeric_limits<float>::quiet_NaN();
  w[70] = -std::numeric_limits<float>::infinity();
  // Tiny values: the exponent clamps at -127 (2^-140 / 2^-127 = 2^-13 rounds to zero).
  std::fill(w.begin() + 96, w.end(), std::ldexp(1.0f, -140));
  auto q = quantize(w, 1, 1, K, {WeightFormat::mxfp4, 32, DType::e8m0});
  REQUIRE(q.ok());
  CHECK(q->scales[0] == 0x00);
  for (u32 i = 0; i < 32; ++i) CHECK(q->dequantized(0, 0, i) == 0.0);
  CHECK(q->codes[5] == 8);
  CHECK(q->scales[1] == 0xFF);
  CHECK(q->scales[2] == 0xFF);
  for (u32 i = 32; i < 96; ++i) CHECK(std::isnan(q->dequantized(0, 0, i)));
  CHECK(q->scales[3] == 0x00);
  CHECK(q->codes[100] == 0);
}

TEST_CASE("INT4 quantization: codes from the rounded scale, error bounds, every group and scale dtype") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  const u32 E = 2, N = 8, K = 256;
  auto w = random_weights(rng, E, N, K);
  for (WeightFormat format : {WeightFormat::int4_sym, WeightFormat::int4_asym}) {
    for (u32 group : {32u, 64u, 128u, K}) {
      for (DType dtype : {DType::bf16, DType::f16}) {
        CAPTURE(static_cast<int>(format));
        CAPTURE(group);
        CAPTURE(static_cast<int>(dtype));
        auto q = quantize(w, E, N, K, {format, group, dtype});
        REQUIRE(q.ok());
        REQUIRE(q->validate().ok());
        const double delta = dtype == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
        for (u32 e = 0; e < E; ++e)
          for (u32 n = 0; n < N; ++n)
            for (u32 g = 0; g < K / group; ++g) {
              float lo = 0, hi = 0;
              for (u32 i = 0; i < group; ++i) {
                lo = std::min(lo, w[q->code_index(e, n, g * group + i)]);
                hi = std::max(hi, w[q->code_index(e, n, g * group + i)]);
              }
              const u16 bits = q->scales[q->group_index(e, n, g)];
              const double s = decode_scale(dtype, bits);
              // The documented scale, rounded by the twin.
              const float f32_scale = format == WeightFormat::int4_sym
                                          ? static_cast<float>(2.0 * std::max(-lo, hi) / 15.0)
                                          : static_cast<float>((double{hi} - lo) / 15.0);
              CHECK(bits == *encode_scale(dtype, f32_scale));
              const double zero = q->zero_of(e, n, g * group);
              if (format == WeightFormat::int4_asym)
                CHECK(zero == std::clamp(std::nearbyint(-lo / s), 0.0, 15.0));
              for (u32 i = 0; i < group; ++i) {
                const u32 k = g * group + i;
                const double x = w[q->code_index(e, n, k)];
                const double expected = std::clamp(std::nearbyint(x / s) + zero, 0.0, 15.0);
                CHECK(q->codes[q->code_index(e, n, k)] == expected);
                const double slack = format == WeightFormat::int4_sym ? 8 * delta : 16 * delta;
                CHECK(std::fabs(q->dequantized(e, n, k) - x) <= s * (0.5 + slack));
              }
            }
        CHECK(rel_frobenius(w, *q) < 0.15);
      }
    }
  }
}

TEST_CASE("INT4: all-zero groups get scale 1 and the zero point, non-finite weights are errors") {
  std::vector<float> w(64, 0.0f);
  for (u32 i = 32; i < 64; ++i) w[i] = static_cast<float>(i) - 40.5f;
  auto sym = quantize(w, 1, 1, 64, {WeightFormat::int4_sym, 32, DType::bf16});
  REQUIRE(sym.ok());
  CHECK(sym->scales[0] == 0x3F80);
  for (u32 i = 0; i < 32; ++i) CHECK(sym->codes[i] == 8);
  auto asym = quantize(w, 1, 1, 64, {WeightFormat::int4_asym, 32, DType::f16});
  REQUIRE(asym.ok());
  CHECK(asym->scales[0] == 0x3C00);
  CHECK(asym->zeros[0] == 0);
  for (u32 i = 0; i < 32; ++i) CHECK(asym->dequantized(0, 0, i) == 0.0);

  w[40] = std::numeric_limits<float>::infinity();
  check_error(quantize(w, 1, 1, 64, {WeightFormat::int4_sym, 32, DType::bf16}).status(), Code::invalid_argument,
              {"weights[0][0][40]", "not finite"});
  // A scale past f16's range.
  std::vector<float> big(32, 1e6f);
  check_error(quantize(big, 1, 1, 32, {WeightFormat::int4_sym, 32, DType::f16}).status(), Code::invalid_argument,
              {"group 0 of weights[0][0]", "not finite in f16"});
}

TEST_CASE("quantize checks its arguments") {
  std::vector<float> w(2 * 4 * 64, 1.0f);
  check_error(quantize(w, 2, 4, 64, {WeightFormat::mxfp4, 64, DType::e8m0}).status(), Code::invalid_argument,
              {"'group_size' = 64"});
  check_error(quantize(w, 2, 4, 64, {WeightFormat::int4_sym, 48, DType::bf16}).status(), Code::invalid_argument,
              {"'group_size' = 48"});
  check_error(quantize(w, 2, 4, 64, {WeightFormat::int4_sym, 32, DType::e8m0}).status(), Code::invalid_argument,
              {"'scale_dtype' = e8m0"});
  check_error(quantize(w, 2, 5, 64, {WeightFormat::int4_sym, 32, DType::bf16}).status(), Code::invalid_argument,
              {"weights has 512 elements", "E*N*K = 640"});
  check_error(quantize(w, 0, 4, 64, {WeightFormat::int4_sym, 32, DType::bf16}).status(), Code::invalid_argument,
              {"E = 0"});
}
