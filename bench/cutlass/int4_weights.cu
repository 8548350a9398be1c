// The int4 baseline's host side: weights and scales in the kernel's layouts, and the checks and
// tile choice of prepare_int4_grouped (the kernels are in grouped_int4_n*.cu).

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "bench/cutlass/detail.hpp"
#include "bench/cutlass/int4_layout.hpp"
// mixed_dtype_utils.hpp names cutlass::int8_t, which only the collective builders' headers bring
// into namespace cutlass (CUTLASS's examples include them first too).
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/util/mixed_dtype_utils.hpp"

// The reordering atom the kernels are compiled with is the one CUTLASS computes (examples 55, 69).
static_assert(std::is_same_v<moejit::bench::cutlass_baseline::int4::LayoutAtomQuant,
                             decltype(cutlass::compute_memory_reordering_atom<
                                      moejit::bench::cutlass_baseline::int4::MmaType, cute::Layout<cute::Shape<cute::_1, cute::_1>>,
                                      moejit::bench::cutlass_baseline::int4::ValueShuffle>())>,
              "int4_layout.hpp's LayoutAtomQuant differs from cutlass::compute_memory_reordering_atom's");

namespace moejit::bench::cutlass_baseline {

namespace {

std::string check_weight_shape(const char* fn, int n, int k) {
  const std::string f = fn;
  if (n <= 0 || n % int4::kAtomN != 0)
    return f + ": n = " + std::to_string(n) + "; expected a positive multiple of " + std::to_string(int4::kAtomN) +
           " (the reordering atom's rows)";
  if (k <= 0 || k % int4::kAtomK != 0)
    return f + ": k = " + std::to_string(k) + "; expected a positive multiple of " + std::to_string(int4::kAtomK) +
           " (the reordering atom's columns)";
  if (std::int64_t(n) * k > (std::int64_t(1) << 40))
    return f + ": n * k = " + std::to_string(std::int64_t(n) * k) + " values; expected at most 2^40";
  return {};
}

std::string check_group(const char* fn, int k, int group) {
  if (group <= 0 || group % int4::kTileK != 0 || k % group != 0)
    return std::string(fn) + ": group = " + std::to_string(group) + "; expected a positive multiple of " +
           std::to_string(int4::kTileK) + " (the kernel's K tile: a tile never straddles two scale groups) dividing k = " +
           std::to_string(k);
  return {};
}

}  // namespace

// Where each value goes is CUTLASS's own layout function (int4::weight_layout, the layout the
// kernel is given), evaluated here on the host: cutlass::reorder_tensor, which the examples run on
// the device, copies element (r, c) of the plain [n][k] tensor to the same logical coordinate of a
// tensor with that layout, i.e. to offset weight_layout(n, k)(r, c, 0), as done here.
std::string int4_weight_bytes(const std::int8_t* values, int n, int k, std::vector<std::uint8_t>& out) {
  constexpr const char* fn = "int4_weight_bytes";
  if (values == nullptr) return std::string(fn) + ": values is null";
  if (auto e = check_weight_shape(fn, n, k); !e.empty()) return e;
  const auto layout = int4::weight_layout(n, k);
  const std::int64_t count = std::int64_t(n) * k;
  if (cute::cosize(layout) != count)
    return std::string(fn) + ": internal error: the reordered layout does not cover n * k values";
  out.assign(static_cast<std::size_t>(count / 2), 0);
  for (int r = 0; r < n; ++r) {
    const std::int8_t* row = values + std::int64_t(r) * k;
    for (int c = 0; c < k; ++c) {
      const int v = row[c];
      if (v < -8 || v > 7)
        return std::string(fn) + ": values[" + std::to_string(r) + "][" + std::to_string(c) + "] = " +
               std::to_string(v) + "; expected a signed int4 value in [-8, 7]";
      const std::int64_t i = layout(r, c, 0);
      // Two's complement nibble (cutlass::int4b_t); element i in the low nibble when i is even.
      out[static_cast<std::size_t>(i / 2)] |= static_cast<std::uint8_t>((v & 0xF) << (4 * (i % 2)));
    }
  }
  return {};
}

// The kernel reads scales (n, k / group) with n contiguous (its StrideScale is
// Stride<_1, int64_t, int64_t>, packed with stride n for the group index): [k / group][n].
std::string int4_scale_bytes(const std::uint16_t* scales, int n, int k, int group, std::vector<std::uint16_t>& out) {
  constexpr const char* fn = "int4_scale_bytes";
  if (scales == nullptr) return std::string(fn) + ": scales is null";
  if (n <= 0 || n % 8 != 0)
    return std::string(fn) + ": n = " + std::to_string(n) + "; expected a positive multiple of 8 (16-byte scale rows)";
  if (k <= 0) return std::string(fn) + ": k = " + std::to_string(k) + "; expected > 0";
  if (group <= 0 || k % group != 0)
    return std::string(fn) + ": group = " + std::to_string(group) + "; expected a positive divisor of k = " +
           std::to_string(k);
  const int groups = k / group;
  out.resize(static_cast<std::size_t>(n) * groups);
  for (int r = 0; r < n; ++r)
    for (int g = 0; g < groups; ++g)
      out[static_cast<std::size_t>(g) * n + r] = scales[static_cast<std::size_t>(r) * groups + g];
  return {};
}

PlanResult prepare_int4_grouped(const GroupedProblem& p, int group) {
  constexpr const char* fn = "prepare_int4_grouped";
#if defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)
  if (auto e = detail::check_grouped(fn, p, /*with_scales=*/true); !e.empty()) return {nullptr, e};
  if (auto e = check_weight_shape(fn, p.n, p.k); !e.empty()) return {nullptr, e};
  if (auto e = check_group(fn, p.k, group); !e.empty()) return {nullptr, e};
  // The tile along the activation rows: 16 when every group fits in one (decode), else 128.
  const int max_m = *std::max_element(p.m.begin(), p.m.end());
  return max_m <= 16 ? int4::prepare_n16(p, group) : int4::prepare_n128(p, group);
#else
  (void)p;
  (void)group;
  return {nullptr, std::string(fn) + ": not built (CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED needs nvcc 12.3+)"};
#endif
}

}  // namespace moejit::bench::cutlass_baseline
