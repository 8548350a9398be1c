#pragma once
// The device backend's Launcher: resolved CUBINs run through the CUDA driver API (libcuda,
// dlopened by runtime/cuda_driver).
//
// Contexts. An operation on a stream of its own (not the null, legacy or per-thread handle) runs
// in the stream's context (cuStreamGetCtx), which must be of the launcher's device: an engine's
// streams may belong to another context than the one current on the calling thread (a green
// context's streams, another context of the device), and work is only issued to a stream in
// its own context. Other operations run in the context current on the calling thread when that
// context belongs to the launcher's device (an engine's own context, or the primary context
// cudart uses); otherwise (no context current, or another device's) in the device's primary
// context, retained on first need. A context that is not current is pushed for the call and
// popped after it: the caller's current context is never changed across a call.
//
// Modules. A kernel's CUBIN is loaded once per (context, kernel key) with cuModuleLoadData; its
// function is looked up by the lowered name in its metadata, loaded eagerly (cuFuncLoad) and,
// when it needs more dynamic shared memory than the driver allows by default (48 KB less its
// static shared memory), given that allowance once. Modules in the device's primary context
// (retained by the launcher, or current as cudart leaves it) are unloaded with the launcher;
// those in another context go with that context.
//
// Hot path. Once a kernel is loaded in a context, launch() validates its arguments (integer
// compares), reads the current context, finds the function under a shared lock (one hash probe)
// and calls cuLaunchKernelEx: no heap allocation, no formatting (only a failure formats its
// message), no host synchronization; it may be captured into a CUDA graph. A launch with
// LaunchDims::programmatic_dependent_launch on a device of compute capability 9.0 or newer
// passes the attribute CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION (from an array on
// the stack); on older devices the flag is dropped and the launch is an ordinary one. The first
// launch of a kernel in a context loads the module; if the stream is being captured then, the
// launch is an error (loading a module is not capture-safe): call prepare() before the capture.
// tests/test_device_launcher.cpp runs all of this against a stand-in driver table, and in
// AddressSanitizer builds counts the heap allocations of 10^4 launches and memory operations of
// a loaded kernel (zero); bench_gemm replays launches from CUDA graphs on a GPU.

#include <cuda.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "runtime/cuda_driver.hpp"
#include "runtime/launcher.hpp"

namespace moejit {

// moejit's target for a compute capability: 8.0 sm_80, 8.6 sm_86, 8.7 sm_87, 8.9 sm_89,
// 9.0 sm_90a, 10.0 sm_100a, 10.3 sm_103a, 11.0 sm_110a, 12.0 sm_120a, 12.1 sm_121a (the `a`
// form wherever the architecture has one). Any other is an `unsupported` Status naming it.
Result<Arch> arch_for_compute_capability(int major, int minor);

struct DeviceInfo {
  int ordinal = 0;
  CUdevice device = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  Arch arch = Arch::none;
  int multiprocessors = 0;
  std::uint64_t global_memory_bytes = 0;
  std::uint64_t l2_bytes = 0;
  std::uint32_t max_shared_per_block = 0;  // opt-in maximum of dynamic shared memory
  int memory_clock_khz = 0;                // 0 when the driver does not report it
  int memory_bus_bits = 0;
  int driver_version = 0;
};

class DeviceLauncher final : public Launcher {
 public:
  // A launcher for device `ordinal` of `driver` (the process-wide one when null; it must
  // outlive the launcher). Unavailable when there is no driver or device; unsupported when the
  // device's compute capability has no moejit target.
  static Result<std::unique_ptr<DeviceLauncher>> create(int ordinal, const CudaDriver* driver = nullptr);
  ~DeviceLauncher() override;
  DeviceLauncher(const DeviceLauncher&) = delete;
  DeviceLauncher& operator=(const DeviceLauncher&) = delete;

  Backend backend() const override { return Backend::device; }
  Arch arch() const override { return info_.arch; }
  std::uint32_t sm_count() const override { return static_cast<std::uint32_t>(info_.multiprocessors > 0 ? info_.multiprocessors : 1); }
  const DeviceInfo& info() const { return info_; }
  // Whether LaunchDims::programmatic_dependent_launch is honoured: compute capability 9.0 or
  // newer and a driver with cuLaunchKernelEx; otherwise such launches are ordinary ones.
  bool programmatic_launch_supported() const {
    return info_.cc_major >= 9 && driver_->api().LaunchKernelEx != nullptr;
  }
  const CudaDriver& driver() const { return *driver_; }

  // `stream` is a CUstream of this device (null: the legacy default stream).
  Status launch(const ResolvedKernel& kernel, const LaunchDims& dims, const void* params,
                std::size_t params_bytes, void* stream) override;
  Status copy_to_backend(void* dst, const void* src, std::size_t bytes, void* stream) override;
  Status copy_from_backend(void* dst, const void* src, std::size_t bytes, void* stream) override;
  Status fill(void* dst, std::uint8_t value, std::size_t bytes, void* stream) override;
  Status synchronize(void* stream) override;
  Result<bool> capturing(void* stream) override;

  // Device-to-device copy on `stream` (benchmarks, buffer replication).
  Status copy_within_backend(void* dst, const void* src, std::size_t bytes, void* stream);

  // Loads `kernel` into the calling thread's context (as launch() picks it for the null stream:
  // the current context if it is this device's, else the primary one) with an allowance
  // of `dynamic_shared_bytes` (at least the kernel's own need), so that launches captured into
  // a graph later find it loaded.
  Status prepare(const ResolvedKernel& kernel, std::uint32_t dynamic_shared_bytes = 0) override;

  // Device memory in the context launches use; DeviceBuffer is the owning form.
  Result<CUdeviceptr> allocate(std::size_t bytes);
  Status release(CUdeviceptr ptr);

  // Functions loaded so far, over all contexts.
  std::size_t loaded_functions() const;

  // The device's primary context, retained by the launcher on first call (until it is
  // destroyed). Tools that create streams and events push it themselves.
  Result<CUcontext> primary_context() const;

 private:
  class ContextScope;
  struct LoadedFunction {
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    std::size_t params_bytes = 0;               // 0: the driver cannot tell (before 12.4)
    std::atomic<std::uint32_t> shared_limit{0};  // dynamic shared memory the function may use
  };
  struct FunctionKey {
    std::uint64_t context_id;  // the driver's context id (context_id() in the .cpp)
    Hash128 kernel;
    friend bool operator==(const FunctionKey&, const FunctionKey&) = default;
  };
  struct FunctionKeyHash {
    std::size_t operator()(const FunctionKey& k) const noexcept {
      return k.kernel.low ^ (k.kernel.high * 31) ^ (k.context_id * 0x9e3779b97f4a7c15ull);
    }
  };

  DeviceLauncher(const CudaDriver* driver, DeviceInfo info);
  const LoadedFunction* find(std::uint64_t context_id, const Hash128& kernel) const;
  Result<const LoadedFunction*> load(CUcontext context, std::uint64_t context_id, const ResolvedKernel& kernel,
                                     void* stream, std::uint32_t dynamic_shared_bytes);
  Status raise_shared_limit(const LoadedFunction& f, const ResolvedKernel& kernel, std::uint32_t bytes);
  Status check_launch(const ResolvedKernel& kernel, const LaunchDims& dims, const void* params) const;

  const CudaDriver* driver_;
  DeviceInfo info_;

  mutable std::mutex primary_mutex_;
  mutable std::atomic<CUcontext> primary_{nullptr};  // retained on first need

  mutable std::shared_mutex table_mutex_;
  std::unordered_map<FunctionKey, std::unique_ptr<LoadedFunction>, FunctionKeyHash> table_;
  std::mutex load_mutex_;  // one module load (and attribute change) at a time
};

}  // namespace moejit
