#pragma once
// Programmatic dependent launch (PDL). PTX ISA: griddepcontrol.wait and
// griddepcontrol.launch_dependents (sm_90 and newer, PTX ISA 7.8).
//
// A kernel launched with programmatic stream serialization (LaunchDims::
// programmatic_dependent_launch, honoured on devices of compute capability 9.0 and newer) may
// start before the kernel ahead of it in the stream has finished, so that its prologue (index
// math, address precomputation, cache-policy creation, weight prefetch) overlaps the
// predecessor's tail. Its memory operations are then ordered after the predecessor's only by
// grid_dependency_wait().
//
// grid_dependency_wait(): the calling thread waits until every prerequisite grid in flight has
//   completed and all of its memory operations are performed and visible to this grid. Without
//   PDL (launched normally, or on a device below 9.0) the stream already serialized the launches
//   and it returns at once. A thread calls it
//     - before its first read of anything an earlier kernel in the stream wrote (activations,
//       routing output, counts, ...), and
//     - before its first write to memory an earlier kernel may still read or write (outputs,
//       workspace reused from launch to launch).
//   Only data that no kernel still in flight can write may be read before it: data written
//   before the last launch in the stream made without PDL (such a launch starts only after
//   everything ahead of it completed), e.g. packed weights and scales, packed once when the layer
//   is loaded. Prefetching weights before the wait is what PDL buys a weight-streaming GEMM;
//   reading routing output or activations there is a race.
//   Every kernel launched with the flag calls it on every path of every block, early exits
//   included: a PDL grid that completes without waiting does not imply that its own
//   predecessors completed, so a later kernel's wait would no longer cover them (the chain is
//   transitive only when each link waits). Calling it again is harmless.
// launch_dependent_grids(): lets the next kernel in the stream (if it was launched with PDL) be
//   scheduled once every block of this grid has called it or exited. It only affects
//   scheduling: it makes none of this grid's memory visible to the next one (that one's
//   grid_dependency_wait() still waits for this grid to complete), so it may be called anywhere,
//   by any thread, any number of times (a block's calls after its first have no effect). Early
//   calls let the next kernel's blocks take SM resources (registers, shared memory, block slots)
//   while this grid still runs: call it once the block has issued its last main-loop loads, not
//   at the start of a long kernel. A grid that never calls it triggers its dependents when it
//   completes.
//
// On device targets below sm_90 both compile to nothing (NVRTC and nvcc define __CUDA_ARCH__ for
// the target being compiled), so one kernel source serves every target.
//
// Host twins: no-ops, which is exactly the semantics there. The host executor runs launches one
// after another and a launch returns only when every block of its grid has finished, so when a
// kernel starts, every earlier kernel has completed and its writes are visible (the wait is
// already satisfied), and no kernel is ever scheduled early (launch_dependents has nothing to
// enable). The host backend therefore cannot catch a missing wait: a kernel that reads a
// predecessor's output before grid_dependency_wait() passes its host tests and races on the GPU.

#include "common/platform.cuh"

namespace moejit::prim {

#if MOEJIT_TARGET_DEVICE

MOEJIT_DEVICE void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The memory clobber keeps the compiler from moving loads or stores above the wait.
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

MOEJIT_DEVICE void launch_dependent_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}

#else

MOEJIT_DEVICE void grid_dependency_wait() {}
MOEJIT_DEVICE void launch_dependent_grids() {}

#endif

}  // namespace moejit::prim
