#pragma once
// What a moejit_context_t points to: the resolver (memory table, store, compilers), the
// launcher of the context's backend (absent for a device context on a machine without a
// usable GPU: such a context can still warm the store), and the observers of its decisions.

#include <atomic>
#include <memory>
#include <string>

#include "dispatch/op_context.hpp"
#include "runtime/kernel_resolver.hpp"
#include "runtime/launcher.hpp"

struct moejit_context_s {
  moejit::Backend backend = moejit::Backend::none;
  std::unique_ptr<moejit::KernelResolver> resolver;
  std::unique_ptr<moejit::Launcher> launcher;  // null: device backend without a GPU
  moejit::Status launcher_error;              // why `launcher` is null
  std::unique_ptr<moejit::dispatch::SpecObserver> observer;
  std::atomic<std::uint64_t> launches{0};
  bool check_inputs_on_device = false;  // MOEJIT_CHECK_INPUTS, read when the context is made

  // The launcher, or the reason there is none (a Status naming what is missing).
  moejit::Result<moejit::Launcher*> require_launcher();
  moejit::dispatch::OpContext op_context(moejit::Launcher& on) {
    return {*resolver, on, *observer, launches, check_inputs_on_device};
  }
};
