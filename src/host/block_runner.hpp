#pragma once
// Runs the blocks of a launch on one worker thread, one block at a time, each CUDA thread of
// the block a fiber. Fibers switch only inside runtime calls, so the block's threads advance in
// a cooperative, deterministic schedule: a fiber runs until it waits (barrier, warp collective),
// yields or exits; the scheduler then resumes the next runnable fiber in FIFO order, starting
// with thread 0, 1, 2, ... at block start.
//
// It also implements the Runtime table of common/host_runtime.cuh for the fiber that calls it
// (found through a thread-local pointer, set around every resume), and checks what the device
// would leave undefined: barrier ids and counts, warp-collective masks, cp.async sizes and
// alignment, wgmma results never waited for, and deadlock (no live thread can proceed) or a block that only spins.

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/host_runtime.cuh"
#include "host/fiber.hpp"
#include "host/launch_state.hpp"

namespace moejit::host {

class BlockRunner {
 public:
  static Result<std::unique_ptr<BlockRunner>> create(LaunchState& launch);
  ~BlockRunner();
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;

  // Runs block `linear_block` until every thread exits, or the block fails (the failure goes to
  // the launch), or another block fails (the block is abandoned).
  void run(std::uint64_t linear_block);

  // The Runtime table's operations, for the calling fiber (see common/host_runtime.cuh).
  static ThreadState* rt_self();
  static void rt_barrier(u32 id, u32 threads);
  static void rt_warp_exchange(u32 mask, const void* in, void* out, u32 bytes);
  static void rt_yield();
  static void rt_cp_async(void* dst, const void* src, u32 dst_bytes, u32 src_bytes);
  static void rt_cp_async_commit();
  static void rt_cp_async_wait(u32 pending);
  static void rt_mma_async(const char* (*run)(void* ctx), const void* ctx, u32 ctx_bytes);
  static void* rt_thread_scratch(u32 bytes);
  static void rt_mma_async_commit();
  static void rt_mma_async_wait(u32 pending);
  [[noreturn]] static void rt_trap(const char* message);

  struct Thread;

 private:
  struct Barrier {
    u32 threads = 0;  // the count of the pending arrivals (0: the whole block)
    u32 arrived = 0;
    std::vector<u32> waiting;  // thread indices, in arrival order
  };
  struct Exchange {
    u32 mask = 0;
    u32 bytes = 0;
    u32 arrived = 0;  // lanes deposited so far
    unsigned char slots[32][kMaxExchangeBytes];
    void* out[32];
  };
  struct Warp {
    u32 exited = 0;                  // lanes that have exited
    std::vector<Exchange> pending;   // exchanges with disjoint masks, in progress
  };

  explicit BlockRunner(LaunchState& launch);
  void start_block(std::uint64_t linear_block);
  void finish_block();

  static void thread_main(void* arg);
  static Thread& current();

  void barrier(Thread& t, u32 id, u32 threads);
  void warp_exchange(Thread& t, u32 mask, const void* in, void* out, u32 bytes);
  void yield(Thread& t);
  void cp_async(Thread& t, void* dst, const void* src, u32 dst_bytes, u32 src_bytes);
  void cp_async_commit(Thread& t);
  void cp_async_wait(Thread& t, u32 pending);
  void mma_async(Thread& t, const char* (*run)(void* ctx), const void* ctx, u32 ctx_bytes);
  void* thread_scratch(Thread& t, u32 bytes);
  void mma_async_commit(Thread& t);
  void mma_async_wait(Thread& t, u32 pending);
  void exit_thread(Thread& t);
  // Records a failed device-side check of `t`; the runtime entry point then abandons t's fiber
  // (leave_if_trapped) once the failing call has returned and freed what it held.
  void trap(Thread& t, std::string_view message);
  static void leave_if_trapped(Thread& t);

  bool barrier_complete(const Barrier& b) const;
  void release(Barrier& b, const Thread* caller);
  void wait(Thread& t);  // suspends t until it is made runnable again
  void progressed();     // a barrier or collective completed, or a thread exited
  void check_spin();
  void fail(Status status);

  u32 lanes_present(u32 warp) const;
  std::string block_name() const;
  std::string thread_name(const Thread& t) const;
  std::string wait_description(const Thread& t) const;
  std::string waits_summary() const;  // what every thread waits on, grouped in runs
  Status deadlock_status() const;

  LaunchState& launch_;
  const LaunchPlan& plan_;
  StackArena stacks_;
  FiberHost host_;
  std::vector<Thread> threads_;
  std::vector<Warp> warps_;
  Barrier barriers_[16];
  std::deque<u32> runnable_;

  Dim3 block_idx_{0, 0, 0};
  unsigned char* shared_ = nullptr;
  u32 live_ = 0;
  u32 exited_ = 0;
  bool failed_ = false;

  // Spin detection: yields since the block last made progress, and since when the block and
  // the whole launch have made none.
  u32 yield_streak_ = 0;
  bool spinning_ = false;
  std::uint64_t spin_progress_ = 0;
  std::chrono::steady_clock::time_point spin_since_;
};

}  // namespace moejit::host
