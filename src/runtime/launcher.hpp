#pragma once
// Where resolved kernels run: the device backend (CUDA driver, src/runtime/device_launcher) or
// the host backend (src/host executor, src/runtime/host_launcher). The ops in src/dispatch/
// talk to this interface only, so the same op code drives both.
//
// launch() is on the hot path: implementations neither allocate nor format on it once the
// kernel is loaded, and never synchronize the host (graph capture must work).

#include <cstddef>
#include <cstdint>

#include "runtime/resolved_kernel.hpp"
#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit {

class Launcher {
 public:
  virtual ~Launcher() = default;

  virtual Backend backend() const = 0;
  // The architecture specs for this launcher are built for (the device's, for the device).
  virtual Arch arch() const = 0;
  // Streaming multiprocessors the tile heuristic fills: the device's; for the host backend,
  // those of the default device of its arch (so both backends pick the same kernels).
  virtual std::uint32_t sm_count() const = 0;

  // Runs `kernel` (resolved for backend()) with its by-value params struct on `stream`
  // (a CUstream for the device, ignored by the host, which runs synchronously).
  virtual Status launch(const ResolvedKernel& kernel, const LaunchDims& dims, const void* params,
                        std::size_t params_bytes, void* stream) = 0;

  // Memory transfers between host memory and this backend's memory, ordered on `stream`.
  virtual Status copy_to_backend(void* dst, const void* src, std::size_t bytes, void* stream) = 0;
  virtual Status copy_from_backend(void* dst, const void* src, std::size_t bytes, void* stream) = 0;
  virtual Status fill(void* dst, std::uint8_t value, std::size_t bytes, void* stream) = 0;
  // Waits until everything queued on `stream` has finished.
  virtual Status synchronize(void* stream) = 0;
  // Whether `stream` is being captured into a CUDA graph, where a transfer to the host or a
  // synchronization would end the capture (the host backend captures nothing).
  virtual Result<bool> capturing(void* stream) = 0;

  // Makes `kernel` ready to launch without loading anything, so that launches captured into a
  // CUDA graph later find it loaded (the device loads its module in the calling thread's
  // context; the host backend has nothing to do).
  virtual Status prepare(const ResolvedKernel& kernel, std::uint32_t dynamic_shared_bytes) = 0;
};

}  // namespace moejit
