#pragma once
// MXFP4 (e2m1 + E8M0 per 32) activation quantization written from the public definitions,
// independently of the library's kernels and twins: the OCP e2m1 values (sign, 2 exponent bits
// with bias 1, 1 mantissa bit: 0, 0.5, 1, 1.5, 2, 3, 4, 6) searched for the nearest, ties to the
// code with an even last bit; E8M0 = 2^(byte - 127), 0xFF NaN; and the scale recipe moejit
// documents (moe/quantize_params.cuh): the smallest power of two 2^e with 6 * 2^e >= amax,
// e >= -127 (1 for an all-zero block), NaN (0xFF) for a block with NaN or infinity. Rows are
// stored as the kernels read them: two codes per byte, column 2i in the low nibble, and
// [rows][scale_ld] scale bytes with 16-byte aligned rows.

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace moejit::test::fp4 {

inline constexpr std::uint32_t kBlock = 32;

inline double e2m1_value(std::uint8_t code) {
  constexpr double kMagnitude[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return code & 8 ? -kMagnitude[code & 7] : kMagnitude[code & 7];
}

inline double e8m0_value(std::uint8_t byte) {
  return byte == 0xff ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, byte - 127);
}

// Nearest e2m1 code to a finite x, ties to the even code, magnitudes past 6 saturated.
inline std::uint8_t e2m1_code(double x) {
  const std::uint8_t sign = std::signbit(x) ? 8 : 0;
  const double a = std::fabs(x);
  if (a >= 6.0) return sign | 7;  // (the search's distances stop telling 4 and 6 apart near 1e16)
  std::uint8_t best = 0;
  for (std::uint8_t c = 1; c < 8; ++c) {
    const double d = std::fabs(e2m1_value(c) - a), best_d = std::fabs(e2m1_value(best) - a);
    if (d < best_d || (d == best_d && c % 2 == 0)) best = c;
  }
  return sign | best;
}

// The recipe's scale byte for a block of largest magnitude `amax` (NaN: the block had NaN or inf).
inline std::uint8_t scale_byte(double amax) {
  if (!std::isfinite(amax)) return 0xff;
  if (amax == 0) return 127;
  int e = -127;
  while (6.0 * std::ldexp(1.0, e) < amax) ++e;
  return static_cast<std::uint8_t>(e + 127);
}

inline std::int64_t scale_ld_for(std::uint32_t n) { return (n / kBlock + 15) / 16 * 16; }

struct Quantized {
  std::uint32_t n = 0;
  std::int64_t scale_ld = 0;
  std::vector<std::uint8_t> packed;  // [rows][n / 2]
  std::vector<std::uint8_t> scales;  // [rows][scale_ld], padding bytes 0
  std::uint8_t code(std::size_t row, std::uint32_t col) const {
    const std::uint8_t b = packed[row * (n / 2) + col / 2];
    return col % 2 ? b >> 4 : b & 15;
  }
  double value(std::size_t row, std::uint32_t col) const {
    return e2m1_value(code(row, col)) * e8m0_value(scales[row * scale_ld + col / kBlock]);
  }
};

inline Quantized quantize(const std::vector<float>& x, std::size_t rows, std::uint32_t n) {
  Quantized q;
  q.n = n;
  q.scale_ld = scale_ld_for(n);
  q.packed.assign(rows * n / 2, 0);
  q.scales.assign(rows * q.scale_ld, 0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::uint32_t b = 0; b < n / kBlock; ++b) {
      double amax = 0;
      for (std::uint32_t i = 0; i < kBlock; ++i) {
        const double v = x[r * n + b * kBlock + i];
        amax = std::isfinite(v) && std::isfinite(amax) ? std::fmax(amax, std::fabs(v)) : INFINITY;
      }
      const std::uint8_t byte = scale_byte(amax);
      q.scales[r * q.scale_ld + b] = byte;
      if (byte == 0xff) continue;  // the codes of a NaN block carry nothing
      for (std::uint32_t i = 0; i < kBlock; ++i) {
        const std::uint32_t col = b * kBlock + i;
        const std::uint8_t c = e2m1_code(std::ldexp(static_cast<double>(x[r * n + col]), 127 - byte));
        q.packed[r * (n / 2) + col / 2] |= static_cast<std::uint8_t>(col % 2 ? c << 4 : c);
      }
    }
  return q;
}

}  // namespace moejit::test::fp4
