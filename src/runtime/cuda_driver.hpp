#pragma once
// libcuda, loaded with dlopen at first use, so that moejit loads, compiles and warms stores on
// machines with no GPU and no driver, and reports that as a Status only when something needs
// the driver. libcuda is never linked. Search order:
//   1. $MOEJIT_CUDA_LIBRARY (a path; an error if it does not load),
//   2. libcuda.so.1, then libcuda.so, through the dynamic loader's search path.
//
// Entry points are bound by their exact ABI names: cuda.h maps e.g. cuMemAlloc to cuMemAlloc_v2
// with a macro, and the unversioned export is the legacy 32-bit-size function, so a dlsym of
// the plain name would bind the wrong signature. The table records the name bound to each entry.

#include <cuda.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.hpp"

namespace moejit {

// The driver entry points moejit uses. The types are those of cuda.h after its version macros.
struct CudaApi {
  decltype(&::cuGetErrorName) GetErrorName;
  decltype(&::cuGetErrorString) GetErrorString;
  decltype(&::cuInit) Init;
  decltype(&::cuDriverGetVersion) DriverGetVersion;
  decltype(&::cuDeviceGetCount) DeviceGetCount;
  decltype(&::cuDeviceGet) DeviceGet;
  decltype(&::cuDeviceGetName) DeviceGetName;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute;
  decltype(&::cuDeviceTotalMem_v2) DeviceTotalMem;
  decltype(&::cuDevicePrimaryCtxRetain) DevicePrimaryCtxRetain;
  decltype(&::cuDevicePrimaryCtxGetState) DevicePrimaryCtxGetState;
  decltype(&::cuDevicePrimaryCtxRelease_v2) DevicePrimaryCtxRelease;
  decltype(&::cuCtxGetCurrent) CtxGetCurrent;
  decltype(&::cuCtxGetDevice) CtxGetDevice;
  decltype(&::cuCtxPushCurrent_v2) CtxPushCurrent;
  decltype(&::cuCtxPopCurrent_v2) CtxPopCurrent;
  decltype(&::cuModuleLoadData) ModuleLoadData;
  decltype(&::cuModuleUnload) ModuleUnload;
  decltype(&::cuModuleGetFunction) ModuleGetFunction;
  decltype(&::cuFuncGetAttribute) FuncGetAttribute;
  decltype(&::cuFuncSetAttribute) FuncSetAttribute;
  decltype(&::cuLaunchKernel) LaunchKernel;
  decltype(&::cuMemAlloc_v2) MemAlloc;
  decltype(&::cuMemFree_v2) MemFree;
  decltype(&::cuMemGetInfo_v2) MemGetInfo;
  decltype(&::cuMemcpyHtoDAsync_v2) MemcpyHtoDAsync;
  decltype(&::cuMemcpyDtoHAsync_v2) MemcpyDtoHAsync;
  decltype(&::cuMemcpyDtoDAsync_v2) MemcpyDtoDAsync;
  decltype(&::cuMemsetD8Async) MemsetD8Async;
  decltype(&::cuPointerGetAttribute) PointerGetAttribute;
  decltype(&::cuStreamCreate) StreamCreate;
  decltype(&::cuStreamDestroy_v2) StreamDestroy;
  decltype(&::cuStreamSynchronize) StreamSynchronize;
  decltype(&::cuStreamIsCapturing) StreamIsCapturing;
  decltype(&::cuStreamGetCtx) StreamGetCtx;
  decltype(&::cuStreamBeginCapture_v2) StreamBeginCapture;
  decltype(&::cuStreamEndCapture) StreamEndCapture;
  decltype(&::cuGraphInstantiateWithFlags) GraphInstantiate;
  decltype(&::cuGraphLaunch) GraphLaunch;
  decltype(&::cuGraphExecDestroy) GraphExecDestroy;
  decltype(&::cuGraphDestroy) GraphDestroy;
  decltype(&::cuEventCreate) EventCreate;
  decltype(&::cuEventDestroy_v2) EventDestroy;
  decltype(&::cuEventRecord) EventRecord;
  decltype(&::cuEventSynchronize) EventSynchronize;
  decltype(&::cuEventElapsedTime) EventElapsedTime;  // _v2 where the driver has it

  // Optional: null when the driver predates them; moejit then does without.
  decltype(&::cuLaunchKernelEx) LaunchKernelEx = nullptr;      // 11.8: else cuLaunchKernel
  decltype(&::cuFuncGetParamInfo) FuncGetParamInfo = nullptr;  // 12.4: else no params size check
  decltype(&::cuFuncLoad) FuncLoad = nullptr;                  // 12.4: else loaded at first launch
  decltype(&::cuCtxGetId) CtxGetId = nullptr;                  // 12.0: else contexts known by handle
};

// One entry of the table: the member, the exported names tried in order, and whether the
// library is unusable without it. Exposed so tests can build stand-in libraries from it.
struct CudaSymbol {
  std::string_view field;              // "MemAlloc"
  std::vector<std::string_view> names;  // {"cuMemAlloc_v2"}
  bool required = true;
};
std::span<const CudaSymbol> cuda_symbols();

// The Status code for a failed CUresult: a missing, stub, mismatched or unusable driver or
// device and out-of-memory are `unavailable`; a CUBIN the device cannot run is `unsupported`
// (or `corrupt` when the image is malformed); a missing symbol `not_found`; bad handles and
// values `invalid_argument`; the rest `internal`.
Code code_for_cuda_result(CUresult result);

class CudaDriver {
 public:
  // The process-wide driver from MOEJIT_CUDA_LIBRARY or the default names, loaded and
  // initialized (cuInit) on first call; the result, failure included, is kept for the process.
  static Result<const CudaDriver*> get();

  // Loads and initializes the first of `candidates` that dlopen accepts. For tests and tools
  // that need a driver other than the process-wide one; each call loads anew.
  static Result<std::unique_ptr<CudaDriver>> load(const std::vector<std::string>& candidates);
  // load() with the candidates the environment selects (see the top of this file).
  static Result<std::unique_ptr<CudaDriver>> load_from_environment();
  // A driver over a given table (a test double), initialized the same way as a loaded one.
  static Result<std::unique_ptr<CudaDriver>> from_api(const CudaApi& api, std::string path);

  ~CudaDriver();
  CudaDriver(const CudaDriver&) = delete;
  CudaDriver& operator=(const CudaDriver&) = delete;

  const CudaApi& api() const { return api_; }
  const std::string& path() const { return path_; }
  int version() const { return version_; }  // cuDriverGetVersion: 13000 for 13.0
  int device_count() const { return device_count_; }

  // OK for CUDA_SUCCESS; otherwise a Status naming `call` and the driver's error name and
  // string: "cuModuleLoadData: CUDA_ERROR_NO_BINARY_FOR_GPU (no kernel image is available for
  // execution on the device)". Formats only on failure.
  Status check(CUresult result, std::string_view call) const {
    if (result == CUDA_SUCCESS) return {};
    return failure(result, call, {});
  }
  // As check(), with `context` appended ("... while loading kernel X").
  Status check(CUresult result, std::string_view call, std::string_view context) const {
    if (result == CUDA_SUCCESS) return {};
    return failure(result, call, context);
  }
  // "CUDA_ERROR_X (text)" of a result.
  std::string describe(CUresult result) const;

 private:
  CudaDriver() = default;
  static Result<std::unique_ptr<CudaDriver>> initialize(std::unique_ptr<CudaDriver> driver);
  Status failure(CUresult result, std::string_view call, std::string_view context) const;

  void* handle_ = nullptr;  // null for a table given by a test
  CudaApi api_{};
  std::string path_;
  bool initialized_ = false;  // cuInit succeeded
  int version_ = 0;
  int device_count_ = 0;
};

}  // namespace moejit
