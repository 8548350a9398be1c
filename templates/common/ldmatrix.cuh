#pragma once
// ldmatrix.sync.aligned.m8n8.x{1,2,4}{.trans}.shared.b16: each 8x8 matrix of 16-bit elements
// has its 8 rows (16 bytes each) at addresses given by 8 lanes: matrix j by lanes 8j .. 8j+7,
// lane 8j + r giving row r. Lane L receives, for matrix j, register j holding two elements:
//   plain:  row L/4, columns 2(L%4) and 2(L%4)+1      (low half, high half)
//   .trans: column L/4 of rows 2(L%4) and 2(L%4)+1     (the matrix transposed)
// For .x1 and .x2 only the addresses of lanes 0..7 / 0..15 are used.

#include "common/warp.cuh"

namespace moejit::prim {

namespace twin {

// Register `j` of lane `lane` given the row addresses of all lanes.
inline u32 ldmatrix_register(const u8* const (&rows)[32], u32 lane, u32 j, bool trans) {
  auto element = [&](u32 row, u32 col) -> u32 {
    const u8* p = rows[8 * j + row] + 2 * col;
    return static_cast<u32>(p[0]) | static_cast<u32>(p[1]) << 8;
  };
  const u32 a = lane / 4, b = 2 * (lane % 4);
  return trans ? (element(b, a) | element(b + 1, a) << 16) : (element(a, b) | element(a, b + 1) << 16);
}

}  // namespace twin

#if MOEJIT_TARGET_DEVICE

#define MOEJIT_LDMATRIX(NAME, SHAPE, N, REGS, ...)                                            \
  MOEJIT_DEVICE void NAME(u32(&r)[N], const void* row) {                                        \
    asm volatile("ldmatrix.sync.aligned.m8n8." SHAPE ".shared.b16 " REGS ", [%" #N "];"        \
                 : __VA_ARGS__                                                                  \
                 : "r"(static_cast<u32>(__cvta_generic_to_shared(row))));                       \
  }
MOEJIT_LDMATRIX(ldmatrix_x1, "x1", 1, "{%0}", "=r"(r[0]))
MOEJIT_LDMATRIX(ldmatrix_x2, "x2", 2, "{%0,%1}", "=r"(r[0]), "=r"(r[1]))
MOEJIT_LDMATRIX(ldmatrix_x4, "x4", 4, "{%0,%1,%2,%3}", "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]))
MOEJIT_LDMATRIX(ldmatrix_x1_trans, "x1.trans", 1, "{%0}", "=r"(r[0]))
MOEJIT_LDMATRIX(ldmatrix_x2_trans, "x2.trans", 2, "{%0,%1}", "=r"(r[0]), "=r"(r[1]))
MOEJIT_LDMATRIX(ldmatrix_x4_trans, "x4.trans", 4, "{%0,%1,%2,%3}", "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]))
#undef MOEJIT_LDMATRIX

#else

template <u32 N>
MOEJIT_DEVICE void ldmatrix_host(u32 (&r)[N], const void* row, bool trans) {
  // Every lane's row address (the device reads those of lanes 0 .. 8N-1): 16-byte rows in
  // shared memory, 16-byte aligned.
  check_aligned(row, 16, "ldmatrix: row address not 16-byte aligned");
  check_shared(row, 16, "ldmatrix: row address outside the block's shared memory");
  const u8* mine = static_cast<const u8*>(row);
  const u8* rows[32];
  moejit_host_runtime->warp_exchange(0xffffffffu, &mine, rows, sizeof mine);
  const u32 lane = lane_id();
  for (u32 j = 0; j < N; ++j) r[j] = twin::ldmatrix_register(rows, lane, j, trans);
}
MOEJIT_DEVICE void ldmatrix_x1(u32 (&r)[1], const void* row) { ldmatrix_host(r, row, false); }
MOEJIT_DEVICE void ldmatrix_x2(u32 (&r)[2], const void* row) { ldmatrix_host(r, row, false); }
MOEJIT_DEVICE void ldmatrix_x4(u32 (&r)[4], const void* row) { ldmatrix_host(r, row, false); }
MOEJIT_DEVICE void ldmatrix_x1_trans(u32 (&r)[1], const void* row) { ldmatrix_host(r, row, true); }
MOEJIT_DEVICE void ldmatrix_x2_trans(u32 (&r)[2], const void* row) { ldmatrix_host(r, row, true); }
MOEJIT_DEVICE void ldmatrix_x4_trans(u32 (&r)[4], const void* row) { ldmatrix_host(r, row, true); }

#endif

}  // namespace moejit::prim
