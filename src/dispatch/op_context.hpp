#pragma once
// What an op needs to run kernels: the resolver (memory / store / compile), the launcher of the
// context's backend, and the observer that records dispatch decisions.

#include <atomic>
#include <cstdint>
#include <string>

#include "dispatch/spec_observer.hpp"
#include "kernels/launch_grid.hpp"
#include "runtime/kernel_resolver.hpp"
#include "runtime/launcher.hpp"

namespace moejit::dispatch {

struct OpContext {
  KernelResolver& resolver;
  Launcher& launcher;
  SpecObserver& observer;
  std::atomic<std::uint64_t>& launches;
  // The device backend also checks the fused layer's routing inputs, which costs a copy to the
  // host and a synchronization per call (MOEJIT_CHECK_INPUTS=1; the host backend always checks).
  bool check_inputs_on_device = false;
};

// Resolves `spec`, records its use and launches it over `grid` (block size and shared memory
// from the resolved kernel). No allocation once the spec is loaded.
Status run_kernel(OpContext& ctx, const KernelSpec& spec, const LaunchGrid& grid, const void* params,
                  std::size_t params_bytes, void* stream, const Decision& why);

}  // namespace moejit::dispatch
