#pragma once
// Barriers, fences and spin-wait pauses. PTX ISA: bar.sync a{, b} (barrier a; b participating
// threads, a multiple of the warp size; memory ordered as __syncthreads), bar.warp.sync
// membermask, fence.acq_rel.gpu, nanosleep.u32. The host twin of a pause yields the fiber.

#include "common/platform.cuh"

namespace moejit::prim {

#if MOEJIT_TARGET_DEVICE

// All threads of the block; orders their shared and global memory accesses.
MOEJIT_DEVICE void block_sync() { asm volatile("bar.sync 0;" ::: "memory"); }

// Named barrier `id` (1..15) for `threads` threads (a multiple of 32).
MOEJIT_DEVICE void named_barrier_sync(u32 id, u32 threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// The lanes in `mask` of the calling warp; orders their memory accesses.
MOEJIT_DEVICE void warp_sync(u32 mask = 0xffffffffu) {
  asm volatile("bar.warp.sync %0;" ::"r"(mask) : "memory");
}

// Orders this thread's memory accesses for every thread of the GPU (release/acquire).
MOEJIT_DEVICE void fence_gpu() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

// One round of a spin-wait on memory another block writes: sleep briefly (nanosleep, sm_70+).
MOEJIT_DEVICE void spin_pause() { asm volatile("nanosleep.u32 64;" ::: "memory"); }

#else

MOEJIT_DEVICE void block_sync() { moejit_host_runtime->barrier(0, 0); }
MOEJIT_DEVICE void named_barrier_sync(u32 id, u32 threads) { moejit_host_runtime->barrier(id, threads); }
MOEJIT_DEVICE void warp_sync(u32 mask = 0xffffffffu) {
  moejit_host_runtime->warp_exchange(mask, nullptr, nullptr, 0);
}
MOEJIT_DEVICE void fence_gpu() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
MOEJIT_DEVICE void spin_pause() { moejit_host_runtime->yield(); }

#endif

}  // namespace moejit::prim
