#include "runtime/device_launcher.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "codegen/generate.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"
#include "support/log.hpp"

namespace moejit {
namespace {

// What a kernel may use without opting in, static and dynamic shared memory together.
constexpr std::uint32_t kDefaultSharedBytes = 48 * 1024;

CUdeviceptr device_pointer(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p)); }

int attribute_or_zero(const CudaApi& api, CUdevice_attribute attribute, CUdevice device) {
  int value = 0;
  return api.DeviceGetAttribute(&value, attribute, device) == CUDA_SUCCESS ? value : 0;
}

Status null_pointer(const char* what, std::size_t bytes) {
  return error(Code::invalid_argument, "{} of {} bytes with a null pointer: expected device and host addresses", what,
               bytes);
}

// A stream handle that names a stream of its own, not the null, legacy or per-thread stream
// (those stand for a stream of whichever context is current).
bool is_own_stream(CUstream stream) {
  return stream != nullptr && stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD;
}

// What loaded functions are keyed by: the driver's context id, unique for the process's life,
// because a destroyed context's handle may come back for a new context with none of its
// modules (the handle itself only where the driver predates cuCtxGetId).
std::uint64_t context_id(const CudaApi& api, CUcontext context) {
  unsigned long long id = 0;
  return api.CtxGetId != nullptr && api.CtxGetId(context, &id) == CUDA_SUCCESS
             ? id
             : static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(context));
}

}  // namespace

Result<Arch> arch_for_compute_capability(int major, int minor) {
  struct Entry {
    int major, minor;
    Arch arch;
  };
  static constexpr Entry kTable[] = {
      {8, 0, Arch::sm_80},    {8, 6, Arch::sm_86},    {8, 7, Arch::sm_87},    {8, 9, Arch::sm_89},
      {9, 0, Arch::sm_90a},   {10, 0, Arch::sm_100a}, {10, 3, Arch::sm_103a}, {11, 0, Arch::sm_110a},
      {12, 0, Arch::sm_120a}, {12, 1, Arch::sm_121a},
  };
  for (const Entry& e : kTable)
    if (e.major == major && e.minor == minor) return e.arch;
  return error(Code::unsupported,
               "compute capability {}.{} has no moejit target: expected one of 8.0, 8.6, 8.7, 8.9, 9.0, "
               "10.0, 10.3, 11.0, 12.0, 12.1",
               major, minor);
}

// The context one operation runs in (see the header): a stream's own context; else the current
// one when it is this device's; else the retained primary context. One that is not current is
// pushed for the scope.
class DeviceLauncher::ContextScope {
 public:
  ContextScope(const DeviceLauncher& launcher, void* stream) : api_(launcher.driver_->api()) {
    CUcontext current = nullptr;
    if (CUresult r = api_.CtxGetCurrent(&current); r != CUDA_SUCCESS) {
      status_ = launcher.driver_->check(r, "cuCtxGetCurrent");
      return;
    }
    status_ = is_own_stream(static_cast<CUstream>(stream)) ? enter_stream_context(launcher, stream, current)
                                                            : enter_current_or_primary(launcher, current);
  }
  ~ContextScope() {
    if (pushed_) {
      CUcontext popped = nullptr;
      (void)api_.CtxPopCurrent(&popped);
    }
  }
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

  const Status& status() const { return status_; }
  CUcontext context() const { return context_; }
  std::uint64_t id() const { return id_; }  // context_id() of context()

 private:
  const CudaApi& api_;
  Status status_;
  void set(CUcontext context) {
    context_ = context;
    id_ = context_id(api_, context);
  }

  // The stream's own context, which must be of the launcher's device.
  Status enter_stream_context(const DeviceLauncher& launcher, void* stream, CUcontext current) {
    const CudaDriver& driver = *launcher.driver_;
    CUcontext owner = nullptr;
    if (CUresult r = api_.StreamGetCtx(static_cast<CUstream>(stream), &owner); r != CUDA_SUCCESS)
      return driver.check(r, "cuStreamGetCtx", fmt::format("of stream {}", stream));
    if (owner != current) MOEJIT_TRY(push(driver, owner, "of stream {}'s context", stream));
    if (owner != launcher.primary_.load(std::memory_order_acquire)) {
      CUdevice device = -1;
      if (CUresult r = api_.CtxGetDevice(&device); r != CUDA_SUCCESS)
        return driver.check(r, "cuCtxGetDevice", fmt::format("of stream {}'s context", stream));
      if (device != launcher.info_.device)
        return error(Code::invalid_argument,
                     "stream {} belongs to a context of CUdevice {}: expected a stream of device {} ({}), the "
                     "moejit context's device",
                     stream, device, launcher.info_.ordinal, launcher.info_.name);
    }
    set(owner);
    return {};
  }

  // The current context when it is of the launcher's device, else the primary one.
  Status enter_current_or_primary(const DeviceLauncher& launcher, CUcontext current) {
    if (current != nullptr) {
      if (current == launcher.primary_.load(std::memory_order_acquire)) {
        set(current);
        return {};
      }
      CUdevice device = -1;
      // A destroyed or unusable current context is no reason to fail: the primary one will do.
      if (api_.CtxGetDevice(&device) == CUDA_SUCCESS && device == launcher.info_.device) {
        set(current);
        return {};
      }
    }
    MOEJIT_ASSIGN_OR_RETURN(CUcontext primary, launcher.primary_context());
    MOEJIT_TRY(push(*launcher.driver_, primary, "of the device's primary context"));
    set(primary);
    return {};
  }

  template <class... Args>
  Status push(const CudaDriver& driver, CUcontext context, fmt::format_string<Args...> what, Args&&... args) {
    if (CUresult r = api_.CtxPushCurrent(context); r != CUDA_SUCCESS)
      return driver.check(r, "cuCtxPushCurrent", fmt::format(what, std::forward<Args>(args)...));
    pushed_ = true;
    return {};
  }

  CUcontext context_ = nullptr;
  std::uint64_t id_ = 0;
  bool pushed_ = false;
};

Result<std::unique_ptr<DeviceLauncher>> DeviceLauncher::create(int ordinal, const CudaDriver* driver) {
  if (driver == nullptr) {
    MOEJIT_ASSIGN_OR_RETURN(driver, CudaDriver::get());
  }
  const CudaApi& api = driver->api();
  if (ordinal < 0 || ordinal >= driver->device_count())
    return error(Code::invalid_argument, "device ordinal {}: expected 0 to {} (the driver at '{}' reports {} devices)",
                 ordinal, driver->device_count() - 1, driver->path(), driver->device_count());
  DeviceInfo info;
  info.ordinal = ordinal;
  info.driver_version = driver->version();
  MOEJIT_TRY(driver->check(api.DeviceGet(&info.device, ordinal), "cuDeviceGet"));
  char name[256] = {};
  MOEJIT_TRY(driver->check(api.DeviceGetName(name, sizeof name - 1, info.device), "cuDeviceGetName"));
  info.name = name;
  MOEJIT_TRY(driver->check(
      api.DeviceGetAttribute(&info.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, info.device),
      "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)"));
  MOEJIT_TRY(driver->check(
      api.DeviceGetAttribute(&info.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, info.device),
      "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)"));
  auto arch = arch_for_compute_capability(info.cc_major, info.cc_minor);
  if (!arch.ok())
    return error(arch.status().code(), "device {} ({}): {}", ordinal, info.name, arch.status().message());
  info.arch = *arch;
  int optin = 0;
  MOEJIT_TRY(driver->check(
      api.DeviceGetAttribute(&optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, info.device),
      "cuDeviceGetAttribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)"));
  info.max_shared_per_block = static_cast<std::uint32_t>(optin);
  info.multiprocessors = attribute_or_zero(api, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, info.device);
  info.l2_bytes = static_cast<std::uint64_t>(attribute_or_zero(api, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, info.device));
  info.memory_clock_khz = attribute_or_zero(api, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, info.device);
  info.memory_bus_bits = attribute_or_zero(api, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, info.device);
  std::size_t total = 0;
  if (api.DeviceTotalMem(&total, info.device) == CUDA_SUCCESS) info.global_memory_bytes = total;
  return std::unique_ptr<DeviceLauncher>(new DeviceLauncher(driver, std::move(info)));
}

DeviceLauncher::DeviceLauncher(const CudaDriver* driver, DeviceInfo info) : driver_(driver), info_(std::move(info)) {}

DeviceLauncher::~DeviceLauncher() {
  // Modules in the device's primary context are unloaded with the launcher, whether the launcher
  // retained that context or found it current (cudart's): the context outlives the launcher and
  // would hold them (code and constant memory) for the rest of the process. One that is not
  // active is not created for it: it holds nothing of ours. Modules in other contexts are left
  // to those contexts, whose handles may be dangling by now. Failures are ignored: at process
  // exit the driver may already be shutting down.
  const CudaApi& api = driver_->api();
  CUcontext primary = primary_.load();
  if (primary == nullptr) {
    unsigned flags = 0;
    int active = 0;
    if (table_.empty() || api.DevicePrimaryCtxGetState(info_.device, &flags, &active) != CUDA_SUCCESS ||
        active == 0 || api.DevicePrimaryCtxRetain(&primary, info_.device) != CUDA_SUCCESS)
      return;
  }
  if (api.CtxPushCurrent(primary) == CUDA_SUCCESS) {
    // By id: after a reset the primary context is a new one, without the old one's modules.
    const std::uint64_t id = context_id(api, primary);
    for (const auto& [key, f] : table_)
      if (key.context_id == id) (void)api.ModuleUnload(f->module);
    CUcontext popped = nullptr;
    (void)api.CtxPopCurrent(&popped);
  }
  (void)api.DevicePrimaryCtxRelease(info_.device);  // the launcher's retain, or the one above
}

Result<CUcontext> DeviceLauncher::primary_context() const {
  if (CUcontext c = primary_.load(std::memory_order_acquire)) return c;
  std::lock_guard lock(primary_mutex_);
  if (CUcontext c = primary_.load(std::memory_order_acquire)) return c;
  CUcontext c = nullptr;
  MOEJIT_TRY(driver_->check(driver_->api().DevicePrimaryCtxRetain(&c, info_.device), "cuDevicePrimaryCtxRetain",
                            fmt::format("of device {} ({})", info_.ordinal, info_.name)));
  primary_.store(c, std::memory_order_release);
  return c;
}

const DeviceLauncher::LoadedFunction* DeviceLauncher::find(std::uint64_t context_id, const Hash128& kernel) const {
  std::shared_lock lock(table_mutex_);
  auto it = table_.find(FunctionKey{context_id, kernel});
  return it == table_.end() ? nullptr : it->second.get();
}

std::size_t DeviceLauncher::loaded_functions() const {
  std::shared_lock lock(table_mutex_);
  return table_.size();
}

Result<const DeviceLauncher::LoadedFunction*> DeviceLauncher::load(CUcontext context, std::uint64_t context_id,
                                                                    const ResolvedKernel& kernel, void* stream,
                                                                    std::uint32_t dynamic_shared_bytes) {
  std::lock_guard load_lock(load_mutex_);
  if (const LoadedFunction* f = find(context_id, kernel.key)) return f;
  const CudaApi& api = driver_->api();
  const std::string slug = codegen::spec_slug(kernel.spec);

  if (stream != nullptr) {
    MOEJIT_ASSIGN_OR_RETURN(const bool captured, capturing(stream));
    if (captured)
      return error(Code::invalid_argument,
                   "kernel {} is not loaded in context {} yet and stream {} is being captured: loading a "
                   "module is not capture-safe; expected DeviceLauncher::prepare() (or one launch) before "
                   "the capture",
                   slug, static_cast<const void*>(context), stream);
  }
  if (kernel.binary.size() < 4 || std::memcmp(kernel.binary.data(), "\x7f" "ELF", 4) != 0)
    return error(Code::invalid_argument, "kernel {}: its binary ({} bytes) is not a CUBIN: expected an ELF image",
                 slug, kernel.binary.size());

  auto f = std::make_unique<LoadedFunction>();
  MOEJIT_TRY(driver_->check(api.ModuleLoadData(&f->module, kernel.binary.data()), "cuModuleLoadData",
                            fmt::format("of kernel {} ({} bytes) on device {} ({}, {})", slug, kernel.binary.size(),
                                        info_.ordinal, info_.name, to_string(info_.arch))));
  auto fail = [&](CUresult r, std::string_view call) {
    (void)api.ModuleUnload(f->module);
    return driver_->check(r, call, fmt::format("for kernel {} (symbol '{}')", slug, kernel.meta.kernel_name));
  };
  if (CUresult r = api.ModuleGetFunction(&f->function, f->module, kernel.meta.kernel_name.c_str()); r != CUDA_SUCCESS)
    return fail(r, "cuModuleGetFunction");
  // Under lazy loading (the default since CUDA 12.2) the function would otherwise be loaded by
  // its first launch, which may be inside a graph capture or a timed region.
  if (api.FuncLoad != nullptr)
    if (CUresult r = api.FuncLoad(f->function); r != CUDA_SUCCESS) return fail(r, "cuFuncLoad");
  // The params size check is a safety net, not a requirement: a driver that cannot say leaves
  // the size unchecked rather than failing the load.
  if (api.FuncGetParamInfo != nullptr) {
    std::size_t offset = 0, size = 0;
    if (api.FuncGetParamInfo(f->function, 0, &offset, &size) == CUDA_SUCCESS) f->params_bytes = size;
  }
  int allowed = 0;
  if (CUresult r = api.FuncGetAttribute(&allowed, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f->function);
      r != CUDA_SUCCESS)
    return fail(r, "cuFuncGetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
  const std::uint32_t need = std::max(kernel.meta.dynamic_shared_bytes, dynamic_shared_bytes);
  if (need > static_cast<std::uint32_t>(allowed)) {
    if (CUresult r = api.FuncSetAttribute(f->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                          static_cast<int>(need));
        r != CUDA_SUCCESS)
      return fail(r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    allowed = static_cast<int>(need);
  }
  f->shared_limit.store(static_cast<std::uint32_t>(allowed), std::memory_order_relaxed);

  const LoadedFunction* loaded = f.get();
  std::unique_lock table_lock(table_mutex_);
  table_.emplace(FunctionKey{context_id, kernel.key}, std::move(f));
  return loaded;
}

Status DeviceLauncher::raise_shared_limit(const LoadedFunction& f, const ResolvedKernel& kernel, std::uint32_t bytes) {
  std::lock_guard load_lock(load_mutex_);
  if (f.shared_limit.load(std::memory_order_relaxed) >= bytes) return {};
  MOEJIT_TRY(driver_->check(
      driver_->api().FuncSetAttribute(f.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      static_cast<int>(bytes)),
      "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
      fmt::format("to {} bytes for kernel {}", bytes, codegen::spec_slug(kernel.spec))));
  const_cast<LoadedFunction&>(f).shared_limit.store(bytes, std::memory_order_relaxed);
  return {};
}

Status DeviceLauncher::check_launch(const ResolvedKernel& kernel, const LaunchDims& d, const void* params) const {
  if (kernel.spec.backend != Backend::device || kernel.meta.kind != store::PayloadKind::cubin)
    return error(Code::invalid_argument,
                 "kernel {}: backend '{}' with a {} payload: expected a device kernel (backend device, a CUBIN)",
                 codegen::spec_slug(kernel.spec), to_string(kernel.spec.backend),
                 kernel.meta.kind == store::PayloadKind::cubin ? "CUBIN" : "shared-object");
  if (kernel.spec.arch != info_.arch)
    return error(Code::invalid_argument,
                 "kernel {} was built for {}, but device {} ({}, compute capability {}.{}) is {}: expected a "
                 "spec with arch {}",
                 codegen::spec_slug(kernel.spec), to_string(kernel.spec.arch), info_.ordinal, info_.name,
                 info_.cc_major, info_.cc_minor, to_string(info_.arch), to_string(info_.arch));
  if (params == nullptr) return error(Code::invalid_argument, "params is null: expected a pointer to the kernel's params");
  const std::uint64_t threads = std::uint64_t{d.block[0]} * d.block[1] * d.block[2];
  if (d.block[0] < 1 || d.block[1] < 1 || d.block[2] < 1 || d.block[0] > 1024 || d.block[1] > 1024 ||
      d.block[2] > 64 || threads > 1024)
    return error(Code::invalid_argument, "dims.block = ({}, {}, {}): expected 1 to 1024 threads within (1024, 1024, 64)",
                 d.block[0], d.block[1], d.block[2]);
  if (kernel.meta.block_threads != 0 && threads > kernel.meta.block_threads)
    return error(Code::invalid_argument,
                 "dims.block = ({}, {}, {}) is {} threads: expected at most the kernel's launch bounds, {}",
                 d.block[0], d.block[1], d.block[2], threads, kernel.meta.block_threads);
  if (d.grid[0] < 1 || d.grid[1] < 1 || d.grid[2] < 1 || d.grid[0] > 2147483647u || d.grid[1] > 65535 ||
      d.grid[2] > 65535)
    return error(Code::invalid_argument, "dims.grid = ({}, {}, {}): expected every dimension in 1..(2^31-1, 65535, 65535)",
                 d.grid[0], d.grid[1], d.grid[2]);
  if (d.dynamic_shared_bytes < kernel.meta.dynamic_shared_bytes)
    return error(Code::invalid_argument, "dims.dynamic_shared_bytes = {}: expected at least the {} bytes kernel {} needs",
                 d.dynamic_shared_bytes, kernel.meta.dynamic_shared_bytes, codegen::spec_slug(kernel.spec));
  if (d.dynamic_shared_bytes > info_.max_shared_per_block)
    return error(Code::invalid_argument,
                 "dims.dynamic_shared_bytes = {}: expected at most the {} bytes a block may use on device {} ({})",
                 d.dynamic_shared_bytes, info_.max_shared_per_block, info_.ordinal, info_.name);
  return {};
}

Status DeviceLauncher::launch(const ResolvedKernel& kernel, const LaunchDims& dims, const void* params,
                              std::size_t params_bytes, void* stream) {
  MOEJIT_TRY(check_launch(kernel, dims, params));
  ContextScope scope(*this, stream);
  MOEJIT_TRY(scope.status());
  const LoadedFunction* f = find(scope.id(), kernel.key);
  if (f == nullptr) {
    MOEJIT_ASSIGN_OR_RETURN(f, load(scope.context(), scope.id(), kernel, stream, dims.dynamic_shared_bytes));
  }
  if (f->params_bytes != 0 && params_bytes != f->params_bytes)
    return error(Code::invalid_argument,
                 "params_bytes = {}: expected {}, the size of the params kernel {} was compiled with", params_bytes,
                 f->params_bytes, codegen::spec_slug(kernel.spec));
  if (dims.dynamic_shared_bytes > f->shared_limit.load(std::memory_order_relaxed))
    MOEJIT_TRY(raise_shared_limit(*f, kernel, dims.dynamic_shared_bytes));

  void* args[1] = {const_cast<void*>(params)};
  const CudaApi& api = driver_->api();
  CUresult r;
  const char* call;
  if (api.LaunchKernelEx != nullptr) {
    CUlaunchConfig config{};
    config.gridDimX = dims.grid[0];
    config.gridDimY = dims.grid[1];
    config.gridDimZ = dims.grid[2];
    config.blockDimX = dims.block[0];
    config.blockDimY = dims.block[1];
    config.blockDimZ = dims.block[2];
    config.sharedMemBytes = dims.dynamic_shared_bytes;
    config.hStream = static_cast<CUstream>(stream);
    // Launch attributes live on the stack: the hot path allocates nothing.
    CUlaunchAttribute attrs[1] = {};
    unsigned num_attrs = 0;
    if (dims.programmatic_dependent_launch && programmatic_launch_supported()) {
      attrs[num_attrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attrs[num_attrs].value.programmaticStreamSerializationAllowed = 1;
      ++num_attrs;
    }
    config.attrs = num_attrs != 0 ? attrs : nullptr;
    config.numAttrs = num_attrs;
    r = api.LaunchKernelEx(&config, f->function, args, nullptr);
    call = "cuLaunchKernelEx";
  } else {
    // No cuLaunchKernelEx (a driver before 11.8): no launch attributes, so a programmatic
    // dependent launch is an ordinary one, which is correct for any kernel (its
    // grid_dependency_wait() returns at once).
    r = api.LaunchKernel(f->function, dims.grid[0], dims.grid[1], dims.grid[2], dims.block[0], dims.block[1],
                         dims.block[2], dims.dynamic_shared_bytes, static_cast<CUstream>(stream), args, nullptr);
    call = "cuLaunchKernel";
  }
  if (r != CUDA_SUCCESS)
    return driver_->check(r, call,
                          fmt::format("launching kernel {} with grid ({}, {}, {}), block ({}, {}, {}), {} bytes of "
                                      "dynamic shared memory",
                                      codegen::spec_slug(kernel.spec), dims.grid[0], dims.grid[1], dims.grid[2],
                                      dims.block[0], dims.block[1], dims.block[2], dims.dynamic_shared_bytes));
  return {};
}

Status DeviceLauncher::prepare(const ResolvedKernel& kernel, std::uint32_t dynamic_shared_bytes) {
  LaunchDims dims;
  dims.block[0] = kernel.meta.block_threads ? kernel.meta.block_threads : 1;
  dims.dynamic_shared_bytes = std::max(kernel.meta.dynamic_shared_bytes, dynamic_shared_bytes);
  MOEJIT_TRY(check_launch(kernel, dims, &dims));
  ContextScope scope(*this, nullptr);
  MOEJIT_TRY(scope.status());
  const LoadedFunction* f = find(scope.id(), kernel.key);
  if (f == nullptr) {
    MOEJIT_ASSIGN_OR_RETURN(f, load(scope.context(), scope.id(), kernel, nullptr, dims.dynamic_shared_bytes));
  }
  if (dims.dynamic_shared_bytes > f->shared_limit.load(std::memory_order_relaxed))
    MOEJIT_TRY(raise_shared_limit(*f, kernel, dims.dynamic_shared_bytes));
  return {};
}

Status DeviceLauncher::copy_to_backend(void* dst, const void* src, std::size_t bytes, void* stream) {
  if (bytes == 0) return {};
  if (dst == nullptr || src == nullptr) return null_pointer("copy to the device", bytes);
  ContextScope scope(*this, stream);
  MOEJIT_TRY(scope.status());
  return driver_->check(driver_->api().MemcpyHtoDAsync(device_pointer(dst), src, bytes, static_cast<CUstream>(stream)),
                        "cuMemcpyHtoDAsync");
}

Status DeviceLauncher::copy_from_backend(void* dst, const void* src, std::size_t bytes, void* stream) {
  if (bytes == 0) return {};
  if (dst == nullptr || src == nullptr) return null_pointer("copy from the device", bytes);
  ContextScope scope(*this, stream);
  MOEJIT_TRY(scope.status());
  return driver_->check(driver_->api().MemcpyDtoHAsync(dst, device_pointer(src), bytes, static_cast<CUstream>(stream)),
                        "cuMemcpyDtoHAsync");
}

Status DeviceLauncher::copy_within_backend(void* dst, const void* src, std::size_t bytes, void* stream) {
  if (bytes == 0) return {};
  if (dst == nullptr || src == nullptr) return null_pointer("copy within the device", bytes);
  ContextScope scope(*this, stream);
  MOEJIT_TRY(scope.status());
  return driver_->check(
      driver_->api().MemcpyDtoDAsync(device_pointer(dst), device_pointer(src), bytes, static_cast<CUstream>(stream)),
      "cuMemcpyDtoDAsync");
}

Status DeviceLauncher::fill(void* dst, std::uint8_t value, std::size_t bytes, void* stream) {
  if (bytes == 0) return {};
  if (dst == nullptr) return null_pointer("fill", bytes);
  ContextScope scope(*this, stream);
  MOEJIT_TRY(scope.status());
  return driver_->check(driver_->api().MemsetD8Async(device_pointer(dst), value, bytes, static_cast<CUstream>(stream)),
                        "cuMemsetD8Async");
}

Status DeviceLauncher::synchronize(void* stream) {
  ContextScope scope(*this, stream);
  MOEJIT_TRY(scope.status());
  return driver_->check(driver_->api().StreamSynchronize(static_cast<CUstream>(stream)), "cuStreamSynchronize");
}

Result<bool> DeviceLauncher::capturing(void* stream) {
  ContextScope scope(*this, stream);
  MOEJIT_TRY(scope.status());
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  MOEJIT_TRY(driver_->check(driver_->api().StreamIsCapturing(static_cast<CUstream>(stream), &capture),
                            "cuStreamIsCapturing"));
  return capture != CU_STREAM_CAPTURE_STATUS_NONE;
}

Result<CUdeviceptr> DeviceLauncher::allocate(std::size_t bytes) {
  if (bytes == 0) return error(Code::invalid_argument, "allocation of 0 bytes: expected at least 1");
  ContextScope scope(*this, nullptr);
  MOEJIT_TRY(scope.status());
  CUdeviceptr p = 0;
  MOEJIT_TRY(driver_->check(driver_->api().MemAlloc(&p, bytes), "cuMemAlloc",
                            fmt::format("of {} bytes on device {} ({})", bytes, info_.ordinal, info_.name)));
  return p;
}

Status DeviceLauncher::release(CUdeviceptr ptr) {
  if (ptr == 0) return {};
  ContextScope scope(*this, nullptr);
  MOEJIT_TRY(scope.status());
  return driver_->check(driver_->api().MemFree(ptr), "cuMemFree");
}

}  // namespace moejit
