// moejit's packed layout: round trips for every format, group, scale dtype and row order; the
// element bit placement and the scale positions checked literally against the contract; the
// MXFP4 per-expert scale ranges; the act-and-mul column permutation for both source orders
// (scales, zeros and bias included); argument checks.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "gemm/grouped_gemm_params.cuh"
#include "quant/formats.hpp"
#include "quant/pack.hpp"
#include "test_quant_support.hpp"

using namespace moejit;
using namespace moejit::quant;
using namespace moejit::test;

namespace {

struct FormatCase {
  WeightFormat format;
  u32 group;
  DType dtype;
};

std::vector<FormatCase> every_format(u32 k) {
  std::vector<FormatCase> cases = {{WeightFormat::mxfp4, 32, DType::e8m0}};
  for (WeightFormat f : {WeightFormat::int4_sym, WeightFormat::int4_asym})
    for (u32 g : {32u, 64u, 128u, k})
      if (k % g == 0 && !(g == k && k <= 128))  // per-channel only when it differs from 32/64/128
        for (DType d : {DType::bf16, DType::f16}) cases.push_back({f, g, d});
  return cases;
}

// The logical row that feeds packed column c, written from the README's words rather than with
// the header's helpers: output j = 16 (c / 32) + 8 ((c % 32) / 16) + c % 8, gate if c % 16 < 8.
u32 source_row_of_column(u32 c, u32 n, RowOrder rows) {
  if (rows == RowOrder::plain) return c;
  const u32 j = 16 * (c / 32) + 8 * ((c % 32) / 16) + c % 8;
  const bool up = (c % 16) >= 8;
  return rows == RowOrder::concatenated ? (up ? n / 2 + j : j) : 2 * j + (up ? 1 : 0);
}

// The same weights with their rows rearranged from `from` to `to` order (act-and-mul only).
QuantizedWeights reorder_rows(const QuantizedWeights& w, RowOrder from, RowOrder to) {
  QuantizedWeights out = w;
  const u32 half = w.n / 2;
  for (u32 e = 0; e < w.experts; ++e)
    for (u32 r = 0; r < w.n; ++r) {
      // (output j, gate/up) of row r in `from` order, then its row in `to` order.
      const u32 j = from == RowOrder::concatenated ? r % half : r / 2;
      const u32 up = from == RowOrder::concatenated ? r / half : r % 2;
      const u32 to_row = to == RowOrder::concatenated ? up * half + j : 2 * j + up;
      for (u32 k = 0; k < w.k; ++k) out.codes[out.code_index(e, to_row, k)] = w.codes[w.code_index(e, r, k)];
      for (u32 g = 0; g < w.groups(); ++g) {
        out.scales[out.group_index(e, to_row, g)] = w.scales[w.group_index(e, r, g)];
        if (!w.zeros.empty()) out.zeros[out.group_index(e, to_row, g)] = w.zeros[w.group_index(e, r, g)];
      }
    }
  return out;
}

void check_same(const QuantizedWeights& a, const QuantizedWeights& b) {
  CHECK(a.format == b.format);
  CHECK(a.group_size == b.group_size);
  CHECK(a.scale_dtype == b.scale_dtype);
  CHECK(a.experts == b.experts);
  CHECK(a.n == b.n);
  CHECK(a.k == b.k);
  CHECK(a.codes == b.codes);
  CHECK(a.scales == b.scales);
  CHECK(a.zeros == b.zeros);
}

// The contract's element bit positions (templates/README.md), written out: int4 element e is
// nibble (e / 2) + 4 (e % 2); E2M1 element e's M, E0, E1 and sign sit at these word bits.
constexpr u32 kInt4Nibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};
constexpr u32 kE2m1Bits[8][4] = {{6, 7, 8, 15},   {22, 23, 24, 31}, {9, 10, 11, 18}, {25, 26, 27, 2},
                                 {12, 13, 14, 21}, {28, 29, 30, 5},  {3, 4, 0, 1},    {19, 20, 16, 17}};
// The f16-activation order (PackedOrder::a16f16, MXFP4 only): a16's k offsets, these bits.
constexpr u32 kE2m1F16Bits[8][4] = {{9, 10, 11, 15},  {25, 26, 27, 31}, {12, 13, 14, 18}, {28, 29, 30, 2},
                                    {6, 7, 1, 5},     {22, 23, 17, 21}, {0, 3, 4, 8},     {16, 19, 20, 24}};

// The 8-bit-activation order (PackedOrder::a8): int4 element e is the nibble at bit
// 8 (e % 4) + 4 (e / 4); E2M1 element e keeps M, E0, E1, sign at these bits of byte e % 4.
constexpr u32 kA8E2m1ByteBits[2][4] = {{2, 3, 4, 7}, {0, 1, 6, 5}};

// The 4-bit-activation order (PackedOrder::a4, MXFP4 only): element e is nibble e, the code as
// mma.m16n8k64's e2m1 B register holds it.
u32 code_in_word(WeightFormat f, PackedOrder order, u32 word, u32 e) {
  u32 code = 0;
  if (order == PackedOrder::a4) return (word >> (4 * e)) & 0xF;
  if (order == PackedOrder::a8) {
    if (f != WeightFormat::mxfp4) return (word >> (8 * (e % 4) + 4 * (e / 4))) & 0xF;
    for (u32 b = 0; b < 4; ++b) code |= ((word >> (8 * (e % 4) + kA8E2m1ByteBits[e / 4][b])) & 1u) << b;
    return code;
  }
  if (f != WeightFormat::mxfp4) return (word >> (4 * kInt4Nibble[e])) & 0xF;
  const auto& bits = order == PackedOrder::a16f16 ? kE2m1F16Bits : kE2m1Bits;
  for (u32 b = 0; b < 4; ++b) code |= ((word >> bits[e][b]) & 1u) << b;
  return code;
}

// The k offset (in its 32-k tile) of element el of a lane's word: mma.m16n8k16's B fragment
// for a16 (step el / 4, register (el / 2) % 2, half el % 2), mma.m16n8k32's e4m3 one for a8
// (register el / 4, byte el % 4), mma.m16n8k64's e2m1 one for a4 (register r nibble j is k
// 32 r + 8 t + j; a 32-k tile holds one register's k range: 8 t + el).
u32 element_k(PackedOrder order, u32 lane, u32 el) {
  if (order == PackedOrder::a4) return 8 * (lane % 4) + el;
  if (order == PackedOrder::a8) return 16 * (el / 4) + 4 * (lane % 4) + el % 4;
  return 16 * (el / 4) + 8 * ((el / 2) % 2) + 2 * (lane % 4) + el % 2;
}

constexpr PackedOrder kOrders[] = {PackedOrder::a16, PackedOrder::a8, PackedOrder::a4, PackedOrder::a16f16};
// a4 exists for MXFP4 weights only (e2m1 x e2m1 mma's), K a multiple of 64; a16f16 for MXFP4 only.
bool order_applies(WeightFormat f, PackedOrder order, u32 k) {
  if (order == PackedOrder::a16f16) return f == WeightFormat::mxfp4;
  return order != PackedOrder::a4 || (f == WeightFormat::mxfp4 && k % 64 == 0);
}

// Where the word of n8 tile w of 32-k tile kt lies (templates/README.md, written out): in its
// own tile and slot, except for a4, which stores a 64-k pair's words side by side: tile
// 2 (kt / 2) + w / 2, slot 2 (w % 2) + kt % 2.
std::pair<u32, u32> word_tile_and_slot(PackedOrder order, u32 kt, u32 w) {
  if (order != PackedOrder::a4) return {kt, w};
  return {kt - kt % 2 + w / 2, 2 * (w % 2) + kt % 2};
}

// Where the scale of (expert e, group g, packed column c) sits: [E][K/G][N], each 32-column
// strip permuted so that column 8w + i of the strip is at position 4i + w.
u64 scale_at(u32 e, u32 g, u32 c, u32 n, u32 groups) {
  return (static_cast<u64>(e) * groups + g) * n + 32 * (c / 32) + 4 * (c % 8) + (c % 32) / 8;
}

u64 expected_scale_bytes(const FormatCase& fc, u32 e, u32 n, u32 k) {
  const u64 values = static_cast<u64>(e) * (k / fc.group) * n * scale_bytes(fc.dtype);
  return fc.format == WeightFormat::mxfp4 ? (values + 15) / 16 * 16 + 4ull * e : values;
}

}  // namespace

TEST_CASE("packed_k_of_element is the contract's fragment order") {
  // Element e of lane 0 is step e / 4, register (e / 2) % 2, half e % 2: k 0, 1, 8, 9, 16, 17, 24, 25.
  const u32 lane0[8] = {0, 1, 8, 9, 16, 17, 24, 25};
  for (u32 lane = 0; lane < 32; ++lane)
    for (u32 e = 0; e < 8; ++e) {
      CAPTURE(lane);
      CAPTURE(e);
      CHECK(packed_k_of_element(lane, e) == lane0[e] + 2 * (lane % 4));
    }
}

TEST_CASE("every packer output round-trips through the unpacker") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  const u32 E = 3, N = 64, K = 256;
  for (const auto& fc : every_format(K)) {
    for (RowOrder rows : {RowOrder::plain, RowOrder::concatenated, RowOrder::interleaved})
    for (PackedOrder order : kOrders) {
      if (!order_applies(fc.format, order, K)) continue;
      CAPTURE(static_cast<int>(fc.format));
      CAPTURE(fc.group);
      CAPTURE(static_cast<int>(fc.dtype));
      CAPTURE(static_cast<int>(order));
      const std::string order_name = row_order_name(rows);
      CAPTURE(order_name);
      const QuantizedWeights w = random_logical(rng, fc.format, fc.group, fc.dtype, E, N, K);
      auto packed = pack(w, PackOptions{.rows = rows, .order = order});
      REQUIRE(packed.ok());
      CHECK(packed->order == order);
      CHECK(packed->qweight.size() == packed_weight_bytes(E, N, K));
      CHECK(packed->scales.size() == expected_scale_bytes(fc, E, N, K));
      CHECK(packed->zeros.size() == (fc.format == WeightFormat::int4_asym ? E * (K / fc.group) * N : 0));
      CHECK(packed->act_and_mul == (rows != RowOrder::plain));
      auto back = unpack(*packed, rows);
      REQUIRE(back.ok());
      check_same(*back, w);
      if (rows != RowOrder::plain) {
        // Either act-and-mul order can be asked of the same pack.
        const RowOrder other = rows == RowOrder::concatenated ? RowOrder::interleaved : RowOrder::concatenated;
        auto other_back = unpack(*packed, other);
        REQUIRE(other_back.ok());
        check_same(*other_back, reorder_rows(w, rows, other));
      }
    }
  }
}

TEST_CASE("element e of word w of lane L in tile (nt, kt) holds column 32nt + 8w + L/4, k = 32kt + its fragment k") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  // K = 160 (an odd count of 32-k tiles) for every order but a4, which needs pairs: K = 192.
  for (const u32 K : {160u, 192u})
  for (const auto& fc : every_format(K)) {
    const u32 E = 2, N = 96;
    for (RowOrder rows : {RowOrder::plain, RowOrder::concatenated, RowOrder::interleaved})
    for (PackedOrder order : kOrders) {
      if (!order_applies(fc.format, order, K) || (K == 192) != (order == PackedOrder::a4)) continue;
      CAPTURE(K);
      CAPTURE(static_cast<int>(fc.format));
      CAPTURE(fc.group);
      CAPTURE(static_cast<int>(order));
      const std::string order_name = row_order_name(rows);
      CAPTURE(order_name);
      const QuantizedWeights w = random_logical(rng, fc.format, fc.group, fc.dtype, E, N, K);
      auto packed = pack(w, PackOptions{.rows = rows, .order = order});
      REQUIRE(packed.ok());
      for (int trial = 0; trial < 6; ++trial) {
        const u32 e = rng.uniform_int(0, E - 1), nt = rng.uniform_int(0, N / 32 - 1),
                  kt = rng.uniform_int(0, K / 32 - 1);
        for (u32 lane = 0; lane < 32; ++lane)
          for (u32 word = 0; word < 4; ++word) {
            // Tile (nt, kt') of expert e at e * N*K/2 + (nt * K/32 + kt') * 512, written out.
            const auto [stored_kt, slot] = word_tile_and_slot(order, kt, word);
            const u64 tile = static_cast<u64>(e) * N * K / 2 + (static_cast<u64>(nt) * (K / 32) + stored_kt) * 512;
            u32 bits;
            std::memcpy(&bits, &packed->qweight[tile + 16 * lane + 4 * slot], 4);
            const u32 column = 32 * nt + 8 * word + lane / 4;
            const u32 row = source_row_of_column(column, N, rows);
            for (u32 el = 0; el < 8; ++el) {
              const u32 k = 32 * kt + element_k(order, lane, el);
              CHECK(code_in_word(fc.format, order, bits, el) == w.codes[w.code_index(e, row, k)]);
            }
          }
        // Scales and zeros of those columns.
        for (u32 column = 32 * nt; column < 32 * nt + 32; ++column) {
          const u32 row = source_row_of_column(column, N, rows);
          const u32 g = (32 * kt) / fc.group;
          const u64 at = scale_at(e, g, column, N, K / fc.group);
          u16 bits = 0;
          std::memcpy(&bits, &packed->scales[at * scale_bytes(fc.dtype)], scale_bytes(fc.dtype));
          CHECK(bits == w.scales[w.group_index(e, row, g)]);
          if (fc.format == WeightFormat::int4_asym) CHECK(packed->zeros[at] == w.zeros[w.group_index(e, row, g)]);
        }
      }
    }
  }
}

TEST_CASE("MXFP4 scales end with each expert's scale-byte range, all-zero blocks take the largest byte") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  const u32 E = 4, N = 64, K = 128, groups = K / 32;
  QuantizedWeights w = random_logical(rng, WeightFormat::mxfp4, 32, DType::e8m0, E, N, K);
  auto block_codes = [&](u32 e, u32 row, u32 g) { return &w.codes[w.code_index(e, row, 32 * g)]; };
  // Expert 0: bytes 100..140, with one all-zero block whose byte (3) must not count.
  // Expert 1: a NaN block (0xFF). Expert 2: every block zero (+0 and -0 codes). Expert 3: 0x00 and 0xFE.
  for (u32 row = 0; row < N; ++row)
    for (u32 g = 0; g < groups; ++g) {
      w.scales[w.group_index(0, row, g)] = static_cast<u16>(100 + (row * groups + g) % 41);
      u8* codes = block_codes(0, row, g);
      if (std::all_of(codes, codes + 32, [](u8 c) { return (c & 7) == 0; })) codes[0] = 1;  // no accidental zero blocks
      u8* z = block_codes(2, row, g);
      for (u32 i = 0; i < 32; ++i) z[i] = static_cast<u8>(i % 2 ? 8 : 0);
      w.scales[w.group_index(2, row, g)] = static_cast<u16>(rng.uniform_int(0, 254));
    }
  for (u32 i = 0; i < 32; ++i) block_codes(0, 5, 1)[i] = static_cast<u8>(i % 3 ? 0 : 8);
  w.scales[w.group_index(0, 5, 1)] = 3;
  w.scales[w.group_index(1, 7, 2)] = 0xFF;
  w.scales[w.group_index(3, 1, 0)] = 0x00;
  w.scales[w.group_index(3, 2, 3)] = 0xFE;
  auto packed = pack(w);
  REQUIRE(packed.ok());
  const u64 offset = (static_cast<u64>(E) * groups * N + 15) / 16 * 16;
  REQUIRE(packed->scales.size() == offset + 4 * E);
  auto range = [&](u32 e) {
    u32 r;
    std::memcpy(&r, &packed->scales[offset + 4 * e], 4);
    return std::pair{r & 0xff, (r >> 8) & 0xff};
  };
  CHECK(range(0) == std::pair{100u, 140u});
  CHECK(range(1).second == 0xFFu);
  CHECK(range(2) == std::pair{127u, 127u});
  CHECK(range(3).first == 0u);
  CHECK(range(3).second == 0xFEu);
  // Bits 16..31: the packing mark of the default order (a16, packed for bf16): 0x6d30.
  for (u32 e = 0; e < E; ++e) {
    CHECK(packed->scales[offset + 4 * e + 2] == 0x30);
    CHECK(packed->scales[offset + 4 * e + 3] == 0x6d);
  }
  // The zero block of expert 0 now carries the expert's largest byte; its value is unchanged (0).
  CHECK(packed->scales[scale_at(0, 1, 5, N, groups)] == 140);
  // Unpacking gives the same codes and every other scale unchanged.
  auto back = unpack(*packed, RowOrder::plain);
  REQUIRE(back.ok());
  CHECK(back->codes == w.codes);
  for (u32 e = 0; e < E; ++e)
    for (u32 row = 0; row < N; ++row)
      for (u32 g = 0; g < groups; ++g) {
        const bool zero_block = e == 2 || (e == 0 && row == 5 && g == 1);
        if (!zero_block) CHECK(back->scales[back->group_index(e, row, g)] == w.scales[w.group_index(e, row, g)]);
      }
}

TEST_CASE("act-and-mul permutation: both source orders give one pack, bias follows the columns") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  const u32 E = 2, N = 128, K = 64, I = N / 2;
  // Worked examples: gate 0 -> column 0, up 0 -> 8, gate 8 -> 16, up 15 -> 31, gate 16 -> 32.
  CHECK(packed_column_of_row(0, N, RowOrder::concatenated) == 0);
  CHECK(packed_column_of_row(I + 0, N, RowOrder::concatenated) == 8);
  CHECK(packed_column_of_row(8, N, RowOrder::concatenated) == 16);
  CHECK(packed_column_of_row(I + 15, N, RowOrder::concatenated) == 31);
  CHECK(packed_column_of_row(16, N, RowOrder::concatenated) == 32);
  CHECK(packed_column_of_row(1, N, RowOrder::interleaved) == 8);  // up 0
  CHECK(packed_column_of_row(16, N, RowOrder::interleaved) == 16);  // gate 8
  for (RowOrder rows : {RowOrder::plain, RowOrder::concatenated, RowOrder::interleaved}) {
    std::vector<int> hits(N, 0);
    for (u32 r = 0; r < N; ++r) {
      const u32 c = packed_column_of_row(r, N, rows);
      REQUIRE(c < N);
      ++hits[c];
      CHECK(row_of_packed_column(c, N, rows) == r);
      CHECK(source_row_of_column(c, N, rows) == r);
    }
    for (int h : hits) CHECK(h == 1);
  }

  for (const auto& fc : every_format(K)) {
    CAPTURE(static_cast<int>(fc.format));
    const QuantizedWeights concat = random_logical(rng, fc.format, fc.group, fc.dtype, E, N, K);
    const QuantizedWeights inter = reorder_rows(concat, RowOrder::concatenated, RowOrder::interleaved);
    std::vector<float> bias_concat(E * N), bias_inter(E * N);
    for (u32 e = 0; e < E; ++e)
      for (u32 j = 0; j < I; ++j) {
        const float gate = rng.normal_nonzero(1.0f), up = rng.normal_nonzero(1.0f);
        bias_concat[e * N + j] = gate;
        bias_concat[e * N + I + j] = up;
        bias_inter[e * N + 2 * j] = gate;
        bias_inter[e * N + 2 * j + 1] = up;
      }
    auto a = pack(concat, {RowOrder::concatenated, bias_concat});
    auto b = pack(inter, {RowOrder::interleaved, bias_inter});
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(a->qweight == b->qweight);
    CHECK(a->scales == b->scales);
    CHECK(a->zeros == b->zeros);
    CHECK(a->bias == b->bias);
    for (u32 e = 0; e < E; ++e)
      for (u32 c = 0; c < N; ++c) {
        // Packed column c is output j, gate if c % 16 < 8.
        const u32 j = 16 * (c / 32) + 8 * ((c % 32) / 16) + c % 8;
        CHECK(a->bias[e * N + c] == bias_concat[e * N + ((c % 16) < 8 ? j : I + j)]);
      }
    auto restored = unpermute_bias(a->bias, E, N, RowOrder::interleaved);
    REQUIRE(restored.ok());
    CHECK(*restored == bias_inter);
  }
  // Ordinary weights keep the order.
  const QuantizedWeights plain = random_logical(rng, WeightFormat::int4_sym, 32, DType::bf16, 1, 64, 64);
  std::vector<float> bias(64);
  for (auto& x : bias) x = rng.normal_nonzero(1.0f);
  auto p = pack(plain, {RowOrder::plain, bias});
  REQUIRE(p.ok());
  CHECK(p->bias == bias);
}

TEST_CASE("packers check their arguments first") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  QuantizedWeights w = random_logical(rng, WeightFormat::int4_asym, 32, DType::bf16, 2, 48, 64);
  check_error(pack(w).status(), Code::invalid_argument, {"'n' = 48", "multiple of 32"});
  w = random_logical(rng, WeightFormat::int4_asym, 32, DType::bf16, 2, 64, 96);
  CHECK(pack(w).ok());
  w = random_logical(rng, WeightFormat::int4_asym, 48, DType::bf16, 2, 64, 48);  // per-channel, K % 32 != 0
  check_error(pack(w).status(), Code::invalid_argument, {"'k' = 48", "multiple of 32"});
  w = random_logical(rng, WeightFormat::int4_sym, 64, DType::bf16, 2, 64, 96);
  check_error(pack(w).status(), Code::invalid_argument, {"'k' = 96", "group_size = 64"});
  w = random_logical(rng, WeightFormat::mxfp4, 32, DType::e8m0, 2, 64, 64);
  w.group_size = 64;
  check_error(pack(w).status(), Code::invalid_argument, {"'group_size' = 64", "mxfp4"});
  w = random_logical(rng, WeightFormat::int4_sym, 32, DType::f16, 2, 64, 64);
  check_error(pack(w, {.order = PackedOrder::a4}).status(), Code::invalid_argument,
              {"order a4", "int4_sym", "expected mxfp4"});
  check_error(pack(w, {.order = PackedOrder::a16f16}).status(), Code::invalid_argument,
              {"order a16f16", "int4_sym", "expected mxfp4", "use a16"});
  {
    QuantizedWeights odd = random_logical(rng, WeightFormat::mxfp4, 32, DType::e8m0, 2, 64, 96);
    check_error(pack(odd, {.order = PackedOrder::a4}).status(), Code::invalid_argument,
                {"'k' = 96 with order a4", "multiple of 64"});
  }
  w.codes.pop_back();
  check_error(pack(w).status(), Code::invalid_argument, {"codes has 8191 elements", "8192"});
  w = random_logical(rng, WeightFormat::int4_sym, 32, DType::f16, 2, 64, 64);
  w.codes[7] = 16;
  check_error(pack(w).status(), Code::invalid_argument, {"codes[7] = 16", "0..15"});
  w = random_logical(rng, WeightFormat::int4_asym, 32, DType::f16, 2, 64, 64);
  w.zeros.clear();
  check_error(pack(w).status(), Code::invalid_argument, {"zeros has 0 elements"});
  w = random_logical(rng, WeightFormat::int4_sym, 32, DType::f16, 2, 64, 64);
  std::vector<float> bias(100);
  check_error(pack(w, {RowOrder::concatenated, bias}).status(), Code::invalid_argument,
              {"bias has 100 elements", "E*N = 128"});
  auto packed = pack(w, {RowOrder::concatenated, {}});
  REQUIRE(packed.ok());
  check_error(unpack(*packed, RowOrder::plain).status(), Code::invalid_argument,
              {"rows = plain", "act-and-mul", "concatenated or interleaved"});
  packed->qweight.pop_back();
  check_error(unpack(*packed, RowOrder::concatenated).status(), Code::invalid_argument, {"qweight has"});
}

TEST_CASE("the per-call extent test and the checked one agree at every bound") {
  const u32 experts[] = {0, 1, kMaxExperts, kMaxExperts + 1, 0xffffffffu};
  const u32 extents[] = {0, 16, 32, 48, 4096, kMaxPackedExtent - 32, kMaxPackedExtent, kMaxPackedExtent + 32, 0xffffffe0u};
  int fitting = 0;
  for (u32 e : experts)
    for (u32 n : extents)
      for (u32 k : extents) {
        CAPTURE(e);
        CAPTURE(n);
        CAPTURE(k);
        const Status s = check_packed_extents(e, n, k, "w->");
        CHECK(s.ok() == packed_extents_fit(e, n, k));
        // Within the bounds no byte count of the layout can wrap: the whole model's tiles fit.
        if (s.ok()) {
          ++fitting;
          CHECK(packed_weight_bytes(e, n, k) / e == static_cast<u64>(n) * k / 2);
        } else {
          CHECK(s.message().find("'w->") != std::string::npos);
        }
      }
  // 1 x 2^20 x 2^11 bytes is the largest expert (2^31): n = 2^20 fits with k up to 4096.
  CHECK(packed_extents_fit(1, kMaxPackedExtent, 4096));
  CHECK(!packed_extents_fit(1, kMaxPackedExtent, 4096 + 32));
  CHECK(fitting > 0);
}
