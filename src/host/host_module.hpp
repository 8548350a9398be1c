#pragma once
// Loading host kernels: the shared object a ResolvedKernel carries is loaded once per process
// (keyed by the hash of its bytes), its runtime pointer set to the executor's table, and its
// entry and build facts looked up.

#include <cstdint>

#include "runtime/resolved_kernel.hpp"

namespace moejit::host {

struct HostModule {
  void (*entry)(const void* params) = nullptr;  // moejit_host_kernel
  std::uint64_t params_bytes = 0;                // sizeof the params type it was compiled with
};

// The loaded module of `kernel` (a host_shared_object entry). Thread-safe; modules stay loaded
// for the life of the process.
Result<const HostModule*> load_host_module(const ResolvedKernel& kernel);

}  // namespace moejit::host
