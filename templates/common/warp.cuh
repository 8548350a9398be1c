#pragma once
// Warp-level primitives: lane identity, shuffles, votes, matching, bit counts. Each host twin is
// one warp_exchange plus a pure function of the 32 lanes' values (namespace twin), written from
// the PTX ISA's pseudo-code so that it can be tested lane by lane without the executor.

#include "common/platform.cuh"

namespace moejit::prim {

// --- Pure lane-array semantics (the host twins' core) -------------------------------------
namespace twin {

enum class ShflMode : u32 { up, down, bfly, idx };

// shfl.sync.mode.b32 d, a, b, c: the source lane of `lane`, or `lane` itself when the source
// is out of the segment (PTX ISA, shfl.sync pseudo-code).
constexpr u32 shfl_source(ShflMode mode, u32 lane, u32 b, u32 c) {
  const u32 bval = b & 31, cval = c & 31, segmask = (c >> 8) & 31;
  const u32 max_lane = (lane & segmask) | (cval & ~segmask);
  const u32 min_lane = lane & segmask;
  i32 j = 0;
  bool in_range = false;
  switch (mode) {
    case ShflMode::up:
      j = static_cast<i32>(lane) - static_cast<i32>(bval);
      in_range = j >= static_cast<i32>(max_lane);
      break;
    case ShflMode::down:
      j = static_cast<i32>(lane + bval);
      in_range = j <= static_cast<i32>(max_lane);
      break;
    case ShflMode::bfly:
      j = static_cast<i32>(lane ^ bval);
      in_range = j <= static_cast<i32>(max_lane);
      break;
    case ShflMode::idx:
      j = static_cast<i32>(min_lane | (bval & ~segmask));
      in_range = j <= static_cast<i32>(max_lane);
      break;
  }
  return in_range ? static_cast<u32>(j) : lane;
}

constexpr u32 popc(u32 x) {
  u32 n = 0;
  for (; x != 0; x &= x - 1) ++n;
  return n;
}

// match.any.sync.b32: lanes of `mask` whose value equals lane `lane`'s.
constexpr u32 match_any(const u32 (&values)[32], u32 mask, u32 lane) {
  u32 peers = 0;
  for (u32 l = 0; l < 32; ++l)
    if ((mask >> l & 1u) && values[l] == values[lane]) peers |= 1u << l;
  return peers;
}

// vote.sync.ballot.b32: bit l set when lane l of `mask` has a true predicate.
constexpr u32 ballot(const u32 (&preds)[32], u32 mask) {
  u32 bits = 0;
  for (u32 l = 0; l < 32; ++l)
    if ((mask >> l & 1u) && preds[l] != 0) bits |= 1u << l;
  return bits;
}

}  // namespace twin

#if MOEJIT_TARGET_DEVICE

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

MOEJIT_DEVICE u32 match_any(u32 value, u32 mask = 0xffffffffu) {
  u32 peers;
  asm volatile("match.any.sync.b32 %0, %1, %2;" : "=r"(peers) : "r"(value), "r"(mask));
  return peers;
}

MOEJIT_DEVICE u32 ballot(bool pred, u32 mask = 0xffffffffu) {
  u32 bits;
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.u32 p, %1, 0;\n vote.sync.ballot.b32 %0, p, %2;\n}"
      : "=r"(bits)
      : "r"(static_cast<u32>(pred)), "r"(mask));
  return bits;
}

// shfl.sync with c = 0 for up (segment of 32, clamp at lane 0) and c = 0x1f otherwise.
MOEJIT_DEVICE u32 shfl_up(u32 value, u32 delta, u32 mask = 0xffffffffu) {
  u32 out;
  asm volatile("shfl.sync.up.b32 %0, %1, %2, 0x0, %3;" : "=r"(out) : "r"(value), "r"(delta), "r"(mask));
  return out;
}
MOEJIT_DEVICE u32 shfl_down(u32 value, u32 delta, u32 mask = 0xffffffffu) {
  u32 out;
  asm volatile("shfl.sync.down.b32 %0, %1, %2, 0x1f, %3;" : "=r"(out) : "r"(value), "r"(delta), "r"(mask));
  return out;
}
MOEJIT_DEVICE u32 shfl_xor(u32 value, u32 lane_mask, u32 mask = 0xffffffffu) {
  u32 out;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, %3;" : "=r"(out) : "r"(value), "r"(lane_mask), "r"(mask));
  return out;
}
MOEJIT_DEVICE u32 shfl_idx(u32 value, u32 src_lane, u32 mask = 0xffffffffu) {
  u32 out;
  asm volatile("shfl.sync.idx.b32 %0, %1, %2, 0x1f, %3;" : "=r"(out) : "r"(value), "r"(src_lane), "r"(mask));
  return out;
}

#else

MOEJIT_DEVICE u32 linear_thread() {
  const host::ThreadState& s = self();
  return s.thread_idx.x + s.block_dim.x * (s.thread_idx.y + s.block_dim.y * s.thread_idx.z);
}
MOEJIT_DEVICE u32 lane_id() { return linear_thread() % 32; }
MOEJIT_DEVICE u32 lanemask_lt() { return (1u << lane_id()) - 1u; }
MOEJIT_DEVICE u32 popc(u32 x) { return twin::popc(x); }

// All 32 lanes' `value` (zero for lanes outside `mask`).
MOEJIT_DEVICE void gather_lanes(u32 value, u32 mask, u32 (&all)[32]) {
  moejit_host_runtime->warp_exchange(mask, &value, all, sizeof(u32));
}

MOEJIT_DEVICE u32 match_any(u32 value, u32 mask = 0xffffffffu) {
  u32 all[32];
  gather_lanes(value, mask, all);
  return twin::match_any(all, mask, lane_id());
}
MOEJIT_DEVICE u32 ballot(bool pred, u32 mask = 0xffffffffu) {
  u32 all[32];
  gather_lanes(pred ? 1u : 0u, mask, all);
  return twin::ballot(all, mask);
}
MOEJIT_DEVICE u32 shfl(twin::ShflMode mode, u32 value, u32 b, u32 c, u32 mask) {
  u32 all[32];
  gather_lanes(value, mask, all);
  return all[twin::shfl_source(mode, lane_id(), b, c)];
}
MOEJIT_DEVICE u32 shfl_up(u32 value, u32 delta, u32 mask = 0xffffffffu) {
  return shfl(twin::ShflMode::up, value, delta, 0x0, mask);
}
MOEJIT_DEVICE u32 shfl_down(u32 value, u32 delta, u32 mask = 0xffffffffu) {
  return shfl(twin::ShflMode::down, value, delta, 0x1f, mask);
}
MOEJIT_DEVICE u32 shfl_xor(u32 value, u32 lane_mask, u32 mask = 0xffffffffu) {
  return shfl(twin::ShflMode::bfly, value, lane_mask, 0x1f, mask);
}
MOEJIT_DEVICE u32 shfl_idx(u32 value, u32 src_lane, u32 mask = 0xffffffffu) {
  return shfl(twin::ShflMode::idx, value, src_lane, 0x1f, mask);
}

#endif

// Index of the lowest set bit of a non-zero word.
MOEJIT_DEVICE u32 lowest_set_bit(u32 x) { return popc((x & (0u - x)) - 1u); }

// 1 + the index of the highest set bit (0 for 0): the bits below it smeared down and counted.
MOEJIT_DEVICE u32 bit_length(u32 x) {
  x |= x >> 1;
  x |= x >> 2;
  x |= x >> 4;
  x |= x >> 8;
  x |= x >> 16;
  return popc(x);
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
