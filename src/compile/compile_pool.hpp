#pragma once
// A fixed set of worker threads for compiles submitted in bulk (warm-up, benchmarks), plus the
// limit on concurrent compiles that every compile, pooled or not, must respect: NVRTC is
// thread-safe but each compile holds a core and a few hundred MB.

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <semaphore>
#include <thread>
#include <vector>

#include "support/status.hpp"

namespace moejit {

class CompilePool {
 public:
  explicit CompilePool(unsigned threads);
  ~CompilePool();
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  unsigned threads() const { return static_cast<unsigned>(workers_.size()); }

  template <typename F>
  auto submit(F&& f) -> std::future<std::invoke_result_t<F>> {
    using R = std::invoke_result_t<F>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(f));
    auto future = task->get_future();
    {
      std::lock_guard lock(mutex_);
      queue_.emplace_back([task] { (*task)(); });
    }
    ready_.notify_one();
    return future;
  }

  // Held for the duration of one compile; at most threads() are held at once.
  class Slot {
   public:
    explicit Slot(CompilePool& pool) : pool_(pool) { pool_.slots_.acquire(); }
    ~Slot() { pool_.slots_.release(); }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;

   private:
    CompilePool& pool_;
  };

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::counting_semaphore<> slots_;
  std::vector<std::thread> workers_;
};

// MOEJIT_COMPILE_THREADS, else the number of cores (at most 8).
Result<unsigned> compile_threads_from_environment();

}  // namespace moejit
