// cutlass_int4_layout_check: int4_weight_bytes (host packing into the kernel's shuffled layout) against
// CUTLASS's own cutlass::reorder_tensor, whose device kernel is run here on the host, block by
// block and thread by thread, on the plain [n][k] int4 tensor CUTLASS's examples start from.
// Host only (no GPU); exit status 0 when every shape matches byte for byte.

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/cutlass/cutlass_baselines.hpp"
#include "bench/cutlass/int4_layout.hpp"
#include "cutlass/util/packed_stride.hpp"

namespace {

using namespace cute;
using T = cutlass::int4b_t;

// reorder_tensor and reorder_tensor_kernel (cutlass/util/mixed_dtype_utils.hpp), with the grid
// and the thread block as loops: D(c) = S(c) for every coordinate c, copied by a 128-thread tiled
// copy over 16-row tiles. (The device version has no bounds checks: k must be a multiple of 128.)
template <class LayoutSrc, class LayoutDst>
void reorder_on_host(const T* src, LayoutSrc layout_src, T* dst, LayoutDst layout_dst) {
  Tensor S = make_tensor(make_gmem_ptr<const T>(src), layout_src);
  Tensor D = make_tensor(make_gmem_ptr<T>(dst), layout_dst);
  auto has_major_mode = [](auto s) { return any_of(flatten(s), [](auto a) { return is_constant<1, decltype(a)>{}; }); };
  static_assert(has_major_mode(stride<0>(LayoutDst{})) ^ has_major_mode(stride<1>(LayoutDst{})));
  constexpr int N = shape_div(Int<8>{}, Int<sizeof_bits_v<T>>{});
  auto val_layout = conditional_return<has_major_mode(stride<0>(LayoutDst{}))>(
      make_layout(make_shape(Int<N>{}, Int<1>{}), GenColMajor{}),
      make_layout(make_shape(Int<1>{}, Int<N>{}), GenRowMajor{}));
  auto tiled_copy = make_tiled_copy(Copy_Atom<DefaultCopy, T>{}, make_layout(make_shape(Int<1>{}, Int<128>{})), val_layout);
  using TileShape = Shape<_16>;
  auto tiled_D = group_modes<3, rank_v<LayoutDst>>(tiled_divide(D, TileShape{}));
  for (int z = 0; z < int(size<3>(tiled_D)); ++z)
    for (int x = 0; x < int(size<1>(tiled_D)); ++x)
      for (int thread = 0; thread < 128; ++thread) {
        Tensor gS = local_tile(S, TileShape{}, make_coord(x, _, z));
        Tensor gD = local_tile(D, TileShape{}, make_coord(x, _, z));
        auto thread_copy = tiled_copy.get_slice(thread);
        Tensor tS = thread_copy.partition_S(gS);
        Tensor tD = thread_copy.partition_D(gD);
        copy(tiled_copy, tS, tD);
      }
}

}  // namespace

int main() {
  namespace cb = moejit::bench::cutlass_baseline;
  std::mt19937 rng(7);
  bool pass = true;
  for (auto [n, k] : {std::pair{16, 128}, std::pair{48, 256}, std::pair{144, 384}, std::pair{256, 512},
                      std::pair{2880, 256}, std::pair{32, 2944}}) {
    std::vector<std::int8_t> values(std::size_t(n) * k);
    for (auto& v : values) v = static_cast<std::int8_t>(int(rng() % 16) - 8);
    // The plain [n][k] tensor: element i (= r * k + c) in the low nibble of byte i / 2 when even.
    std::vector<std::uint8_t> plain(values.size() / 2, 0);
    for (std::size_t i = 0; i < values.size(); ++i)
      plain[i / 2] |= static_cast<std::uint8_t>((values[i] & 0xF) << (4 * (i % 2)));
    std::vector<std::uint8_t> expected(plain.size(), 0);
    using StrideW = cb::int4::StrideW;
    auto layout_src = make_layout(make_shape(n, k, Int<1>{}), cutlass::make_cute_packed_stride(StrideW{}, {n, k, 1}));
    reorder_on_host(reinterpret_cast<const T*>(plain.data()), layout_src, reinterpret_cast<T*>(expected.data()),
                    cb::int4::weight_layout(n, k));

    std::vector<std::uint8_t> packed;
    std::string error = cb::int4_weight_bytes(values.data(), n, k, packed);
    const bool same = error.empty() && packed == expected;
    std::printf("n = %d, k = %d: %s%s\n", n, k, same ? "same bytes" : "DIFFERENT", error.empty() ? "" : (" (" + error + ")").c_str());
    pass &= same;
  }
  // Bad arguments are errors, not crashes.
  std::vector<std::uint8_t> out;
  std::int8_t bad[16 * 16] = {8};
  for (auto [what, error] : {std::pair{"n = 8", cb::int4_weight_bytes(bad, 8, 16, out)},
                             std::pair{"value 8", cb::int4_weight_bytes(bad, 16, 16, out)},
                             std::pair{"null", cb::int4_weight_bytes(nullptr, 16, 16, out)}}) {
    std::printf("%s: %s\n", what, error.c_str());
    pass &= !error.empty();
  }
  std::printf("%s\n", pass ? "int4 layout: all shapes match" : "int4 layout: FAILED");
  return pass ? 0 : 1;
}
