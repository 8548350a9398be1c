#pragma once
// Warp-level primitives: lane identity, matching, shuffles, bit counts.

#include "common/platform.cuh"

namespace moejit::prim {

MOEJIT_DEVICE u32 lane_id() {
  u32 lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

// Bit i set for every lane i lower than the calling lane.
MOEJIT_DEVICE u32 lanemask_lt() {
  u32 mask;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(mask));
  return mask;
}

MOEJIT_DEVICE u32 popc(u32 x) {
  u32 n;
  asm("popc.b32 %0, %1;" : "=r"(n) : "r"(x));
  return n;
}

// match.any.sync.b32: the lanes of `mask` whose `value` equals the calling lane's.
MOEJIT_DEVICE u32 match_any(u32 value, u32 mask = 0xffffffffu) {
  u32 peers;
  asm volatile("match.any.sync.b32 %0, %1, %2;" : "=r"(peers) : "r"(value), "r"(mask));
  return peers;
}

// shfl.sync.up.b32: the value of lane (lane - delta); lanes below `delta` keep their own.
MOEJIT_DEVICE u32 shfl_up(u32 value, u32 delta, u32 mask = 0xffffffffu) {
  u32 out;
  asm volatile("shfl.sync.up.b32 %0, %1, %2, 0x0, %3;"
               : "=r"(out)
               : "r"(value), "r"(delta), "r"(mask));
  return out;
}

// Inclusive prefix sum over the 32 lanes of a full warp.
MOEJIT_DEVICE u32 warp_inclusive_sum(u32 value) {
  const u32 lane = lane_id();
  for (u32 delta = 1; delta < 32; delta <<= 1) {
    u32 other = shfl_up(value, delta);
    if (lane >= delta) value += other;
  }
  return value;
}

}  // namespace moejit::prim
