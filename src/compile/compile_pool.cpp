#include "compile/compile_pool.hpp"

#include <algorithm>

#include "support/env.hpp"

namespace moejit {

CompilePool::CompilePool(unsigned threads) : slots_(std::max(1u, threads)) {
  threads = std::max(1u, threads);
  workers_.reserve(threads);
  for (unsigned i = 0; i < threads; ++i) workers_.emplace_back([this] { run(); });
}

CompilePool::~CompilePool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (auto& t : workers_) t.join();
}

void CompilePool::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left to do
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

Result<unsigned> compile_threads_from_environment() {
  MOEJIT_ASSIGN_OR_RETURN(std::uint64_t v, env_u64("MOEJIT_COMPILE_THREADS", 0));
  if (v > 256)
    return error(Code::invalid_argument, "MOEJIT_COMPILE_THREADS = {}: expected 1 to 256", v);
  if (v > 0) return static_cast<unsigned>(v);
  return std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
}

}  // namespace moejit
