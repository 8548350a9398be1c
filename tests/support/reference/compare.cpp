#include "reference/compare.hpp"

#include <cmath>
#include <limits>

namespace moejit::quant {

double relative_frobenius_error(std::span<const double> out, std::span<const double> ref, u64 cols,
                                std::span<const u8> row_mask) {
  constexpr double kFail = std::numeric_limits<double>::infinity();
  if (out.size() != ref.size()) return kFail;
  if (cols == 0) cols = ref.empty() ? 1 : ref.size();
  if (ref.size() % cols != 0) return kFail;
  const u64 rows = ref.size() / cols;
  if (!row_mask.empty() && row_mask.size() != rows) return kFail;
  double diff2 = 0.0, ref2 = 0.0;
  for (u64 r = 0; r < rows; ++r) {
    if (!row_mask.empty() && !row_mask[r]) continue;
    for (u64 c = 0; c < cols; ++c) {
      const double o = out[r * cols + c], x = ref[r * cols + c];
      if (std::isfinite(o) && std::isfinite(x)) {
        diff2 += (o - x) * (o - x);
        ref2 += x * x;
      } else if (!(std::isnan(o) && std::isnan(x)) && !(std::isinf(o) && o == x)) {
        return kFail;
      }
    }
  }
  return ref2 > 0.0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
}

}  // namespace moejit::quant
