#pragma once
// Asynchronous global -> shared copies. PTX ISA: cp.async.{ca,cg}.shared.global [dst], [src],
// 16, src_size (bytes past src_size are zero-filled; .cg bypasses L1), cp.async.commit_group,
// cp.async.wait_group N (all but the newest N committed groups complete), cp.async.wait_all.
// Host twin: copies are queued and performed by the wait that completes their group, so a
// kernel that reads shared memory before the right wait reads poison.

#include "common/platform.cuh"

namespace moejit::prim {

#if MOEJIT_TARGET_DEVICE

// 16 bytes, cached in L1 and L2; `src_bytes` (0..16) real bytes, the rest zero.
MOEJIT_DEVICE void cp_async_ca_16(void* smem, const void* gmem, u32 src_bytes = 16) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(
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

MOEJIT_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <u32 kPending>
MOEJIT_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

#else

MOEJIT_DEVICE void cp_async_ca_16(void* smem, const void* gmem, u32 src_bytes = 16) {
  moejit_host_runtime->cp_async(smem, gmem, 16, src_bytes);
}
MOEJIT_DEVICE void cp_async_cg_16(void* smem, const void* gmem, u32 src_bytes = 16) {
  moejit_host_runtime->cp_async(smem, gmem, 16, src_bytes);
}
MOEJIT_DEVICE void cp_async_commit() { moejit_host_runtime->cp_async_commit(); }
template <u32 kPending>
MOEJIT_DEVICE void cp_async_wait() {
  moejit_host_runtime->cp_async_wait(kPending);
}

#endif

}  // namespace moejit::prim
