#pragma once
// Asynchronous global -> shared copies. PTX ISA: cp.async.{ca,cg}.shared.global [dst], [src],
// 16, src_size (bytes past src_size are zero-filled; .cg bypasses L1; .ca also copies 4 or 8
// bytes, used for one f32 per row), cp.async.commit_group,
// cp.async.wait_group N (all but the newest N committed groups complete), cp.async.wait_all.
// Host twin: copies are queued and performed by the wait that completes their group, so a
// kernel that reads shared memory before the right wait reads poison.
//
// L2 eviction priority (sm_80+): createpolicy.fractional.L2::evict_first.b64 policy, 1.0 makes
// an opaque 64-bit cache policy; cp.async.cg.shared.global.L2::cache_hint [dst], [src], 16,
// src_size, policy copies as cp.async.cg does, and the lines it brings into L2 are the first
// evicted. For data streamed once per launch (the MoE weight stream), so that it does not push
// out of L2 what is reused (activations, scales, routing). The hint changes caching only, never
// the bytes copied; the host twin is the same queued copy as cp_async_cg_16 and its policy is a
// placeholder value.

#include "common/platform.cuh"

namespace moejit::prim {

// An L2 cache eviction policy (the opaque operand of .L2::cache_hint). Create it once per thread,
// outside the main loop (one instruction), and pass it to every hinted copy.
struct L2Policy {
  u64 bits;
};

#if MOEJIT_TARGET_DEVICE

// 16 bytes, cached in L1 and L2; `src_bytes` (0..16) real bytes, the rest zero.
MOEJIT_DEVICE void cp_async_ca_16(void* smem, const void* gmem, u32 src_bytes = 16) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(
                   static_cast<u32>(__cvta_generic_to_shared(smem))),
               "l"(gmem), "r"(src_bytes)
               : "memory");
}

// 4 bytes (both addresses 4-byte aligned), cached in L1 and L2; `src_bytes` 0 or 4 (0: zero,
// nothing read).
MOEJIT_DEVICE void cp_async_ca_4(void* smem, const void* gmem, u32 src_bytes = 4) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(
                   static_cast<u32>(__cvta_generic_to_shared(smem))),
               "l"(gmem), "r"(src_bytes)
               : "memory");
}

// 16 bytes, cached in L2 only (streaming data read once per block).
MOEJIT_DEVICE void cp_async_cg_16(void* smem, const void* gmem, u32 src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                   static_cast<u32>(__cvta_generic_to_shared(smem))),
               "l"(gmem), "r"(src_bytes)
               : "memory");
}

// Every line the policy is applied to gets eviction priority evict_first (fraction 1.0).
MOEJIT_DEVICE L2Policy l2_evict_first_policy() {
  L2Policy p;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p.bits));
  return p;
}

// cp_async_cg_16 whose L2 lines follow `policy` (l2_evict_first_policy for streamed data).
MOEJIT_DEVICE void cp_async_cg_16_hint(void* smem, const void* gmem, L2Policy policy, u32 src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(
                   static_cast<u32>(__cvta_generic_to_shared(smem))),
               "l"(gmem), "r"(src_bytes), "l"(policy.bits)
               : "memory");
}

MOEJIT_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <u32 kPending>
MOEJIT_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

#else

MOEJIT_DEVICE void cp_async_ca_16(void* smem, const void* gmem, u32 src_bytes = 16) {
  moejit_host_runtime->cp_async(smem, gmem, 16, src_bytes);
}
MOEJIT_DEVICE void cp_async_ca_4(void* smem, const void* gmem, u32 src_bytes = 4) {
  moejit_host_runtime->cp_async(smem, gmem, 4, src_bytes);
}
MOEJIT_DEVICE void cp_async_cg_16(void* smem, const void* gmem, u32 src_bytes = 16) {
  moejit_host_runtime->cp_async(smem, gmem, 16, src_bytes);
}
// The host has no L2 to steer: the policy is a placeholder that the hinted copy ignores.
MOEJIT_DEVICE L2Policy l2_evict_first_policy() { return L2Policy{0}; }
MOEJIT_DEVICE void cp_async_cg_16_hint(void* smem, const void* gmem, L2Policy, u32 src_bytes = 16) {
  moejit_host_runtime->cp_async(smem, gmem, 16, src_bytes);
}
MOEJIT_DEVICE void cp_async_commit() { moejit_host_runtime->cp_async_commit(); }
template <u32 kPending>
MOEJIT_DEVICE void cp_async_wait() {
  moejit_host_runtime->cp_async_wait(kPending);
}

#endif

}  // namespace moejit::prim
