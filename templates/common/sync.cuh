#pragma once
// Barriers. PTX ISA: bar.sync a{, b} (barrier a, optionally b participating threads; memory
// ordering as __syncthreads), bar.warp.sync membermask.

#include "common/platform.cuh"

namespace moejit::prim {

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

}  // namespace moejit::prim
