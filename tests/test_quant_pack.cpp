// moejit's packed layout: round trips for every format, group, scale dtype and row order; the
// nibble placement checked literally against the contract; the act-and-mul column permutation
// for both source orders (scales, zeros and bias included); argument checks.

#include <doctest/doctest.h>

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

}  // namespace

TEST_CASE("packed_k_of_nibble is the contract's fragment order") {
  // int4 words pair (nibble p, nibble p + 4): lane 0 holds k 0, 8, 16, 24, 1, 9, 17, 25.
  const u32 int4_lane0[8] = {0, 8, 16, 24, 1, 9, 17, 25};
  // e2m1 words pair (nibble 2q, 2q + 1): lane 0 holds k 0, 1, 8, 9, 16, 17, 24, 25.
  const u32 e2m1_lane0[8] = {0, 1, 8, 9, 16, 17, 24, 25};
  for (u32 lane = 0; lane < 32; ++lane)
    for (u32 p = 0; p < 8; ++p) {
      CAPTURE(lane);
      CAPTURE(p);
      CHECK(packed_k_of_nibble(NibbleOrder::int4_pairs_p_p4, lane, p) == int4_lane0[p] + 2 * (lane % 4));
      CHECK(packed_k_of_nibble(NibbleOrder::e2m1_pairs_2q, lane, p) == e2m1_lane0[p] + 2 * (lane % 4));
    }
}

TEST_CASE("every packer output round-trips through the unpacker") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  const u32 E = 3, N = 64, K = 256;
  for (const auto& fc : every_format(K)) {
    for (RowOrder rows : {RowOrder::plain, RowOrder::concatenated, RowOrder::interleaved}) {
      CAPTURE(static_cast<int>(fc.format));
      CAPTURE(fc.group);
      CAPTURE(static_cast<int>(fc.dtype));
      const std::string order_name = row_order_name(rows);
      CAPTURE(order_name);
      const QuantizedWeights w = random_logical(rng, fc.format, fc.group, fc.dtype, E, N, K);
      auto packed = pack(w, {rows, {}});
      REQUIRE(packed.ok());
      CHECK(packed->qweight.size() == packed_weight_bytes(E, N, K));
      CHECK(packed->scales.size() == E * (K / fc.group) * N * scale_bytes(fc.dtype));
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

TEST_CASE("nibble (lane, word, p) of tile (nt, kt) holds column 32nt + 8w + lane/4, k = 32kt + packed_k_of_nibble") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  const u32 E = 2, N = 96, K = 160;
  for (const auto& fc : every_format(K)) {
    for (RowOrder rows : {RowOrder::plain, RowOrder::concatenated, RowOrder::interleaved}) {
      CAPTURE(static_cast<int>(fc.format));
      CAPTURE(fc.group);
      const std::string order_name = row_order_name(rows);
      CAPTURE(order_name);
      const QuantizedWeights w = random_logical(rng, fc.format, fc.group, fc.dtype, E, N, K);
      auto packed = pack(w, {rows, {}});
      REQUIRE(packed.ok());
      const NibbleOrder order =
          fc.format == WeightFormat::mxfp4 ? NibbleOrder::e2m1_pairs_2q : NibbleOrder::int4_pairs_p_p4;
      for (int trial = 0; trial < 6; ++trial) {
        const u32 e = rng.uniform_int(0, E - 1), nt = rng.uniform_int(0, N / 32 - 1),
                  kt = rng.uniform_int(0, K / 32 - 1);
        // Tile (nt, kt) of expert e at e * N*K/2 + (nt * K/32 + kt) * 512, written out.
        const u64 tile = static_cast<u64>(e) * N * K / 2 + (static_cast<u64>(nt) * (K / 32) + kt) * 512;
        for (u32 lane = 0; lane < 32; ++lane)
          for (u32 word = 0; word < 4; ++word) {
            u32 bits;
            std::memcpy(&bits, &packed->qweight[tile + 16 * lane + 4 * word], 4);
            const u32 column = 32 * nt + 8 * word + lane / 4;
            const u32 row = source_row_of_column(column, N, rows);
            for (u32 p = 0; p < 8; ++p) {
              const u32 k = 32 * kt + packed_k_of_nibble(order, lane, p);
              CHECK(((bits >> (4 * p)) & 0xF) == w.codes[w.code_index(e, row, k)]);
            }
          }
        // Scales and zeros of those columns: [E][K/G][N], packed column order.
        for (u32 column = 32 * nt; column < 32 * nt + 32; ++column) {
          const u32 row = source_row_of_column(column, N, rows);
          const u32 g = (32 * kt) / fc.group;
          const u64 at = (static_cast<u64>(e) * (K / fc.group) + g) * N + column;
          u16 bits = 0;
          std::memcpy(&bits, &packed->scales[at * scale_bytes(fc.dtype)], scale_bytes(fc.dtype));
          CHECK(bits == w.scales[w.group_index(e, row, g)]);
          if (fc.format == WeightFormat::int4_asym) CHECK(packed->zeros[at] == w.zeros[w.group_index(e, row, g)]);
        }
      }
    }
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
  check_error(pack(w).status(), Code::invalid_argument, {"N = 48", "multiple of 32"});
  w = random_logical(rng, WeightFormat::int4_asym, 32, DType::bf16, 2, 64, 96);
  CHECK(pack(w).ok());
  w = random_logical(rng, WeightFormat::int4_asym, 48, DType::bf16, 2, 64, 48);  // per-channel, K % 32 != 0
  check_error(pack(w).status(), Code::invalid_argument, {"K = 48", "multiple of 32"});
  w = random_logical(rng, WeightFormat::int4_sym, 64, DType::bf16, 2, 64, 96);
  check_error(pack(w).status(), Code::invalid_argument, {"K = 96", "group_size = 64"});
  w = random_logical(rng, WeightFormat::mxfp4, 32, DType::e8m0, 2, 64, 64);
  w.group_size = 64;
  check_error(pack(w).status(), Code::invalid_argument, {"group_size = 64", "mxfp4"});
  w = random_logical(rng, WeightFormat::int4_sym, 32, DType::f16, 2, 64, 64);
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
