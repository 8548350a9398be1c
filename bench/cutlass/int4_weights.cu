// The int4 baselines' host side: weights and scales in the kernels' layouts, and the checks and
// tile choice of prepare_int4_grouped and prepare_int4_fp8_grouped (the kernels are in
// grouped_int4_n*.cu and grouped_int4_fp8_n*.cu, compiled when MOEJIT_CUTLASS_KERNELS is on).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "bench/cutlass/detail.hpp"
#include "bench/cutlass/int4_layout.hpp"
// mixed_dtype_utils.hpp names cutlass::int8_t, which only the collective builders' headers bring
// into namespace cutlass (CUTLASS's examples include them first too).
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/util/mixed_dtype_utils.hpp"

// The reordering atoms the kernels are compiled with are the ones CUTLASS computes (examples 55, 69).
template <class Act>
constexpr bool kCutlassAtom = std::is_same_v<
    typename Act::LayoutAtomQuant,
    decltype(cutlass::compute_memory_reordering_atom<typename Act::MmaType, cute::Layout<cute::Shape<cute::_1, cute::_1>>,
                                                     typename Act::ValueShuffle>())>;
static_assert(kCutlassAtom<moejit::bench::cutlass_baseline::int4::Bf16Act>,
              "int4_layout.hpp's Bf16Act::LayoutAtomQuant differs from cutlass::compute_memory_reordering_atom's");
// Example 69's int4 x fp8 kernel calls compute_memory_reordering_atom<e4m3>() with its defaults.
static_assert(std::is_same_v<moejit::bench::cutlass_baseline::int4::E4m3Act::LayoutAtomQuant,
                             decltype(cutlass::compute_memory_reordering_atom<cutlass::float_e4m3_t>())>,
              "int4_layout.hpp's E4m3Act::LayoutAtomQuant differs from cutlass::compute_memory_reordering_atom's");

namespace moejit::bench::cutlass_baseline {

namespace {

template <class Act>
std::string check_weight_shape(const char* fn, int n, int k) {
  const std::string f = fn;
  constexpr int atom_n = int4::kAtomN<Act>, atom_k = int4::kAtomK<Act>;
  if (n <= 0 || n % atom_n != 0)
    return f + ": n = " + std::to_string(n) + "; expected a positive multiple of " + std::to_string(atom_n) +
           " (the reordering atom's rows)";
  if (k <= 0 || k % atom_k != 0)
    return f + ": k = " + std::to_string(k) + "; expected a positive multiple of " + std::to_string(atom_k) +
           " (the reordering atom's columns)";
  if (std::int64_t(n) * k > (std::int64_t(1) << 40))
    return f + ": n * k = " + std::to_string(std::int64_t(n) * k) + " values; expected at most 2^40";
  return {};
}

template <class Act>
std::string check_group(const char* fn, int k, int group) {
  if (group <= 0 || group % Act::kTileK != 0 || k % group != 0)
    return std::string(fn) + ": group = " + std::to_string(group) + "; expected a positive multiple of " +
           std::to_string(Act::kTileK) + " (the kernel's K tile: a tile never straddles two scale groups) dividing k = " +
           std::to_string(k);
  return {};
}

// The nibble of signed int4 `v` in the kernel's bytes. bf16 kernel: two's complement
// (cutlass::int4b_t). e4m3 kernel: CUTLASS's "unified" encoding (cutlass::unified_encode_int4b,
// which works on device buffers): the lookup table holds only the products with -8 .. -1 and the
// kernel builds the positive half by flipping sign bits, so +v (1..7) is stored as the index of
// -v, 8 - v; zero and negative values keep their two's complement bits.
template <class Act>
std::uint8_t nibble_of(int v) {
  if constexpr (std::is_same_v<Act, int4::E4m3Act>)
    if (v > 0) return static_cast<std::uint8_t>(8 - v);
  return static_cast<std::uint8_t>(v & 0xF);
}

// Where each value goes is CUTLASS's own layout function (int4::weight_layout, the layout the
// kernel is given), evaluated here on the host: cutlass::reorder_tensor, which the examples run on
// the device, copies element (r, c) of the plain [n][k] tensor to the same logical coordinate of a
// tensor with that layout, i.e. to offset weight_layout(n, k)(r, c, 0), as done here.
template <class Act>
std::string weight_bytes(const char* fn, const std::int8_t* values, int n, int k, std::vector<std::uint8_t>& out) {
  if (values == nullptr) return std::string(fn) + ": values is null";
  if (auto e = check_weight_shape<Act>(fn, n, k); !e.empty()) return e;
  const auto layout = int4::weight_layout<Act>(n, k);
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
      // Element i in the low nibble when i is even.
      out[static_cast<std::size_t>(i / 2)] |= static_cast<std::uint8_t>(nibble_of<Act>(v) << (4 * (i % 2)));
    }
  }
  return {};
}

template <class Act>
std::string check_int4_problem(const char* fn, const GroupedProblem& p, int group) {
  if (auto e = detail::check_grouped(fn, p, /*with_scales=*/true); !e.empty()) return e;
  if (auto e = check_weight_shape<Act>(fn, p.n, p.k); !e.empty()) return e;
  return check_group<Act>(fn, p.k, group);
}

}  // namespace

std::string int4_weight_bytes(const std::int8_t* values, int n, int k, std::vector<std::uint8_t>& out) {
  return weight_bytes<int4::Bf16Act>("int4_weight_bytes", values, n, k, out);
}

std::string int4_fp8_weight_bytes(const std::int8_t* values, int n, int k, std::vector<std::uint8_t>& out) {
  return weight_bytes<int4::E4m3Act>("int4_fp8_weight_bytes", values, n, k, out);
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

// The e4m3 kernel's scale element: the products of the scale with -8 .. -1, rounded to e4m3, that
// its lookup table indexes (CUTLASS's packed_scale_t, what cutlass::pack_scale_fp8 writes).
std::string int4_fp8_scale_bytes(const std::uint8_t* scales, int n, int k, int group, std::vector<std::uint8_t>& out) {
  constexpr const char* fn = "int4_fp8_scale_bytes";
  if (scales == nullptr) return std::string(fn) + ": scales is null";
  if (n <= 0 || n % 2 != 0)
    return std::string(fn) + ": n = " + std::to_string(n) + "; expected a positive multiple of 2 (16-byte scale rows)";
  if (k <= 0) return std::string(fn) + ": k = " + std::to_string(k) + "; expected > 0";
  if (group <= 0 || k % group != 0)
    return std::string(fn) + ": group = " + std::to_string(group) + "; expected a positive divisor of k = " +
           std::to_string(k);
  const int groups = k / group;
  using Scale = cutlass::float_e4m3_t;
  using Table = cutlass::packed_scale_t<Scale>;
  static_assert(sizeof(Table) == 8 && sizeof(int4::E4m3Act::ScaleType) == 8);
  out.assign(static_cast<std::size_t>(n) * groups * 8, 0);
  for (int r = 0; r < n; ++r)
    for (int g = 0; g < groups; ++g) {
      const std::uint8_t bits = scales[static_cast<std::size_t>(r) * groups + g];
      const float s = float(Scale::bitcast(bits));
      // 8 * |s| must stay finite in e4m3 (448), or the table's -8 entry would saturate.
      if (std::isnan(s) || std::abs(s) > 56.0f)
        return std::string(fn) + ": scales[" + std::to_string(r) + "][" + std::to_string(g) + "] = " + std::to_string(s) +
               "; expected a finite e4m3 value of magnitude at most 56 (8 x scale is an e4m3 table entry, at most 448)";
      const Table table(Scale::bitcast(bits));
      std::memcpy(out.data() + (static_cast<std::size_t>(g) * n + r) * 8, &table, 8);
    }
  return {};
}

namespace {

using TilePrepare = PlanResult (*)(const GroupedProblem&, int);

// Checks `p` for `Act`'s kernel (in every build), then picks the tile along the activation rows:
// 16 when every group fits in one (decode), else 128.
template <class Act>
PlanResult prepare_checked(const char* fn, const GroupedProblem& p, int group, [[maybe_unused]] TilePrepare n16,
                           [[maybe_unused]] TilePrepare n128) {
  if (auto e = check_int4_problem<Act>(fn, p, group); !e.empty()) return {nullptr, e};
#if !MOEJIT_CUTLASS_KERNELS
  return detail::not_built(fn, detail::kConfiguredOut);
#elif !defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)
  return detail::not_built(fn, detail::kToolkitTooOld);
#else
  const int max_m = *std::max_element(p.m.begin(), p.m.end());
  return max_m <= 16 ? n16(p, group) : n128(p, group);
#endif
}

// The kernels' entry points when this library has them; none otherwise (prepare_checked then
// never calls them).
#if MOEJIT_CUTLASS_KERNELS && defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED)
constexpr TilePrepare kBf16N16 = int4::prepare_n16, kBf16N128 = int4::prepare_n128;
constexpr TilePrepare kFp8N16 = int4::prepare_fp8_n16, kFp8N128 = int4::prepare_fp8_n128;
#else
constexpr TilePrepare kBf16N16 = nullptr, kBf16N128 = nullptr, kFp8N16 = nullptr, kFp8N128 = nullptr;
#endif

}  // namespace

PlanResult prepare_int4_grouped(const GroupedProblem& p, int group) {
  return prepare_checked<int4::Bf16Act>("prepare_int4_grouped", p, group, kBf16N16, kBf16N128);
}

PlanResult prepare_int4_fp8_grouped(const GroupedProblem& p, int group) {
  return prepare_checked<int4::E4m3Act>("prepare_int4_fp8_grouped", p, group, kFp8N16, kFp8N128);
}

}  // namespace moejit::bench::cutlass_baseline
