#pragma once
// Warp-level MMA with block scaling (sm_120a / sm_121a). PTX ISA (8.7+, "Block Scaling for
// mma.sync" and the m16n8k32 / m16n8k64 fragment sections):
//   mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.{e2m1,e4m3}.f32.ue8m0
//   mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0
// D (16x8, f32) = (A * scale_A) (B * scale_B) + C, with ue8m0 scales (2^(e - 127), 0xFF NaN):
// one per row of A and per column of B for k32 (1X), one per row or column and 32 k for k64 (2X).
// Fragments per lane L (g = L / 4, t = L % 4):
//   k32 A: 4 registers of 4 bytes (e4m3), element i = 4 * reg + byte:
//     row = g + 8 * ((i / 4) % 2), col = 4t + i % 4 + 16 * (i / 8)
//   k32 B: 2 registers of 4 bytes, element i: row (k) = 4t + i % 4 + 16 * (i / 4), col = g;
//     e4m3 bytes, or e2m1 values in bits 2..5 of their byte (the 8-bit container; the other bits 0)
//   k64 A: 4 registers of 8 nibbles (e2m1, element 0 in the low nibble), element i = 8 * reg + nibble:
//     row = g + 8 * ((i / 8) % 2), col = 8t + i % 8 + 32 * (i / 16)
//   k64 B: 2 registers of 8 nibbles, element i: row (k) = 8t + i % 8 + 32 * (i / 8), col = g
//   C/D: as for every m16n8 mma (common/mma.cuh)
// Scales: the selectors pick, in each quad, the lanes that give them and the byte(s) of their
// scale register. A: thread-id-a 0 takes lanes 4q and 4q + 1, 1 takes 4q + 2 and 4q + 3; of the
// pair, the lower lane gives row q and the upper row q + 8. B: lane 4n + thread-id-b gives column
// n. 1X reads byte byte-id; 2X reads bytes byte-id (k 0..31) and byte-id + 1 (k 32..63), byte-id 0
// or 2. (The ISA's text names the pairs and bytes; which lane of a pair gives which row, and which
// byte which k block, are its figures', and CUTLASS's SM120 layouts agree.)
// The twin multiplies exactly and sums each output in double, rounding once to f32; the ISA
// leaves the hardware's order and intermediate precision unspecified.

#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "common/warp.cuh"

namespace moejit::prim {

#if MOEJIT_TARGET_HOST

namespace twin {

// E2M1: sign, 2 exponent bits (bias 1), 1 mantissa bit; 0, 0.5, 1, 1.5, 2, 3, 4, 6.
constexpr double e2m1_value(u32 code) {
  constexpr double kMagnitude[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (code & 8u) ? -kMagnitude[code & 7u] : kMagnitude[code & 7u];
}

// ue8m0: 2^(e - 127), 0xFF NaN.
inline double ue8m0_value(u32 code) {
  const u32 e = code & 0xffu;
  if (e == 0xffu) return __builtin_nan("");
  return __builtin_bit_cast(double, static_cast<u64>(e - 127 + 1023) << 52);
}

enum class BlockScaleKind : u32 { mxf8f6f4_e4m3_e2m1, mxf8f6f4_e4m3_e4m3, mxf4 };

// One lane's operands.
struct BlockScaleLane {
  u32 a[4];
  u32 b[2];
  float c[4];
  u32 scale_a, scale_b;
};

struct BlockScaleSelect {
  u32 byte_a, thread_a, byte_b, thread_b;
};

// k32 places its bytes as the e4m3 mma does (common/mma.cuh); k64 places nibbles.
constexpr RowCol block_scale_a_position(BlockScaleKind kind, u32 lane, u32 i) {
  if (kind != BlockScaleKind::mxf4) return mma_a_position(MmaInput::e4m3, lane, i);
  const u32 g = lane / 4, t = lane % 4;
  return {g + 8 * ((i / 8) % 2), 8 * t + i % 8 + 32 * (i / 16)};
}
constexpr RowCol block_scale_b_position(BlockScaleKind kind, u32 lane, u32 i) {
  if (kind != BlockScaleKind::mxf4) return mma_b_position(MmaInput::e4m3, lane, i);
  const u32 g = lane / 4, t = lane % 4;
  return {8 * t + i % 8 + 32 * (i / 8), g};
}

// The lane whose scale register scales row `row` of A / column `col` of B.
constexpr u32 block_scale_a_lane(u32 row, u32 thread_a) { return 4 * (row % 8) + 2 * thread_a + row / 8; }
constexpr u32 block_scale_b_lane(u32 col, u32 thread_b) { return 4 * col + thread_b; }

// D of lane `lane` = (g, t): rows g and g + 8 of A, columns 2t and 2t + 1 of B, and the lanes
// holding their scales.
inline void block_scale_mma_lane(BlockScaleKind kind, BlockScaleSelect sel, const BlockScaleLane (&lanes)[32], u32 lane,
                                 float (&d)[4]) {
  const bool k64 = kind == BlockScaleKind::mxf4;
  const u32 k = k64 ? 64 : 32, per_reg = k64 ? 8 : 4;
  const u32 g = lane / 4, t = lane % 4;
  double a[2][64] = {}, b[2][64] = {};  // A rows g, g + 8; B columns 2t, 2t + 1
  for (u32 q = 0; q < 32; ++q) {
    for (u32 i = 0; i < 4 * per_reg; ++i) {
      const RowCol p = block_scale_a_position(kind, q, i);
      if (p.row % 8 != g) continue;
      const u32 reg = lanes[q].a[i / per_reg];
      a[p.row / 8][p.col] = k64 ? e2m1_value(reg >> (4 * (i % 8))) : e4m3_to_f32(static_cast<u8>(reg >> (8 * (i % 4))));
    }
    for (u32 i = 0; i < 2 * per_reg; ++i) {
      const RowCol p = block_scale_b_position(kind, q, i);
      if (p.col / 2 != t) continue;
      const u32 reg = lanes[q].b[i / per_reg];
      if (kind == BlockScaleKind::mxf8f6f4_e4m3_e4m3)
        b[p.col % 2][p.row] = e4m3_to_f32(static_cast<u8>(reg >> (8 * (i % 4))));
      else
        b[p.col % 2][p.row] = e2m1_value(reg >> (k64 ? 4 * (i % 8) : 8 * (i % 4) + 2));
    }
  }
  for (u32 i = 0; i < 4; ++i) {
    const u32 row = g + 8 * (i / 2), col = 2 * t + i % 2;
    const u32 sa = lanes[block_scale_a_lane(row, sel.thread_a)].scale_a;
    const u32 sb = lanes[block_scale_b_lane(col, sel.thread_b)].scale_b;
    double sum = lanes[lane].c[i];
    for (u32 kk = 0; kk < k; ++kk) {
      const u32 block = kk / 32;  // 1X: one block of 32
      const double scale_a = ue8m0_value(sa >> (8 * (sel.byte_a + block)));
      const double scale_b = ue8m0_value(sb >> (8 * (sel.byte_b + block)));
      sum += (a[i / 2][kk] * scale_a) * (b[i % 2][kk] * scale_b);
    }
    d[i] = static_cast<float>(sum);
  }
}

}  // namespace twin

// The host executor's warp: every lane's operands, then the twin.
MOEJIT_DEVICE void block_scale_mma_host(twin::BlockScaleKind kind, twin::BlockScaleSelect sel, float (&d)[4],
                                        const u32 (&a)[4], const u32 (&b)[2], const float (&c)[4], u32 scale_a,
                                        u32 scale_b) {
  twin::BlockScaleLane mine{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}, {c[0], c[1], c[2], c[3]}, scale_a, scale_b};
  twin::BlockScaleLane lanes[32];
  static_assert(sizeof(twin::BlockScaleLane) <= host::kMaxExchangeBytes);
  moejit_host_runtime->warp_exchange(0xffffffffu, &mine, lanes, sizeof mine);
  twin::block_scale_mma_lane(kind, sel, lanes, lane_id(), d);
}

#endif

// The native instructions exist on sm_120a and sm_121a only; other device targets trap, and
// kernels take these paths only for those two (and say so at compile time: GemmShape). CUDA 12.9
// and later name the target in __CUDA_ARCH_SPECIFIC__ (1200 / 1210); 12.8, which compiles
// sm_120a too, defines only __CUDA_ARCH_FEAT_SM120_ALL (13.0 defines both).
#if (defined(__CUDA_ARCH_SPECIFIC__) && (__CUDA_ARCH_SPECIFIC__ == 1200 || __CUDA_ARCH_SPECIFIC__ == 1210)) || \
    defined(__CUDA_ARCH_FEAT_SM120_ALL) || defined(__CUDA_ARCH_FEAT_SM121_ALL)
#define MOEJIT_HAS_BLOCK_SCALE_MMA 1
#else
#define MOEJIT_HAS_BLOCK_SCALE_MMA 0
#endif

// The operands every block-scaled mma.sync takes, in the order of the PTX form: D, A, B, C, the
// scale registers of A and B, each with its {byte-id, thread-id} selector (immediates).
#define MOEJIT_BLOCK_SCALE_MMA_ASM(INSTRUCTION)                                                                \
  asm volatile(INSTRUCTION                                                                                   \
               " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%11,%12,%13}, %14, {%16, %17}, %15, {%18, %19};"  \
               : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])                                             \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),    \
                 "f"(c[2]), "f"(c[3]), "r"(scale_a), "r"(scale_b), "n"(kByteA), "n"(kThreadA), "n"(kByteB), \
                 "n"(kThreadB))

// e4m3 A x e2m1 B (each in bits 2..5 of its byte), one ue8m0 scale per row of A and column of B.
template <u32 kByteA, u32 kThreadA, u32 kByteB, u32 kThreadB>
MOEJIT_DEVICE void mma_m16n8k32_e4m3_e2m1_block_scale(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2],
                                                      const float (&c)[4], u32 scale_a, u32 scale_b) {
  static_assert(kByteA < 4 && kThreadA < 2 && kByteB < 4 && kThreadB < 4, "1X selectors: byte 0..3, thread A 0..1, B 0..3");
#if MOEJIT_TARGET_HOST
  block_scale_mma_host(twin::BlockScaleKind::mxf8f6f4_e4m3_e2m1, {kByteA, kThreadA, kByteB, kThreadB}, d, a, b, c,
                       scale_a, scale_b);
#elif MOEJIT_HAS_BLOCK_SCALE_MMA
  MOEJIT_BLOCK_SCALE_MMA_ASM(
      "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e2m1.f32.ue8m0");
#else
  trap("mma.kind::mxf8f6f4.block_scale needs sm_120a or sm_121a");
#endif
}

// e4m3 A x e4m3 B, one ue8m0 scale per row of A and column of B: the same instruction kind and
// rate as e4m3 x e2m1, for B registers already in e4m3 (the grouped GEMM's a8 weight order).
template <u32 kByteA, u32 kThreadA, u32 kByteB, u32 kThreadB>
MOEJIT_DEVICE void mma_m16n8k32_e4m3_e4m3_block_scale(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2],
                                                      const float (&c)[4], u32 scale_a, u32 scale_b) {
  static_assert(kByteA < 4 && kThreadA < 2 && kByteB < 4 && kThreadB < 4, "1X selectors: byte 0..3, thread A 0..1, B 0..3");
#if MOEJIT_TARGET_HOST
  block_scale_mma_host(twin::BlockScaleKind::mxf8f6f4_e4m3_e4m3, {kByteA, kThreadA, kByteB, kThreadB}, d, a, b, c,
                       scale_a, scale_b);
#elif MOEJIT_HAS_BLOCK_SCALE_MMA
  MOEJIT_BLOCK_SCALE_MMA_ASM(
      "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0");
#else
  trap("mma.kind::mxf8f6f4.block_scale needs sm_120a or sm_121a");
#endif
}

// e2m1 x e2m1, packed 8 per register; two ue8m0 scales per row of A and column of B (bytes
// kByteA and kByteA + 1: k 0..31 and 32..63).
template <u32 kByteA, u32 kThreadA, u32 kByteB, u32 kThreadB>
MOEJIT_DEVICE void mma_m16n8k64_e2m1_block_scale(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2],
                                                 const float (&c)[4], u32 scale_a, u32 scale_b) {
  static_assert((kByteA == 0 || kByteA == 2) && kThreadA < 2 && (kByteB == 0 || kByteB == 2) && kThreadB < 4,
                "2X selectors: byte 0 or 2, thread A 0..1, B 0..3");
#if MOEJIT_TARGET_HOST
  block_scale_mma_host(twin::BlockScaleKind::mxf4, {kByteA, kThreadA, kByteB, kThreadB}, d, a, b, c, scale_a, scale_b);
#elif MOEJIT_HAS_BLOCK_SCALE_MMA
  MOEJIT_BLOCK_SCALE_MMA_ASM(
      "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0");
#else
  trap("mma.kind::mxf4.block_scale needs sm_120a or sm_121a");
#endif
}

#undef MOEJIT_BLOCK_SCALE_MMA_ASM

}  // namespace moejit::prim
