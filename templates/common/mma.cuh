#pragma once
// Warp-level matrix multiply-accumulate on tensor cores. PTX ISA:
//   mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (and .f16.f16), sm_80+
//   mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32, sm_89+
// D (16x8, f32) = A (16xK, row) * B (Kx8, col) + C. Fragments per lane L, with
// g = L / 4 ("groupID") and t = L % 4 ("threadID_in_group"), as the PTX ISA lays them out:
//   16-bit A, 4 registers of 2 halves, element i = 2 * reg + half (0..7):
//     row = g + 8 * ((i / 2) % 2), col = 2t + i % 2 + 8 * (i / 4)
//   16-bit B, 2 registers, element i (0..3): row (k) = 2t + i % 2 + 8 * (i / 2), col = g
//   e4m3 A, 4 registers of 4 bytes, element i = 4 * reg + byte (0..15):
//     row = g + 8 * ((i / 4) % 2), col = 4t + i % 4 + 16 * (i / 8)
//   e4m3 B, 2 registers, element i (0..7): row (k) = 4t + i % 4 + 16 * (i / 4), col = g
//   C/D f32, 4 values, element i: row = g + 8 * (i / 2), col = 2t + i % 2
// The twin multiplies exactly and sums each output in double, rounding once to f32. The PTX
// ISA leaves the order and intermediate precision of the hardware's sum unspecified, so device
// results may differ from the twin in the low bits of f32.

#include "common/numeric.cuh"
#include "common/warp.cuh"

namespace moejit::prim {

namespace twin {

enum class MmaInput : u32 { bf16, f16, e4m3 };

struct RowCol {
  u32 row, col;
};

constexpr RowCol mma_a_position(MmaInput in, u32 lane, u32 i) {
  const u32 g = lane / 4, t = lane % 4;
  if (in == MmaInput::e4m3) return {g + 8 * ((i / 4) % 2), 4 * t + i % 4 + 16 * (i / 8)};
  return {g + 8 * ((i / 2) % 2), 2 * t + i % 2 + 8 * (i / 4)};
}
constexpr RowCol mma_b_position(MmaInput in, u32 lane, u32 i) {
  const u32 g = lane / 4, t = lane % 4;
  if (in == MmaInput::e4m3) return {4 * t + i % 4 + 16 * (i / 4), g};
  return {2 * t + i % 2 + 8 * (i / 2), g};
}

inline double mma_element(MmaInput in, u32 reg, u32 index) {
  if (in == MmaInput::e4m3) return e4m3_to_f32(static_cast<u8>(reg >> (8 * index)));
  const u16 h = static_cast<u16>(reg >> (16 * index));
  return in == MmaInput::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
}

// The fragments one lane holds.
struct MmaLane {
  u32 a[4];
  u32 b[2];
  float c[4];
};

// D of lane `lane` = (g, t): rows g and g + 8 of A, held by the lanes of quad g (4g .. 4g + 3),
// and columns 2t and 2t + 1 of B, held by quads 2t and 2t + 1; only those lanes are read.
inline void mma_m16n8_lane(MmaInput in, const MmaLane (&lanes)[32], u32 lane, float (&d)[4]) {
  const u32 k = in == MmaInput::e4m3 ? 32 : 16;
  const u32 per_reg = in == MmaInput::e4m3 ? 4 : 2;
  const u32 g = lane / 4, t = lane % 4;
  double a[2][32] = {}, b[2][32] = {};  // A rows g, g + 8; B columns 2t, 2t + 1
  for (u32 q = 4 * g; q < 4 * g + 4; ++q)
    for (u32 i = 0; i < 4 * per_reg; ++i) {
      const RowCol p = mma_a_position(in, q, i);
      a[p.row / 8][p.col] = mma_element(in, lanes[q].a[i / per_reg], i % per_reg);
    }
  for (u32 half = 0; half < 2; ++half)
    for (u32 q = 4 * (2 * t + half); q < 4 * (2 * t + half) + 4; ++q)
      for (u32 i = 0; i < 2 * per_reg; ++i)
        b[half][mma_b_position(in, q, i).row] = mma_element(in, lanes[q].b[i / per_reg], i % per_reg);
  for (u32 i = 0; i < 4; ++i) {
    double sum = lanes[lane].c[i];
    for (u32 kk = 0; kk < k; ++kk) sum += a[i / 2][kk] * b[i % 2][kk];
    d[i] = static_cast<float>(sum);
  }
}

}  // namespace twin

#if MOEJIT_TARGET_DEVICE

MOEJIT_DEVICE void mma_m16n8k16_bf16(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2],
                                     const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%11,%12,%13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
}

MOEJIT_DEVICE void mma_m16n8k16_f16(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2],
                                    const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%11,%12,%13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
}

MOEJIT_DEVICE void mma_m16n8k32_e4m3(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2],
                                     const float (&c)[4]) {
#if __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%11,%12,%13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#else
  trap("mma.m16n8k32.e4m3 needs sm_89 or newer");
#endif
}

#else

MOEJIT_DEVICE void mma_host(twin::MmaInput in, float (&d)[4], const u32 (&a)[4], const u32 (&b)[2],
                            const float (&c)[4]) {
  twin::MmaLane mine{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}, {c[0], c[1], c[2], c[3]}};
  twin::MmaLane lanes[32];
  static_assert(sizeof(twin::MmaLane) <= host::kMaxExchangeBytes);
  moejit_host_runtime->warp_exchange(0xffffffffu, &mine, lanes, sizeof mine);
  twin::mma_m16n8_lane(in, lanes, lane_id(), d);
}

MOEJIT_DEVICE void mma_m16n8k16_bf16(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2],
                                     const float (&c)[4]) {
  mma_host(twin::MmaInput::bf16, d, a, b, c);
}
MOEJIT_DEVICE void mma_m16n8k16_f16(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2],
                                    const float (&c)[4]) {
  mma_host(twin::MmaInput::f16, d, a, b, c);
}
MOEJIT_DEVICE void mma_m16n8k32_e4m3(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2],
                                     const float (&c)[4]) {
  mma_host(twin::MmaInput::e4m3, d, a, b, c);
}

#endif

}  // namespace moejit::prim
