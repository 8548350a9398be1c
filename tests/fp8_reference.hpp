#pragma once
// FP8 (e4m3) activation quantization written from the public definitions, independently of the
// library's twins: the OCP e4m3fn code table (bias 7, subnormals m * 2^-9, 0x7f/0xff NaN, no
// infinities) searched for the nearest value, ties to the even code, and the per-row or
// per-128-column scaling recipe moejit documents (amax / 448). The tests quantize with this and
// compare the kernels' bytes and results against it.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace moejit::test::fp8 {

// The value of an e4m3fn code (NaN for 0x7f / 0xff).
inline double e4m3_value(std::uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<double>::quiet_NaN();
  const double magnitude = e == 0 ? m * std::ldexp(1.0, -9) : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
  return code & 0x80 ? -magnitude : magnitude;
}

// Round to the nearest e4m3 value, ties to the code with an even last bit, magnitudes past 448
// saturated (cvt.rn.satfinite); NaN -> 0x7f. Exhaustive over the 127 non-negative finite codes.
inline std::uint8_t e4m3_code(double x) {
  if (std::isnan(x)) return 0x7f;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  static const std::vector<double> values = [] {
    std::vector<double> v(0x7f);
    for (std::uint8_t c = 0; c < 0x7f; ++c) v[c] = e4m3_value(c);
    return v;
  }();
  const double a = std::fabs(x);
  std::uint8_t best = 0;
  for (std::uint8_t c = 1; c <= 0x7e; ++c) {
    const double d = std::fabs(values[c] - a), best_d = std::fabs(values[best] - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) best = c;
  }
  return sign | best;
}

inline constexpr std::uint32_t kBlock = 128;

// Quantizes `n` values per row with one scale per row (block = false) or per 128 columns.
struct Quantized {
  std::vector<std::uint8_t> codes;  // [rows][n]
  std::vector<float> scales;        // [rows][n / 128] or [rows]
  std::uint32_t scales_per_row = 1;
  double value(std::size_t row, std::uint32_t col, std::uint32_t n) const {
    return e4m3_value(codes[row * n + col]) * scales[row * scales_per_row + (scales_per_row > 1 ? col / kBlock : 0)];
  }
};

inline Quantized quantize(const std::vector<float>& x, std::size_t rows, std::uint32_t n, bool block) {
  Quantized q;
  q.scales_per_row = block ? n / kBlock : 1;
  q.codes.resize(rows * n);
  q.scales.resize(rows * q.scales_per_row);
  const std::uint32_t width = block ? kBlock : n;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::uint32_t g = 0; g < q.scales_per_row; ++g) {
      float amax = 0.0f;
      for (std::uint32_t c = g * width; c < (g + 1) * width; ++c)
        if (!std::isnan(x[r * n + c])) amax = std::max(amax, std::fabs(x[r * n + c]));
      const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
      q.scales[r * q.scales_per_row + g] = scale;
      for (std::uint32_t c = g * width; c < (g + 1) * width; ++c) q.codes[r * n + c] = e4m3_code(x[r * n + c] / scale);
    }
  return q;
}

}  // namespace moejit::test::fp8
