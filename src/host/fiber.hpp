#pragma once
// Fibers for the host executor: one stack and one saved context per CUDA thread, switched with
// Boost.Context's fcontext primitives. Only the scheduler's context and a fiber switch to each
// other (the scheduler resumes a fiber, the fiber suspends back), so each fiber keeps just its
// own context and that of the worker thread it runs on.
//
// Why fcontext and not boost::context::fiber: a trap ends a block with its other fibers
// blocked mid-kernel, and they must be abandoned, not unwound (fiber's destructor unwinds
// with an exception through kernel frames). A fiber here is dropped by forgetting its context.
//
// Every switch is announced to AddressSanitizer (start/finish_switch_fiber), so that ASan
// knows which stack is live: without it, a report or an exception on a fiber stack would see
// the worker thread's stack bounds and give false positives.

#include <cstddef>
#include <cstdint>

#include "support/status.hpp"

namespace moejit::host {

#if defined(__SANITIZE_ADDRESS__)
#define MOEJIT_HOST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MOEJIT_HOST_ASAN 1
#endif
#endif
#ifndef MOEJIT_HOST_ASAN
#define MOEJIT_HOST_ASAN 0
#endif

// Stack bytes per fiber: MOEJIT_HOST_STACK_BYTES (K/M suffixes; rounded up to pages), else
// 64 KiB, or 256 KiB under ASan (its redzones make frames several times larger).
Result<std::size_t> fiber_stack_bytes_from_environment();

// `count` fiber stacks of `bytes` each, in one mapping, every stack with a PROT_NONE guard page
// below it so that an overflow faults instead of writing into the neighbour's frames.
class StackArena {
 public:
  static Result<StackArena> create(std::size_t count, std::size_t bytes);
  StackArena() = default;
  StackArena(StackArena&& o) noexcept;
  StackArena& operator=(StackArena&& o) noexcept;
  ~StackArena();

  std::size_t count() const { return count_; }
  std::size_t stack_bytes() const { return stack_bytes_; }
  // Lowest address of stack i.
  unsigned char* bottom(std::size_t i) const { return base_ + i * stride_ + guard_; }
  // Clears ASan's poison a previous fiber may have left on stack i (abandoned frames keep their
  // redzones poisoned); a no-op without ASan.
  void unpoison(std::size_t i) const;

 private:
  unsigned char* base_ = nullptr;
  std::size_t count_ = 0, stack_bytes_ = 0, guard_ = 0, stride_ = 0, mapped_ = 0;
};

// The context of the worker thread that fibers switch back to.
struct FiberHost {
  void* context = nullptr;
  void* fake_stack = nullptr;     // ASan's fake stack of the worker while a fiber runs
  const void* bottom = nullptr;   // the worker's stack, learned from ASan at the first switch
  std::size_t size = 0;
};

class Fiber {
 public:
  using Entry = void (*)(void* arg);

  // Prepares the fiber to run entry(arg) on [bottom, bottom + bytes) when first resumed.
  // `entry` must end with finish() (returning from it is a bug that aborts).
  void prepare(FiberHost* host, unsigned char* bottom, std::size_t bytes, Entry entry, void* arg);

  // Scheduler side: runs the fiber until it suspends, finishes or abandons.
  void resume();
  // Fiber side: back to the scheduler; returns when resumed.
  void suspend();
  // Fiber side: back to the scheduler for good; the fiber's frames are never resumed or
  // unwound, and the stack may be reused at once.
  [[noreturn]] void finish();

 private:
  friend struct FiberTrampoline;

  void* context_ = nullptr;
  FiberHost* host_ = nullptr;
  void* fake_stack_ = nullptr;
  const void* bottom_ = nullptr;
  std::size_t size_ = 0;
  Entry entry_ = nullptr;
  void* arg_ = nullptr;
};

}  // namespace moejit::host
