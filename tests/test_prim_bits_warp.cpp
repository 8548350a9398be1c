// Host twins of lop3, prmt, broadcast_half and the warp primitives (shfl, match, ballot),
// checked against the PTX ISA's definitions.

#include <doctest/doctest.h>

#include <random>

#include "common/bits.cuh"
#include "common/warp.cuh"

using namespace moejit;
using namespace moejit::prim;

TEST_CASE("lop3: the lookup table is F(0xF0, 0xCC, 0xAA)") {
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 1000; ++i) {
    u32 a = static_cast<u32>(rng()), b = static_cast<u32>(rng()), c = static_cast<u32>(rng());
    CHECK(twin::lop3(a, b, c, 0xF0) == a);
    CHECK(twin::lop3(a, b, c, 0xCC) == b);
    CHECK(twin::lop3(a, b, c, 0xAA) == c);
    CHECK(twin::lop3(a, b, c, (0xF0 & 0xCC) | 0xAA) == ((a & b) | c));
    CHECK(twin::lop3(a, b, c, 0xF0 ^ 0xCC ^ 0xAA) == (a ^ b ^ c));
    CHECK(twin::lop3(a, b, c, (0xF0 & ~0xCC) | (0xCC & 0xAA)) == ((a & ~b) | (b & c)));
    CHECK(lop3<kLutAndOr>(a, b, c) == ((a & b) | c));
  }
}

TEST_CASE("prmt: default mode selects bytes of {b, a} and can replicate sign bits") {
  const u32 a = 0x33221100, b = 0x77665544;
  CHECK(twin::prmt(a, b, 0x3210) == a);
  CHECK(twin::prmt(a, b, 0x7654) == b);
  CHECK(twin::prmt(a, b, 0x5140) == 0x55114400);
  CHECK(twin::prmt(a, b, 0x0123) == 0x00112233);
  // Sign replication: selector bit 3 turns a byte into 0x00 or 0xff by its top bit.
  // a's bytes: 0x00, 0x7f, 0x01, 0x80. Selector 0x3b8b: sign(byte 3), sign(byte 0), sign(byte 3), byte 3.
  CHECK(twin::prmt(0x80017f00u, 0, 0x3b8b) == 0x80ff00ffu);
  CHECK(twin::prmt(0x80017f00u, 0, 0xbbaa) == 0xffff0000u);
  CHECK(prmt(a, b, 0x7362) == 0x77336622);
}

TEST_CASE("broadcast_half: mov.b32 {lo, hi} then {lo, lo} or {hi, hi}") {
  CHECK(twin::broadcast_half(0x3f80c000u, 0) == 0xc000c000u);
  CHECK(twin::broadcast_half(0x3f80c000u, 1) == 0x3f803f80u);
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 1000; ++i) {
    const u32 x = static_cast<u32>(rng());
    const u32 lo = broadcast_half<0>(x), hi = broadcast_half<1>(x);
    CHECK((lo & 0xffffu) == (x & 0xffffu));
    CHECK((lo >> 16) == (x & 0xffffu));
    CHECK((hi & 0xffffu) == (x >> 16));
    CHECK((hi >> 16) == (x >> 16));
  }
}

TEST_CASE("shfl.sync source lanes follow the PTX pseudo-code") {
  using twin::ShflMode;
  for (u32 lane = 0; lane < 32; ++lane) {
    // up with c = 0: lanes below delta keep their own value.
    CHECK(twin::shfl_source(ShflMode::up, lane, 3, 0) == (lane >= 3 ? lane - 3 : lane));
    // down with c = 0x1f: lanes whose source is past 31 keep their own.
    CHECK(twin::shfl_source(ShflMode::down, lane, 5, 0x1f) == (lane + 5 <= 31 ? lane + 5 : lane));
    CHECK(twin::shfl_source(ShflMode::bfly, lane, 6, 0x1f) == (lane ^ 6));
    CHECK(twin::shfl_source(ShflMode::idx, lane, 17, 0x1f) == 17);
    // Segments of 8 (width 8: c = ((32 - 8) << 8) | 0x1f): idx reads within the segment.
    const u32 c8 = ((32 - 8) << 8) | 0x1f;
    CHECK(twin::shfl_source(ShflMode::idx, lane, 3, c8) == (lane & ~7u) + 3);
    CHECK(twin::shfl_source(ShflMode::down, lane, 2, c8) == ((lane & 7) + 2 <= 7 ? lane + 2 : lane));
    CHECK(twin::shfl_source(ShflMode::up, lane, 2, (32 - 8) << 8) == ((lane & 7) >= 2 ? lane - 2 : lane));
  }
}

TEST_CASE("match.any and vote.ballot over the 32 lanes") {
  u32 values[32];
  for (u32 l = 0; l < 32; ++l) values[l] = l % 3;
  const u32 mask_mod0 = 0x49249249u;  // lanes 0, 3, 6, ...
  CHECK(twin::match_any(values, 0xffffffffu, 0) == mask_mod0);
  CHECK(twin::match_any(values, 0xffffffffu, 3) == mask_mod0);
  CHECK(twin::match_any(values, 0xffffffffu, 1) == (mask_mod0 << 1));
  CHECK(twin::match_any(values, 0x0000ffffu, 0) == (mask_mod0 & 0xffffu));
  u32 preds[32];
  for (u32 l = 0; l < 32; ++l) preds[l] = (l % 5 == 0);
  CHECK(twin::ballot(preds, 0xffffffffu) == 0x42108421u);
  CHECK(twin::ballot(preds, 0x000000ffu) == 0x21u);
  CHECK(twin::popc(0x42108421u) == 7);
}

TEST_CASE("bit_length: 1 + the index of the highest set bit, 0 for 0") {
  CHECK(bit_length(0u) == 0);
  CHECK(bit_length(1u) == 1);
  CHECK(bit_length(0x80000000u) == 32);
  CHECK(bit_length(0xffffffffu) == 32);
  CHECK(lowest_set_bit(0x00010000u) == 16);
  std::mt19937 rng(std::random_device{}());
  for (int i = 0; i < 1000; ++i) {
    const u32 x = static_cast<u32>(rng()) >> (rng() % 32);
    u32 expected = 0;
    for (u32 b = 0; b < 32; ++b)
      if ((x >> b) & 1u) expected = b + 1;
    CHECK(bit_length(x) == expected);
  }
}
