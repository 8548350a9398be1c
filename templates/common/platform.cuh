#pragma once
// Execution-space qualifiers and the thread/block coordinates, behind names that the host
// backend can provide too. Kernels use these instead of threadIdx/blockIdx directly.

#include "common/types.cuh"

#if defined(__CUDACC_RTC__) || defined(__CUDA_ARCH__)
#define MOEJIT_TARGET_DEVICE 1
#define MOEJIT_DEVICE __device__ __forceinline__
#define MOEJIT_HOST_DEVICE __host__ __device__ __forceinline__
#define MOEJIT_KERNEL extern "C++" __global__
#else
#error "moejit templates are compiled for the device (NVRTC) only in this build"
#endif

namespace moejit::prim {

MOEJIT_DEVICE u32 thread_x() { return threadIdx.x; }
MOEJIT_DEVICE u32 block_x() { return blockIdx.x; }
MOEJIT_DEVICE u32 block_y() { return blockIdx.y; }
MOEJIT_DEVICE u32 block_threads() { return blockDim.x; }
MOEJIT_DEVICE u32 grid_x() { return gridDim.x; }

// The block's dynamic shared memory (sized at launch), 16-byte aligned.
MOEJIT_DEVICE unsigned char* dynamic_shared() {
  extern __shared__ __align__(16) unsigned char moejit_dynamic_shared[];
  return moejit_dynamic_shared;
}

}  // namespace moejit::prim
