#pragma once
// Launching a host kernel: the host backend's counterpart of cuLaunchKernelEx. The kernel's
// shared object is loaded once per process; the grid's blocks are run by worker threads in
// increasing block index, each CUDA thread of a block as a fiber (block_runner.hpp). The call
// returns when every block has finished, or with the first failure: a trap, a deadlock, a
// block that only spins, or a misuse of a primitive that the device leaves undefined.
//
// Environment: MOEJIT_HOST_THREADS (workers, default: hardware threads), MOEJIT_HOST_STACK_BYTES
// (fiber stack, default 64 KiB, 256 KiB under ASan), MOEJIT_HOST_SPIN_TIMEOUT_MS (how long a
// block may only spin in yield() while nothing in the launch progresses, default 10000).

#include <cstddef>
#include <cstdint>

#include "common/host_runtime.cuh"
#include "runtime/resolved_kernel.hpp"

namespace moejit {

struct HostLaunchShape {
  host::Dim3 grid{1, 1, 1};
  host::Dim3 block{1, 1, 1};
  std::uint32_t dynamic_shared_bytes = 0;
};

// Runs `kernel` (a host-backend ResolvedKernel) with `params`, a pointer to the kernel's params
// struct of `params_bytes` bytes, as CUDA would run kernel<<<grid, block, shared>>>(params).
// Errors name the bad argument: a device kernel, block dimensions outside CUDA's limits or
// more threads than the kernel's launch bounds, less dynamic shared memory than the kernel
// needs or more than its target allows, a null params pointer or a params size other than the
// compiled one.
Status launch_host_kernel(const ResolvedKernel& kernel, const void* params,
                          std::size_t params_bytes, const HostLaunchShape& shape);

}  // namespace moejit
