#pragma once
// Helpers of the src/quant suites: fresh random data (a new seed each run, printed with every
// failure; MOEJIT_TEST_SEED=<n> replays one), random logical weights, and a Status checker.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/numeric.cuh"
#include "quant/quantized_weights.hpp"
#include "support/status.hpp"

namespace moejit::test {

inline std::uint64_t quant_test_seed() {
  if (const char* s = std::getenv("MOEJIT_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

// Fresh random numbers; the seed goes into every failure message of the test case using it.
struct Rng {
  std::uint64_t seed = quant_test_seed();
  std::mt19937_64 engine{seed};

  std::uint32_t uniform_int(std::uint32_t lo, std::uint32_t hi) {
    return std::uniform_int_distribution<std::uint32_t>(lo, hi)(engine);
  }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(engine); }
  // Normal, never exactly zero (tests must not pass because data was zero).
  float normal_nonzero(float sigma) {
    std::normal_distribution<float> d(0.0f, sigma);
    for (;;)
      if (const float v = d(engine); v != 0.0f) return v;
  }
};

#define MOEJIT_QUANT_SEED(rng) INFO("seed (replay with MOEJIT_TEST_SEED): ", (rng).seed)

// f32 weights [E][N][K], row magnitudes varied over 2^-6..2^6 so scales differ between groups.
inline std::vector<float> random_weights(Rng& rng, std::uint32_t experts, std::uint32_t n, std::uint32_t k) {
  std::vector<float> w(static_cast<std::size_t>(experts) * n * k);
  for (std::size_t row = 0; row < static_cast<std::size_t>(experts) * n; ++row) {
    const float sigma = std::ldexp(1.0f, static_cast<int>(rng.uniform_int(0, 12)) - 6);
    for (std::size_t kk = 0; kk < k; ++kk) w[row * k + kk] = rng.normal_nonzero(sigma);
  }
  return w;
}

// Logical weights with every code, scale and zero drawn at random (not from a quantizer), so
// packers see every nibble value. `min_zero` lets GPTQ v1 tests avoid zero 0 (stored as -1).
inline quant::QuantizedWeights random_logical(Rng& rng, WeightFormat format, std::uint32_t group, DType scale_dtype,
                                              std::uint32_t experts, std::uint32_t n, std::uint32_t k,
                                              std::uint32_t min_zero = 0) {
  quant::QuantizedWeights w = quant::make_quantized_weights(format, group, scale_dtype, experts, n, k);
  for (auto& c : w.codes) c = static_cast<u8>(rng.uniform_int(0, 15));
  for (auto& s : w.scales) {
    if (scale_dtype == DType::e8m0) {
      s = static_cast<u16>(rng.uniform_int(110, 140));
    } else {
      const float v = static_cast<float>(rng.uniform(0.001, 0.1));
      s = scale_dtype == DType::bf16 ? prim::twin::f32_to_bf16(v) : prim::twin::f32_to_f16(v);
    }
  }
  for (auto& z : w.zeros) z = static_cast<u8>(rng.uniform_int(min_zero, 15));
  return w;
}

inline void check_error(const Status& s, Code code, std::initializer_list<std::string_view> needles) {
  CHECK_FALSE(s.ok());
  CHECK(s.code() == code);
  for (auto n : needles) {
    CAPTURE(n);
    CAPTURE(s.message());
    CHECK(s.message().find(n) != std::string::npos);
  }
}

}  // namespace moejit::test
