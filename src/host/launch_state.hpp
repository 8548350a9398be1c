#pragma once
// What the workers of one host launch share: the immutable plan, the next block to take, the
// first error, and a progress count that lets a spinning block tell a slow launch from a stuck
// one.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "common/host_runtime.cuh"
#include "support/status.hpp"

namespace moejit::host {

struct LaunchPlan {
  void (*entry)(const void* params) = nullptr;  // the kernel for one thread
  const void* params = nullptr;
  Dim3 grid{1, 1, 1};
  Dim3 block{1, 1, 1};
  std::uint32_t block_threads = 1;  // block.x * block.y * block.z
  std::uint64_t blocks = 1;         // grid.x * grid.y * grid.z
  std::uint32_t dynamic_shared_bytes = 0;
  std::string kernel_label;         // names the kernel in errors
  std::size_t stack_bytes = 0;
  std::chrono::milliseconds spin_timeout{0};
  unsigned workers = 1;
  // Blocks in decreasing linear index (MOEJIT_HOST_BLOCK_ORDER=reverse): CUDA promises no order
  // among blocks, and a kernel that relies on one (a block waiting for a lower-numbered one)
  // hangs or computes something else this way.
  bool reverse_order = false;
};

class LaunchState {
 public:
  explicit LaunchState(const LaunchPlan& plan) : plan_(plan) {}
  LaunchState(const LaunchState&) = delete;
  LaunchState& operator=(const LaunchState&) = delete;

  const LaunchPlan& plan() const { return plan_; }

  // The linear index (x fastest, as CUDA numbers them) of the next block to run, in increasing
  // order or, with reverse_order, decreasing; nullopt once every block has been handed out.
  std::optional<std::uint64_t> take_block() {
    const std::uint64_t turn = next_block_.fetch_add(1, std::memory_order_relaxed);
    if (turn >= plan_.blocks) return std::nullopt;
    return plan_.reverse_order ? plan_.blocks - 1 - turn : turn;
  }
  std::uint64_t blocks_taken() const {
    auto n = next_block_.load(std::memory_order_relaxed);
    return n < plan_.blocks ? n : plan_.blocks;
  }

  // Ends the launch: the first failure is the launch's result; every worker stops at its next
  // scheduling step, abandoning its block.
  void fail(Status status);
  bool aborted() const { return aborted_.load(std::memory_order_relaxed); }
  Status result() const;

  // Counted when a barrier or warp collective completes or a thread exits, anywhere.
  void note_progress() { progress_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t progress() const { return progress_.load(std::memory_order_relaxed); }

 private:
  const LaunchPlan& plan_;
  std::atomic<std::uint64_t> next_block_{0};
  std::atomic<std::uint64_t> progress_{0};
  std::atomic<bool> aborted_{false};
  mutable std::mutex error_mutex_;
  Status error_;
};

}  // namespace moejit::host
