#pragma once
// The host backend's half of the SIMT contract (DESIGN §7). Compiled only when templates are
// built by the host C++ compiler. The generated translation unit defines `moejit_host_runtime`;
// moejit's host executor (src/host/) points it at its Runtime before running any thread, and
// runs every CUDA thread of a block as a fiber on one worker thread.
//
// The primitives in templates/common/ implement their host twins on top of this table: thread
// coordinates and shared memory from self(), block barriers from barrier(), and every warp
// collective (shuffle, vote, match, mma, ldmatrix) as one warp_exchange() followed by a pure
// function of the 32 lanes' values that follows the PTX ISA.

#include "common/types.cuh"

namespace moejit::host {

inline constexpr u32 kRuntimeAbiVersion = 2;

struct Dim3 {
  u32 x, y, z;
};

// One CUDA thread (fiber).
struct ThreadState {
  Dim3 thread_idx;
  Dim3 block_idx;
  Dim3 block_dim;
  Dim3 grid_dim;
  unsigned char* dynamic_shared;  // the block's dynamic shared memory, poisoned at block start
  u32 dynamic_shared_bytes;
};

struct Runtime {
  u32 abi_version;  // kRuntimeAbiVersion
  // The calling fiber's thread.
  ThreadState* (*self)();
  // bar.sync `id`, `threads`: waits until `threads` threads of the block (0: all of them) have
  // arrived at barrier `id` (0-15). Orders memory like the device barrier.
  void (*barrier)(u32 id, u32 threads);
  // The warp collective. The lanes in `mask` (the caller among them; lane = linear thread index
  // % 32, warp = linear index / 32) each call it with the same mask and size; each deposits
  // `bytes` from `in`. It returns when all of them have; `out` then holds 32 slots of `bytes`,
  // slot l being lane l's deposit (zero for lanes outside `mask`). `bytes` may be 0 (a warp
  // barrier). At most kMaxExchangeBytes.
  void (*warp_exchange)(u32 mask, const void* in, void* out, u32 bytes);
  // Lets the other fibers run: for spin-waits on memory another thread or block will write.
  void (*yield)();
  // cp.async: queues a copy of `src_bytes` from `src` to `dst`, zero-filling `dst` up to
  // `dst_bytes`. Nothing is copied until a wait completes the copy's commit group.
  void (*cp_async)(void* dst, const void* src, u32 dst_bytes, u32 src_bytes);
  // cp.async.commit_group: closes the group of copies queued since the last commit.
  void (*cp_async_commit)();
  // cp.async.wait_group `pending`: performs the copies of every committed group except the
  // newest `pending` ones. Copies not yet committed are never performed by a wait.
  void (*cp_async_wait)(u32 pending);
  // wgmma.mma_async (the warpgroup MMA of sm_90a, common/wgmma.cuh) runs after it is issued:
  // queues `run` with a copy of the `ctx_bytes` bytes at `ctx` in the calling thread's open
  // group. The thread calls run(copy) when a wait completes that group; a non-null result is
  // a failed check (the launch ends with that message). A thread that exits with operations
  // queued fails the launch: their results would be lost.
  void (*mma_async)(const char* (*run)(void* ctx), const void* ctx, u32 ctx_bytes);
  // Memory of the calling thread for twins that keep state between calls (the wgmma twin's
  // accumulators in flight): `bytes` bytes, zero at the thread's first call in a block, the
  // same memory on every later call of the thread in that block. `bytes` must be the same on
  // every call.
  void* (*thread_scratch)(u32 bytes);
  // wgmma.commit_group: closes the group of operations queued since the last commit.
  void (*mma_async_commit)();
  // wgmma.wait_group `pending`: runs the operations of every committed group except the newest
  // `pending` ones, oldest first. Operations not yet committed are never run by a wait.
  void (*mma_async_wait)(u32 pending);
  // A failed device-side check: ends the launch with an error carrying `message`. Never
  // returns: the calling fiber is abandoned.
  void (*trap)(const char* message);
};

inline constexpr u32 kMaxExchangeBytes = 64;

}  // namespace moejit::host

// Defined by the generated translation unit; set by the executor before the first thread runs.
extern "C" const moejit::host::Runtime* moejit_host_runtime;
