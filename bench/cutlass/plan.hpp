#pragma once
// Internal to bench/cutlass: the Plan of one CUTLASS 3.x GEMM (a GemmUniversalAdapter), shared by
// the kernel translation units. Included after CUTLASS's headers.

#include <cuda_runtime_api.h>

#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/cutlass/detail.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/kernel_hardware_info.h"

// The kernels are compiled for sm_90a only (CMakeLists.txt): a device pass for plain sm_90 would
// compile them to traps (CUTLASS guards their bodies with __CUDA_ARCH_FEAT_SM90_ALL).
#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "bench/cutlass must be compiled for sm_90a (CUDA_ARCHITECTURES 90a-real), not plain sm_90"
#endif

namespace moejit::bench::cutlass_baseline::detail {

inline std::string status_error(const std::string& what, cutlass::Status s) {
  return what + ": " + cutlassGetStatusString(s);
}

// A prepared GEMM: the adapter (holding the kernel's Params), the device arrays its arguments
// point to, and its workspace. The grouped kernels' Params also keep a pointer to the host copy of
// the problem shapes (the launch grid is computed from them at every run), kept here too.
template <class Gemm, class HostShape = int>
class GemmPlan final : public Plan {
 public:
  explicit GemmPlan(std::string name) : name_(std::move(name)) {}

  std::string run(void* stream) override {
    // Only the launch: the adapter's run() computes the grid on the host and launches (with
    // cudaLaunchKernelEx for clusters), so it can be captured in a CUDA graph.
    cutlass::Status s = gemm.run(static_cast<cudaStream_t>(stream));
    if (s != cutlass::Status::kSuccess) return status_error(name_ + ": launch", s);
    return {};
  }
  std::string name() const override { return name_; }

  // A device copy of `host` (problem shapes, pointer or stride arrays) that lives as long as the plan.
  template <class T>
  std::string upload(const std::vector<T>& host, const std::string& what, T*& device) {
    DeviceBuffer& b = buffers_.emplace_back();
    if (auto e = b.upload(host, what); !e.empty()) return name_ + ": " + e;
    device = b.as<T*>();
    return {};
  }

  // can_implement, workspace, initialize: the prepare-time part of a CUTLASS launch.
  // `check_args` are the arguments can_implement sees (see grouped_int4_impl.hpp for why they
  // may differ from `args`).
  std::string initialize(const typename Gemm::Arguments& args, const typename Gemm::Arguments& check_args) {
    cutlass::Status s = Gemm::can_implement(check_args);
    if (s != cutlass::Status::kSuccess)
      return status_error(name_ + ": can_implement rejected the problem", s);
    std::size_t workspace_bytes = Gemm::get_workspace_size(args);
    if (auto e = workspace_.allocate(workspace_bytes, "the workspace"); !e.empty()) return name_ + ": " + e;
    s = gemm.initialize(args, workspace_.get());
    if (s != cutlass::Status::kSuccess) {
      cudaError_t e = cudaGetLastError();
      return status_error(name_ + ": initialize", s) +
             (e != cudaSuccess ? " (" + cuda_error("last CUDA error", e) + ")" : "");
    }
    // initialize() may have enqueued work (workspace setup) on the legacy stream.
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return name_ + ": " + cuda_error("cudaDeviceSynchronize after initialize", e);
    return {};
  }

  Gemm gemm;
  std::vector<HostShape> host_shapes;  // grouped kernels: read at every run (grid size)

 private:
  std::string name_;
  std::deque<DeviceBuffer> buffers_;  // problem shapes, pointer and stride arrays (stable addresses)
  DeviceBuffer workspace_;
};

// The kernel's hardware info as CUTLASS's examples build it: the SM count and, for cluster
// shapes, how many clusters fit on the device.
template <class Kernel>
std::string hardware_info(const char* fn, cutlass::KernelHardwareInfo& info) {
  int device = 0;
  if (auto e = current_device(fn, device); !e.empty()) return e;
  int sms = 0;
  cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return std::string(fn) + ": " + cuda_error("cudaDeviceGetAttribute(SM count)", e);
  info = cutlass::KernelHardwareInfo::make_kernel_hardware_info<Kernel>(device, sms);
  return {};
}

}  // namespace moejit::bench::cutlass_baseline::detail
