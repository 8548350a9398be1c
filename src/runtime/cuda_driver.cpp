#include "runtime/cuda_driver.hpp"

#include <dlfcn.h>
#include <link.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstddef>

#include "support/env.hpp"

namespace moejit {
namespace {

// Where each table entry lives in CudaApi: a byte offset, so that one list of names drives the
// binding, the missing-symbol report and the tests' stand-in libraries.
struct Binding {
  CudaSymbol symbol;
  std::size_t offset;
};

#define MOEJIT_CU(field, ...) Binding{CudaSymbol{#field, {__VA_ARGS__}, true}, offsetof(CudaApi, field)}
#define MOEJIT_CU_OPTIONAL(field, ...) \
  Binding{CudaSymbol{#field, {__VA_ARGS__}, false}, offsetof(CudaApi, field)}

const std::vector<Binding>& bindings() {
  static const std::vector<Binding> table = {
      MOEJIT_CU(GetErrorName, "cuGetErrorName"),
      MOEJIT_CU(GetErrorString, "cuGetErrorString"),
      MOEJIT_CU(Init, "cuInit"),
      MOEJIT_CU(DriverGetVersion, "cuDriverGetVersion"),
      MOEJIT_CU(DeviceGetCount, "cuDeviceGetCount"),
      MOEJIT_CU(DeviceGet, "cuDeviceGet"),
      MOEJIT_CU(DeviceGetName, "cuDeviceGetName"),
      MOEJIT_CU(DeviceGetAttribute, "cuDeviceGetAttribute"),
      MOEJIT_CU(DeviceTotalMem, "cuDeviceTotalMem_v2"),
      MOEJIT_CU(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
      MOEJIT_CU(DevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState"),
      MOEJIT_CU(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
      MOEJIT_CU(CtxGetCurrent, "cuCtxGetCurrent"),
      MOEJIT_CU(CtxGetDevice, "cuCtxGetDevice"),
      MOEJIT_CU(CtxPushCurrent, "cuCtxPushCurrent_v2"),
      MOEJIT_CU(CtxPopCurrent, "cuCtxPopCurrent_v2"),
      MOEJIT_CU(ModuleLoadData, "cuModuleLoadData"),
      MOEJIT_CU(ModuleUnload, "cuModuleUnload"),
      MOEJIT_CU(ModuleGetFunction, "cuModuleGetFunction"),
      MOEJIT_CU(FuncGetAttribute, "cuFuncGetAttribute"),
      MOEJIT_CU(FuncSetAttribute, "cuFuncSetAttribute"),
      MOEJIT_CU(LaunchKernel, "cuLaunchKernel"),
      MOEJIT_CU(MemAlloc, "cuMemAlloc_v2"),
      MOEJIT_CU(MemFree, "cuMemFree_v2"),
      MOEJIT_CU(MemGetInfo, "cuMemGetInfo_v2"),
      MOEJIT_CU(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"),
      MOEJIT_CU(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"),
      MOEJIT_CU(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2"),
      MOEJIT_CU(MemsetD8Async, "cuMemsetD8Async"),
      MOEJIT_CU(PointerGetAttribute, "cuPointerGetAttribute"),
      MOEJIT_CU(StreamCreate, "cuStreamCreate"),
      MOEJIT_CU(StreamDestroy, "cuStreamDestroy_v2"),
      MOEJIT_CU(StreamSynchronize, "cuStreamSynchronize"),
      MOEJIT_CU(StreamIsCapturing, "cuStreamIsCapturing"),
      MOEJIT_CU(StreamGetCtx, "cuStreamGetCtx"),
      MOEJIT_CU(StreamBeginCapture, "cuStreamBeginCapture_v2"),
      MOEJIT_CU(StreamEndCapture, "cuStreamEndCapture"),
      MOEJIT_CU(GraphInstantiate, "cuGraphInstantiateWithFlags"),
      MOEJIT_CU(GraphLaunch, "cuGraphLaunch"),
      MOEJIT_CU(GraphExecDestroy, "cuGraphExecDestroy"),
      MOEJIT_CU(GraphDestroy, "cuGraphDestroy"),
      MOEJIT_CU(EventCreate, "cuEventCreate"),
      MOEJIT_CU(EventDestroy, "cuEventDestroy_v2"),
      MOEJIT_CU(EventRecord, "cuEventRecord"),
      MOEJIT_CU(EventSynchronize, "cuEventSynchronize"),
      // Same signature; _v2 (12.8) first because cuda.h 13 names it, the original before it.
      MOEJIT_CU(EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
      MOEJIT_CU_OPTIONAL(LaunchKernelEx, "cuLaunchKernelEx"),
      MOEJIT_CU_OPTIONAL(FuncGetParamInfo, "cuFuncGetParamInfo"),
      MOEJIT_CU_OPTIONAL(FuncLoad, "cuFuncLoad"),
      MOEJIT_CU_OPTIONAL(CtxGetId, "cuCtxGetId"),
  };
  return table;
}

#undef MOEJIT_CU
#undef MOEJIT_CU_OPTIONAL

void*& slot(CudaApi& api, std::size_t offset) {
  // CudaApi holds only function pointers, each the size of a void* on the platforms CUDA runs on.
  static_assert(sizeof(void (*)()) == sizeof(void*));
  return *reinterpret_cast<void**>(reinterpret_cast<unsigned char*>(&api) + offset);
}

// Names for results a driver may fail to name itself (the toolkit's stub answers nothing).
const char* known_result_name(CUresult r) {
  switch (r) {
#define MOEJIT_NAME(code) \
  case code: return #code;
    MOEJIT_NAME(CUDA_ERROR_INVALID_VALUE)
    MOEJIT_NAME(CUDA_ERROR_OUT_OF_MEMORY)
    MOEJIT_NAME(CUDA_ERROR_NOT_INITIALIZED)
    MOEJIT_NAME(CUDA_ERROR_DEINITIALIZED)
    MOEJIT_NAME(CUDA_ERROR_STUB_LIBRARY)
    MOEJIT_NAME(CUDA_ERROR_DEVICE_UNAVAILABLE)
    MOEJIT_NAME(CUDA_ERROR_NO_DEVICE)
    MOEJIT_NAME(CUDA_ERROR_INVALID_DEVICE)
    MOEJIT_NAME(CUDA_ERROR_DEVICE_NOT_LICENSED)
    MOEJIT_NAME(CUDA_ERROR_SYSTEM_NOT_READY)
    MOEJIT_NAME(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)
    MOEJIT_NAME(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE)
    MOEJIT_NAME(CUDA_ERROR_NOT_SUPPORTED)
#undef MOEJIT_NAME
    default: return nullptr;
  }
}

}  // namespace

std::span<const CudaSymbol> cuda_symbols() {
  static const std::vector<CudaSymbol> symbols = [] {
    std::vector<CudaSymbol> out;
    for (const auto& b : bindings()) out.push_back(b.symbol);
    return out;
  }();
  return symbols;
}

Code code_for_cuda_result(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS: return Code::ok;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_DEVICE_NOT_LICENSED:
    case CUDA_ERROR_SYSTEM_NOT_READY:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_OUT_OF_MEMORY: return Code::unavailable;
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_NOT_SUPPORTED: return Code::unsupported;
    case CUDA_ERROR_INVALID_IMAGE: return Code::corrupt;
    case CUDA_ERROR_NOT_FOUND: return Code::not_found;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: return Code::invalid_argument;
    default: return Code::internal;
  }
}

Result<const CudaDriver*> CudaDriver::get() {
  // Leaked on purpose: a driver that has run cuInit is never unloaded (its threads and the
  // engine's contexts live as long as the process).
  static Result<const CudaDriver*> instance = []() -> Result<const CudaDriver*> {
    auto loaded = load_from_environment();
    if (!loaded.ok()) return loaded.status();
    return static_cast<const CudaDriver*>(std::move(loaded).value().release());
  }();
  return instance;
}

Result<std::unique_ptr<CudaDriver>> CudaDriver::load_from_environment() {
  if (auto explicit_path = env_string("MOEJIT_CUDA_LIBRARY")) {
    auto loaded = load({*explicit_path});
    if (!loaded.ok() && loaded.status().code() == Code::unavailable)
      return error(Code::unavailable, "{} (MOEJIT_CUDA_LIBRARY={})", loaded.status().message(), *explicit_path);
    return loaded;
  }
  return load({"libcuda.so.1", "libcuda.so"});
}

Result<std::unique_ptr<CudaDriver>> CudaDriver::load(const std::vector<std::string>& candidates) {
  if (candidates.empty())
    return error(Code::invalid_argument, "CudaDriver::load: no library names given: expected at least one");
  std::string tried;
  void* handle = nullptr;
  std::string opened;
  for (const auto& c : candidates) {
    handle = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      opened = c;
      break;
    }
    // dlerror's text starts with the name it tried ("libcuda.so.1: cannot open shared object
    // file: No such file or directory").
    const char* why = ::dlerror();
    tried += fmt::format("{}{}", tried.empty() ? "" : "; ", why ? std::string(why) : c + ": not loadable");
  }
  if (handle == nullptr)
    return error(Code::unavailable,
                 "no CUDA driver: {}; launches need the NVIDIA driver's libcuda.so.1 (or "
                 "MOEJIT_CUDA_LIBRARY set to its path)",
                 tried);

  std::unique_ptr<CudaDriver> driver(new CudaDriver());
  driver->handle_ = handle;
  driver->path_ = opened;
  link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr &&
      map->l_name[0] != '\0')
    driver->path_ = map->l_name;

  std::string missing;
  for (const auto& b : bindings()) {
    void* fn = nullptr;
    for (std::string_view name : b.symbol.names) {
      fn = ::dlsym(handle, std::string(name).c_str());
      if (fn != nullptr) break;
    }
    slot(driver->api_, b.offset) = fn;
    if (fn == nullptr && b.symbol.required)
      missing += fmt::format("{}{}", missing.empty() ? "" : ", ", fmt::join(b.symbol.names, " or "));
  }
  if (!missing.empty())
    return error(Code::unavailable,
                 "CUDA driver at '{}' lacks {}: expected an NVIDIA driver for CUDA 12.0 or newer",
                 driver->path_, missing);
  return initialize(std::move(driver));
}

Result<std::unique_ptr<CudaDriver>> CudaDriver::from_api(const CudaApi& api, std::string path) {
  std::unique_ptr<CudaDriver> driver(new CudaDriver());
  driver->api_ = api;
  driver->path_ = std::move(path);
  for (const auto& b : bindings())
    if (b.symbol.required && slot(driver->api_, b.offset) == nullptr)
      return error(Code::invalid_argument, "CudaApi for '{}' lacks {}: every required entry must be set",
                   driver->path_, b.symbol.field);
  return initialize(std::move(driver));
}

Result<std::unique_ptr<CudaDriver>> CudaDriver::initialize(std::unique_ptr<CudaDriver> driver) {
  const CudaApi& a = driver->api_;
  CUresult init = a.Init(0);
  driver->initialized_ = init == CUDA_SUCCESS;
  if (CUresult r = init; r != CUDA_SUCCESS) {
    const std::string why = driver->describe(r);
    return error(Code::unavailable,
                 "no usable CUDA device: cuInit in the driver at '{}' failed: {}{}", driver->path_, why,
                 r == CUDA_ERROR_STUB_LIBRARY
                     ? "; this is the toolkit's link stub, not a driver: remove its directory from "
                       "LD_LIBRARY_PATH or set MOEJIT_CUDA_LIBRARY to the driver's libcuda.so.1"
                     : "");
  }
  MOEJIT_TRY(driver->check(a.DriverGetVersion(&driver->version_), "cuDriverGetVersion"));
  MOEJIT_TRY(driver->check(a.DeviceGetCount(&driver->device_count_), "cuDeviceGetCount"));
  if (driver->device_count_ <= 0)
    return error(Code::unavailable, "no CUDA device: the driver at '{}' (version {}) reports 0 devices",
                 driver->path_, driver->version_);
  return driver;
}

CudaDriver::~CudaDriver() {
  // A driver whose cuInit succeeded stays loaded: its threads may outlive this object. One that
  // never initialized (a failed load, a stub) runs nothing and can go.
  if (handle_ != nullptr && !initialized_) ::dlclose(handle_);
}

std::string CudaDriver::describe(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.GetErrorName == nullptr || api_.GetErrorName(result, &name) != CUDA_SUCCESS || name == nullptr)
    name = known_result_name(result);
  if (api_.GetErrorString == nullptr || api_.GetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  if (text == nullptr && result == CUDA_ERROR_STUB_LIBRARY) text = "the CUDA driver is a stub library";
  return fmt::format("{} ({})", name ? name : fmt::format("CUresult {}", static_cast<int>(result)),
                     text ? text : "no description from the driver");
}

namespace {
// Faults of a running kernel: the driver reports them to whichever call on the context comes
// next, and every call after it fails the same way.
bool kernel_fault(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC: return true;
    default: return false;
  }
}
}  // namespace

Status CudaDriver::failure(CUresult result, std::string_view call, std::string_view context) const {
  return Status(code_for_cuda_result(result),
                fmt::format("{}: {}{}{}{}", call, describe(result), context.empty() ? "" : " ", context,
                            kernel_fault(result)
                                ? "; a kernel fault is reported by the next call on its context, so an earlier "
                                  "launch (of moejit or of the engine) may have caused it; the context cannot be "
                                  "used again (CUDA_LAUNCH_BLOCKING=1 or compute-sanitizer finds the kernel)"
                                : ""));
}

}  // namespace moejit
