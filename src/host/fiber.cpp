#include "host/fiber.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/detail/fcontext.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "support/env.hpp"

#if MOEJIT_HOST_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace moejit::host {
namespace ctx = boost::context::detail;

namespace {

constexpr std::size_t kDefaultStackBytes = MOEJIT_HOST_ASAN ? 256 * 1024 : 64 * 1024;
constexpr std::size_t kMinStackBytes = 16 * 1024;
constexpr std::size_t kMaxStackBytes = 64 * 1024 * 1024;

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// ASan's fiber protocol: start_switch before every jump (with the destination stack; a null
// fake-stack slot when the current fiber will never run again), finish_switch first thing on
// the destination.
inline void start_switch(void** fake_stack_save, const void* bottom, std::size_t size) {
#if MOEJIT_HOST_ASAN
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#else
  (void)fake_stack_save, (void)bottom, (void)size;
#endif
}

inline void finish_switch(void* fake_stack_save, const void** bottom_old, std::size_t* size_old) {
#if MOEJIT_HOST_ASAN
  __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, size_old);
#else
  (void)fake_stack_save, (void)bottom_old, (void)size_old;
#endif
}

}  // namespace

Result<std::size_t> fiber_stack_bytes_from_environment() {
  MOEJIT_ASSIGN_OR_RETURN(std::uint64_t bytes,
                          env_u64("MOEJIT_HOST_STACK_BYTES", kDefaultStackBytes));
  if (bytes < kMinStackBytes || bytes > kMaxStackBytes)
    return error(Code::invalid_argument,
                 "MOEJIT_HOST_STACK_BYTES = {}: expected {} to {} bytes (K/M suffixes allowed)",
                 bytes, kMinStackBytes, kMaxStackBytes);
  const std::size_t page = page_size();
  return (static_cast<std::size_t>(bytes) + page - 1) / page * page;
}

Result<StackArena> StackArena::create(std::size_t count, std::size_t bytes) {
  StackArena a;
  a.count_ = count;
  a.stack_bytes_ = bytes;
  a.guard_ = page_size();
  a.stride_ = bytes + a.guard_;
  a.mapped_ = a.stride_ * count;
  if (count == 0) return a;
  void* p = ::mmap(nullptr, a.mapped_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return error(Code::unavailable,
                 "cannot map {} fiber stacks of {} bytes for the host executor: {}; expected "
                 "smaller blocks, fewer MOEJIT_HOST_THREADS or a smaller MOEJIT_HOST_STACK_BYTES",
                 count, bytes, std::strerror(errno));
  a.base_ = static_cast<unsigned char*>(p);
  for (std::size_t i = 0; i < count; ++i) {
    if (::mprotect(a.base_ + i * a.stride_, a.guard_, PROT_NONE) != 0)
      // Each guard page splits the mapping; vm.max_map_count bounds how many there may be.
      return error(Code::unavailable,
                   "cannot protect the guard page of fiber stack {} of {}: {}; expected fewer "
                   "MOEJIT_HOST_THREADS (or a higher vm.max_map_count)",
                   i, count, std::strerror(errno));
  }
  return a;
}

StackArena::StackArena(StackArena&& o) noexcept { *this = std::move(o); }

StackArena& StackArena::operator=(StackArena&& o) noexcept {
  if (this != &o) {
    this->~StackArena();
    base_ = std::exchange(o.base_, nullptr);
    count_ = std::exchange(o.count_, 0);
    stack_bytes_ = o.stack_bytes_;
    guard_ = o.guard_;
    stride_ = o.stride_;
    mapped_ = std::exchange(o.mapped_, 0);
  }
  return *this;
}

StackArena::~StackArena() {
  if (base_ == nullptr) return;
  // The shadow of an unmapped range keeps its poison, and a later mapping at the same address
  // (a heap arena, another arena) would inherit it.
  for (std::size_t i = 0; i < count_; ++i) unpoison(i);
  ::munmap(base_, mapped_);
  base_ = nullptr;
}

void StackArena::unpoison(std::size_t i) const {
#if MOEJIT_HOST_ASAN
  ASAN_UNPOISON_MEMORY_REGION(bottom(i), stack_bytes_);
#else
  (void)i;
#endif
}

struct FiberTrampoline {
  static void run(ctx::transfer_t from) {
    auto* f = static_cast<Fiber*>(from.data);
    f->host_->context = from.fctx;
    finish_switch(nullptr, &f->host_->bottom, &f->host_->size);
    f->entry_(f->arg_);
    std::fputs("moejit host executor: a fiber entry returned instead of calling finish()\n",
               stderr);
    std::abort();
  }
};

void Fiber::prepare(FiberHost* host, unsigned char* bottom, std::size_t bytes, Entry entry,
                    void* arg) {
  host_ = host;
  bottom_ = bottom;
  size_ = bytes;
  entry_ = entry;
  arg_ = arg;
  fake_stack_ = nullptr;
  // make_fcontext takes the top of the stack: stacks grow down on every target we build for.
  context_ = ctx::make_fcontext(bottom + bytes, bytes, &FiberTrampoline::run);
}

void Fiber::resume() {
  start_switch(&host_->fake_stack, bottom_, size_);
  ctx::transfer_t back = ctx::jump_fcontext(context_, this);
  finish_switch(host_->fake_stack, nullptr, nullptr);
  context_ = back.fctx;
}

void Fiber::suspend() {
  start_switch(&fake_stack_, host_->bottom, host_->size);
  ctx::transfer_t again = ctx::jump_fcontext(host_->context, nullptr);
  finish_switch(fake_stack_, &host_->bottom, &host_->size);
  host_->context = again.fctx;
}

void Fiber::finish() {
  start_switch(nullptr, host_->bottom, host_->size);
  ctx::jump_fcontext(host_->context, nullptr);
  std::fputs("moejit host executor: a finished fiber was resumed\n", stderr);
  std::abort();
}

}  // namespace moejit::host
