// moejit._core.Context: owns one moejit_context_t.
#pragma once

#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "core.hpp"

namespace moejit_python {

class Context {
 public:
  Context(int backend, int32_t device, std::optional<std::string> cache_dir, std::vector<std::string> read_only_dirs,
          uint32_t compile_threads, bool frozen, nb::object log, std::optional<std::string> usage_manifest,
          std::optional<std::string> host_arch);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // The handle for one call, valid while the guard lives: close() waits for calls in flight,
  // which run with the GIL released. Raises if the context was closed.
  class Use {
   public:
    explicit Use(const Context& c);
    ~Use();
    Use(const Use&) = delete;
    Use& operator=(const Use&) = delete;
    moejit_context_t get() const { return ctx_; }

   private:
    std::shared_lock<std::shared_mutex> lock_;
    moejit_context_t ctx_;
  };
  Use use() const { return Use(*this); }
  // Raises when a call on this context is in flight on this thread (close() from its progress or
  // log callback would wait for that call forever).
  void close();
  bool closed() const { return ctx_ == nullptr; }

  moejit_backend_t backend() const { return backend_; }
  const std::string& arch() const { return arch_; }
  // Where this context's tensors must live.
  const Memory& memory() const { return memory_; }
  int32_t device() const { return device_; }
  nb::dict stats() const;

 private:
  mutable std::shared_mutex closing_;
  moejit_context_t ctx_ = nullptr;
  moejit_backend_t backend_ = MOEJIT_BACKEND_HOST;
  std::string arch_;
  Memory memory_;
  int32_t device_ = 0;  // as asked; host memory has no ordinal, so memory_ says 0 there

  void destroy();
};

// Runs `call` on the context's handle with the GIL released (the C call may compile, log from
// compile threads, or run the host backend for a long time) and returns its status.
template <typename Call>
moejit_status_t call_unlocked(const Context& ctx, Call&& call) {
  auto use = ctx.use();
  nb::gil_scoped_release unlocked;
  return call(use.get());
}

}  // namespace moejit_python
