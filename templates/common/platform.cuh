#pragma once
// Where a kernel runs: the qualifiers, thread/block coordinates and dynamic shared memory, for
// both targets. Device: NVRTC (or nvcc). Host: the system C++ compiler, with the CUDA thread
// model provided by moejit's host executor (common/host_runtime.cuh). Kernels use these names
// instead of __global__, threadIdx, blockIdx or extern __shared__ arrays.

#include "common/types.cuh"

#if defined(__CUDACC_RTC__) || defined(__CUDA_ARCH__)
#define MOEJIT_TARGET_DEVICE 1
#define MOEJIT_DEVICE __device__ __forceinline__
#define MOEJIT_GLOBAL __global__
// At least one block per SM, said explicitly: with the thread count alone, ptxas on sm_120a
// kept an INT4 16x128x128 GEMM at 80 registers and spilled its stage index in the main loop;
// with a minimum of one block it takes the registers it needs (107, no spill).
#define MOEJIT_LAUNCH_BOUNDS(threads) __launch_bounds__(threads, 1)
// Unrolls the loop that follows completely (its trip count is a compile-time constant).
#define MOEJIT_UNROLL _Pragma("unroll")
// Keeps the loop that follows rolled.
#define MOEJIT_NO_UNROLL _Pragma("unroll 1")
#else
#define MOEJIT_TARGET_HOST 1
#define MOEJIT_DEVICE inline
#define MOEJIT_GLOBAL
#define MOEJIT_LAUNCH_BOUNDS(threads)
#define MOEJIT_UNROLL
#define MOEJIT_NO_UNROLL
#include "common/host_runtime.cuh"
#endif

namespace moejit::prim {

#if MOEJIT_TARGET_DEVICE

MOEJIT_DEVICE u32 thread_x() { return threadIdx.x; }
MOEJIT_DEVICE u32 block_x() { return blockIdx.x; }
MOEJIT_DEVICE u32 block_y() { return blockIdx.y; }
MOEJIT_DEVICE u32 block_z() { return blockIdx.z; }
MOEJIT_DEVICE u32 block_threads() { return blockDim.x; }
MOEJIT_DEVICE u32 grid_x() { return gridDim.x; }
MOEJIT_DEVICE u32 grid_y() { return gridDim.y; }

// threadIdx.x and blockIdx.x read anew where they are used. The compiler takes each as one value
// for the whole kernel, so what a kernel derives from them at its top stays in a register until
// its last use; where that is after a main loop that takes every register, reading them again
// (an S2R each, volatile so that the reads are not merged) costs less than keeping the values:
// ptxas spilled them to local memory instead.
MOEJIT_DEVICE u32 thread_x_reread() {
  u32 thread;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(thread));
  return thread;
}
MOEJIT_DEVICE u32 block_x_reread() {
  u32 block;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(block));
  return block;
}

// The block's dynamic shared memory (sized at launch), 16-byte aligned.
MOEJIT_DEVICE unsigned char* dynamic_shared() {
  extern __shared__ __align__(16) unsigned char moejit_dynamic_shared[];
  return moejit_dynamic_shared;
}

// Ends the launch with an error (device assertion).
[[noreturn]] MOEJIT_DEVICE void trap(const char*) {
  asm volatile("trap;");
  __builtin_unreachable();
}

#else

MOEJIT_DEVICE host::ThreadState& self() { return *moejit_host_runtime->self(); }
MOEJIT_DEVICE u32 thread_x() { return self().thread_idx.x; }
MOEJIT_DEVICE u32 block_x() { return self().block_idx.x; }
MOEJIT_DEVICE u32 block_y() { return self().block_idx.y; }
MOEJIT_DEVICE u32 block_z() { return self().block_idx.z; }
MOEJIT_DEVICE u32 block_threads() { return self().block_dim.x; }
MOEJIT_DEVICE u32 grid_x() { return self().grid_dim.x; }
MOEJIT_DEVICE u32 grid_y() { return self().grid_dim.y; }
MOEJIT_DEVICE u32 thread_x_reread() { return self().thread_idx.x; }
MOEJIT_DEVICE u32 block_x_reread() { return self().block_idx.x; }
MOEJIT_DEVICE unsigned char* dynamic_shared() { return self().dynamic_shared; }
[[noreturn]] MOEJIT_DEVICE void trap(const char* message) {
  moejit_host_runtime->trap(message);  // ends the fiber: never returns
  __builtin_unreachable();
}

// The checks the device makes in hardware (misaligned or out-of-space addresses fault there),
// made explicitly so the host backend fails where the GPU would.
MOEJIT_DEVICE void check_aligned(const void* p, u64 bytes, const char* what) {
  if (reinterpret_cast<u64>(p) % bytes != 0) trap(what);
}
MOEJIT_DEVICE void check_shared(const void* p, u64 bytes, const char* what) {
  const unsigned char* base = self().dynamic_shared;
  const unsigned char* q = static_cast<const unsigned char*>(p);
  if (q < base || q + bytes > base + self().dynamic_shared_bytes) trap(what);
}

#endif

}  // namespace moejit::prim
