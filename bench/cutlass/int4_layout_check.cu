// cutlass_int4_layout_check: the int4 baselines' host packing against CUTLASS's own code, on the
// host (no GPU); exit status 0 when every check holds.
//   - int4_weight_bytes (bf16 kernel): byte for byte against cutlass::reorder_tensor, whose device
//     kernel is run here on the host, block by block and thread by thread, on the plain [n][k]
//     int4 tensor CUTLASS's examples start from.
//   - int4_fp8_weight_bytes and int4_fp8_scale_bytes (e4m3 kernel): every packed 32-bit word is
//     converted as the kernel converts it (the lop3/prmt lookup of CUTLASS's
//     lookup_table_convert and the positive table it derives from the packed one, emulated here
//     from the PTX ISA's definitions of lop3 and prmt), and each value must come out as the value
//     at the same position of reorder_tensor's output times the scale, rounded to e4m3.

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
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

// The plain [n][k] tensor's layout (k contiguous), as the examples give reorder_tensor.
auto plain_layout(int n, int k) {
  using StrideW = moejit::bench::cutlass_baseline::int4::StrideW;
  return make_layout(make_shape(n, k, Int<1>{}), cutlass::make_cute_packed_stride(StrideW{}, {n, k, 1}));
}

// PTX ISA, lop3.b32 d, a, b, c, immLut: bit i of d is bit (4 a_i + 2 b_i + c_i) of immLut (the
// table is built by applying the operation to 0xF0, 0xCC, 0xAA).
std::uint32_t lop3(std::uint32_t a, std::uint32_t b, std::uint32_t c, std::uint32_t lut) {
  std::uint32_t d = 0;
  for (int i = 0; i < 32; ++i) {
    const std::uint32_t sel = (((a >> i) & 1u) << 2) | (((b >> i) & 1u) << 1) | ((c >> i) & 1u);
    d |= ((lut >> sel) & 1u) << i;
  }
  return d;
}

// PTX ISA, prmt.b32 d, a, b, c (default mode): the bytes of b:a numbered 0..7 (a's are 0..3);
// result byte i is the byte that nibble i of c selects with its low three bits, or, when the
// nibble's bit 3 is set, that byte's sign bit replicated.
std::uint32_t prmt(std::uint32_t a, std::uint32_t b, std::uint32_t c) {
  const std::uint64_t bytes = (std::uint64_t(b) << 32) | a;
  std::uint32_t d = 0;
  for (int i = 0; i < 4; ++i) {
    const std::uint32_t sel = (c >> (4 * i)) & 0xFu;
    std::uint32_t byte = static_cast<std::uint32_t>(bytes >> (8 * (sel & 7u))) & 0xFFu;
    if (sel & 8u) byte = (byte & 0x80u) ? 0xFFu : 0u;
    d |= byte << (8 * i);
  }
  return d;
}

// The e4m3 kernel's conversion of one 32-bit word of packed weights (8 values; each 4 have their
// own scale, whose 8-byte table is tables[0] or tables[1]) as cutlass/detail/collective/
// mixed_input_utils.hpp (CUTLASS 4.2) does it: the positive table from the packed (negative) one,
// then per 4 values an index and a sign selector, and three prmt.
std::array<std::uint8_t, 8> kernel_convert(std::uint32_t word, const std::array<const std::uint8_t*, 2>& tables) {
  std::uint32_t sign = lop3(word, 0x88888888u, 0x64206420u, (0xF0 & 0xCC) | 0xAA) >> 1;
  std::uint32_t index = word & 0x77777777u;
  std::array<std::uint8_t, 8> out{};
  for (int i = 0; i < 2; ++i, index >>= 16, sign >>= 16) {
    std::uint32_t neg[2], pos[2];
    std::memcpy(neg, tables[std::size_t(i)], 8);
    pos[0] = lop3(neg[0], 0xFFFFFF00u, 0x80808080u, (0xF0 & 0xCC) ^ 0xAA);
    pos[1] = neg[1] ^ 0x80808080u;
    const std::uint32_t r = prmt(prmt(pos[0], pos[1], index), prmt(neg[0], neg[1], index), sign);
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<std::uint8_t>(r >> (8 * j));
  }
  return out;
}

float e4m3_value(std::uint8_t bits) { return float(cutlass::float_e4m3_t::bitcast(bits)); }

// Each shape's values with a few scales (powers of two, and ones whose products round).
bool check_fp8_packing(std::mt19937& rng) {
  namespace cb = moejit::bench::cutlass_baseline;
  bool pass = true;
  const float scale_values[] = {1.0f, 0.25f, 0.015625f, 4.0f, 0.375f, 1.25f, 0.02734375f, 56.0f, -0.5f};
  for (const std::array<int, 3>& shape : {std::array{16, 128, 128}, std::array{48, 256, 128}, std::array{144, 384, 128},
                                          std::array{32, 2944, 128}, std::array{64, 512, 256}}) {
    const int n = shape[0], k = shape[1], group = shape[2];
    const int groups = k / group;
    std::vector<std::int8_t> values(std::size_t(n) * k);
    for (auto& v : values) v = static_cast<std::int8_t>(int(rng() % 16) - 8);
    std::vector<std::uint8_t> scales(std::size_t(n) * groups);
    for (auto& s : scales) s = cutlass::float_e4m3_t(scale_values[rng() % std::size(scale_values)]).storage;

    std::vector<std::uint8_t> plain(values.size() / 2, 0);
    for (std::size_t i = 0; i < values.size(); ++i)
      plain[i / 2] |= static_cast<std::uint8_t>((values[i] & 0xF) << (4 * (i % 2)));
    std::vector<std::uint8_t> reordered(plain.size(), 0);
    const auto layout = cb::int4::weight_layout<cb::int4::E4m3Act>(n, k);
    reorder_on_host(reinterpret_cast<const T*>(plain.data()), plain_layout(n, k), reinterpret_cast<T*>(reordered.data()),
                    layout);

    std::vector<std::uint8_t> packed, tables;
    std::string error = cb::int4_fp8_weight_bytes(values.data(), n, k, packed);
    if (error.empty()) error = cb::int4_fp8_scale_bytes(scales.data(), n, k, group, tables);
    std::size_t wrong = 0;
    if (error.empty() && packed.size() == plain.size() && tables.size() == scales.size() * 8) {
      // Which (row, group) each packed element belongs to: invert the layout.
      std::vector<std::int32_t> row_of(values.size()), group_of(values.size());
      for (int r = 0; r < n; ++r)
        for (int c = 0; c < k; ++c) {
          const std::int64_t i = layout(r, c, 0);
          row_of[std::size_t(i)] = r;
          group_of[std::size_t(i)] = c / group;
        }
      for (std::size_t w = 0; w < packed.size() / 4; ++w) {
        std::uint32_t word = 0;
        std::memcpy(&word, packed.data() + 4 * w, 4);
        // Each 4 values of a word share one scale (the kernel reads one table per 4 values).
        const std::size_t first = 8 * w;
        auto table = [&](std::size_t i) { return tables.data() + (std::size_t(group_of[i]) * n + std::size_t(row_of[i])) * 8; };
        const std::array<std::uint8_t, 8> got = kernel_convert(word, {table(first), table(first + 4)});
        for (int j = 0; j < 8; ++j) {
          const std::size_t i = first + std::size_t(j), head = first + std::size_t(j / 4) * 4;
          const int v = (((reordered[i / 2] >> (4 * (i % 2))) & 0xF) ^ 8) - 8;  // two's complement nibble
          const float scale = e4m3_value(scales[std::size_t(row_of[i]) * groups + std::size_t(group_of[i])]);
          const float want = float(cutlass::float_e4m3_t(float(v) * scale));
          if (row_of[i] != row_of[head] || group_of[i] != group_of[head] || e4m3_value(got[std::size_t(j)]) != want)
            ++wrong;
        }
      }
    } else if (error.empty()) {
      error = "unexpected sizes";
    }
    const bool ok = error.empty() && wrong == 0;
    std::printf("e4m3 kernel: n = %d, k = %d, group = %d: %s%s\n", n, k, group,
                ok ? "every value converts to value x scale" : ("WRONG (" + std::to_string(wrong) + " values)").c_str(),
                error.empty() ? "" : (" (" + error + ")").c_str());
    pass &= ok;
  }
  // Bad arguments are errors, not crashes.
  std::vector<std::uint8_t> out;
  std::int8_t values[16 * 32] = {};
  const std::uint8_t big = cutlass::float_e4m3_t(64.0f).storage, nan = 0x7F;
  for (auto [what, error] : {std::pair{"e4m3 weights: k = 16", cb::int4_fp8_weight_bytes(values, 16, 16, out)},
                             std::pair{"e4m3 scales: 64", cb::int4_fp8_scale_bytes(&big, 2, 128, 128, out)},
                             std::pair{"e4m3 scales: NaN", cb::int4_fp8_scale_bytes(&nan, 2, 128, 128, out)},
                             std::pair{"e4m3 scales: n = 3", cb::int4_fp8_scale_bytes(&big, 3, 128, 128, out)}}) {
    std::printf("%s: %s\n", what, error.c_str());
    pass &= !error.empty();
  }
  return pass;
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
    reorder_on_host(reinterpret_cast<const T*>(plain.data()), plain_layout(n, k), reinterpret_cast<T*>(expected.data()),
                    cb::int4::weight_layout<cb::int4::Bf16Act>(n, k));

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
  pass &= check_fp8_packing(rng);
  std::printf("%s\n", pass ? "int4 layout: all shapes match" : "int4 layout: FAILED");
  return pass ? 0 : 1;
}
