// Host twins of mma.sync (m16n8k16 bf16/f16, m16n8k32 e4m3) and ldmatrix, checked lane by lane
// against fragment layouts written out here from the PTX ISA's tables (independently of the
// layout functions in templates/common/mma.cuh).

#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "common/ldmatrix.cuh"
#include "common/mma.cuh"

using namespace moejit;
using namespace moejit::prim;

namespace {

// PTX ISA "Matrix fragments for mma.m16n8k16 with floating point type", A (.f16/.bf16):
//   row = groupID for a0, a1, a4, a5 and groupID + 8 for a2, a3, a6, a7
//   col = threadID_in_group * 2 + (i & 1) for a0..a3, and + 8 for a4..a7
void a16_index(u32 lane, u32 i, u32& row, u32& col) {
  const u32 group = lane >> 2, tig = lane % 4;
  row = (i == 0 || i == 1 || i == 4 || i == 5) ? group : group + 8;
  col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
}
// B (.f16/.bf16): row = threadID_in_group * 2 + (i & 1) for b0, b1 and + 8 for b2, b3; col = groupID
void b16_index(u32 lane, u32 i, u32& row, u32& col) {
  row = (lane % 4) * 2 + (i & 1) + (i >= 2 ? 8 : 0);
  col = lane >> 2;
}
// m16n8k32 .e4m3 A: row = groupID for a0..a3 and a8..a11, groupID + 8 for a4..a7, a12..a15;
// col = threadID_in_group * 4 + (i & 3) for a0..a7, + 16 for a8..a15
void a8_index(u32 lane, u32 i, u32& row, u32& col) {
  const u32 group = lane >> 2, tig = lane % 4;
  row = ((i >= 4 && i < 8) || i >= 12) ? group + 8 : group;
  col = tig * 4 + (i & 3) + (i >= 8 ? 16 : 0);
}
// B .e4m3: row = threadID_in_group * 4 + (i & 3) for b0..b3, + 16 for b4..b7; col = groupID
void b8_index(u32 lane, u32 i, u32& row, u32& col) {
  row = (lane % 4) * 4 + (i & 3) + (i >= 4 ? 16 : 0);
  col = lane >> 2;
}
// C/D (.f32): row = groupID for c0, c1 and groupID + 8 for c2, c3; col = threadID_in_group * 2 + (i & 1)
void c_index(u32 lane, u32 i, u32& row, u32& col) {
  row = (lane >> 2) + (i >= 2 ? 8 : 0);
  col = (lane % 4) * 2 + (i & 1);
}

struct Case16 {
  u16 a[16][16], b[16][8];
  float c[16][8];
};

template <typename Decode>
void check_mma16(twin::MmaInput in, Decode decode, std::mt19937& rng) {
  Case16 m;
  std::uniform_real_distribution<float> dist(-4, 4);
  for (auto& row : m.a)
    for (auto& v : row) v = in == twin::MmaInput::bf16 ? twin::f32_to_bf16(dist(rng)) : twin::f32_to_f16(dist(rng));
  for (auto& row : m.b)
    for (auto& v : row) v = in == twin::MmaInput::bf16 ? twin::f32_to_bf16(dist(rng)) : twin::f32_to_f16(dist(rng));
  for (auto& row : m.c)
    for (auto& v : row) v = dist(rng);
  twin::MmaLane lanes[32];
  for (u32 l = 0; l < 32; ++l) {
    for (u32 i = 0; i < 8; ++i) {
      u32 r, c;
      a16_index(l, i, r, c);
      lanes[l].a[i / 2] = (i % 2) ? (lanes[l].a[i / 2] | static_cast<u32>(m.a[r][c]) << 16) : m.a[r][c];
    }
    for (u32 i = 0; i < 4; ++i) {
      u32 r, c;
      b16_index(l, i, r, c);
      lanes[l].b[i / 2] = (i % 2) ? (lanes[l].b[i / 2] | static_cast<u32>(m.b[r][c]) << 16) : m.b[r][c];
    }
    for (u32 i = 0; i < 4; ++i) {
      u32 r, c;
      c_index(l, i, r, c);
      lanes[l].c[i] = m.c[r][c];
    }
  }
  for (u32 l = 0; l < 32; ++l) {
    float d[4];
    twin::mma_m16n8_lane(in, lanes, l, d);
    for (u32 i = 0; i < 4; ++i) {
      u32 r, c;
      c_index(l, i, r, c);
      double expected = m.c[r][c];
      for (u32 k = 0; k < 16; ++k) expected += static_cast<double>(decode(m.a[r][k])) * decode(m.b[k][c]);
      CAPTURE(l);
      CAPTURE(i);
      CHECK(d[i] == static_cast<float>(expected));
    }
  }
}

}  // namespace

TEST_CASE("mma.m16n8k16 bf16 and f16 twins: every lane's D from the PTX fragment layouts") {
  std::mt19937 rng(std::random_device{}());
  for (int rep = 0; rep < 20; ++rep) {
    check_mma16(twin::MmaInput::bf16, [](u16 h) { return twin::bf16_to_f32(h); }, rng);
    check_mma16(twin::MmaInput::f16, [](u16 h) { return twin::f16_to_f32(h); }, rng);
  }
}

TEST_CASE("mma.m16n8k32 e4m3 twin: every lane's D from the PTX fragment layouts") {
  std::mt19937 rng(std::random_device{}());
  for (int rep = 0; rep < 20; ++rep) {
    u8 a[16][32], b[32][8];
    float c[16][8];
    for (auto& row : a)
      for (auto& v : row) v = static_cast<u8>(rng() & 0x7e);  // finite e4m3 values, both signs
    for (auto& row : b)
      for (auto& v : row) v = static_cast<u8>((rng() & 0x7e) | (rng() & 0x80));
    for (auto& row : c)
      for (auto& v : row) v = static_cast<float>(rng() % 100) - 50;
    twin::MmaLane lanes[32] = {};
    for (u32 l = 0; l < 32; ++l) {
      for (u32 i = 0; i < 16; ++i) {
        u32 r, col;
        a8_index(l, i, r, col);
        lanes[l].a[i / 4] |= static_cast<u32>(a[r][col]) << (8 * (i % 4));
      }
      for (u32 i = 0; i < 8; ++i) {
        u32 r, col;
        b8_index(l, i, r, col);
        lanes[l].b[i / 4] |= static_cast<u32>(b[r][col]) << (8 * (i % 4));
      }
      for (u32 i = 0; i < 4; ++i) {
        u32 r, col;
        c_index(l, i, r, col);
        lanes[l].c[i] = c[r][col];
      }
    }
    for (u32 l = 0; l < 32; ++l) {
      float d[4];
      twin::mma_m16n8_lane(twin::MmaInput::e4m3, lanes, l, d);
      for (u32 i = 0; i < 4; ++i) {
        u32 r, col;
        c_index(l, i, r, col);
        double expected = c[r][col];
        for (u32 k = 0; k < 32; ++k)
          expected += static_cast<double>(twin::e4m3_to_f32(a[r][k])) * twin::e4m3_to_f32(b[k][col]);
        CHECK(d[i] == static_cast<float>(expected));
      }
    }
  }
}

TEST_CASE("ldmatrix x1/x2/x4 and .trans twins: lane by lane") {
  // Four 8x8 matrices of 16-bit elements, element (j, r, c) = 0x1000 * j + 0x100 * r + c,
  // each row at its own (non-contiguous) address, as shared memory rows with padding would be.
  u8 memory[4][8][32] = {};
  const u8* rows[32];
  for (u32 j = 0; j < 4; ++j)
    for (u32 r = 0; r < 8; ++r) {
      for (u32 c = 0; c < 8; ++c) {
        const u16 v = static_cast<u16>(0x1000 * j + 0x100 * r + c);
        memory[j][r][2 * c] = static_cast<u8>(v);
        memory[j][r][2 * c + 1] = static_cast<u8>(v >> 8);
      }
      rows[8 * j + r] = memory[j][r];  // lane 8j + r gives row r of matrix j
    }
  auto element = [](u32 j, u32 r, u32 c) { return 0x1000 * j + 0x100 * r + c; };
  for (u32 lane = 0; lane < 32; ++lane) {
    for (u32 j = 0; j < 4; ++j) {
      // PTX ISA figure "ldmatrix fragment": thread lane holds row lane/4, elements 2(lane%4) and +1.
      const u32 plain = element(j, lane / 4, 2 * (lane % 4)) | element(j, lane / 4, 2 * (lane % 4) + 1) << 16;
      const u32 trans = element(j, 2 * (lane % 4), lane / 4) | element(j, 2 * (lane % 4) + 1, lane / 4) << 16;
      CHECK(twin::ldmatrix_register(rows, lane, j, false) == plain);
      CHECK(twin::ldmatrix_register(rows, lane, j, true) == trans);
    }
  }
}
