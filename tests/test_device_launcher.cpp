// DeviceLauncher's logic, run here without a GPU: the driver is a stand-in table (CudaApi) that
// records what the launcher asks of it. Contexts, the per-(context, kernel) module table, the
// shared-memory opt-in, argument validation, the launch call itself, the memory operations and
// the hot path's allocations are all checked against it; only what the hardware does is left
// to the GPU suites.

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <utility>

#include "runtime/device_buffer.hpp"
#include "runtime/device_launcher.hpp"
#include "spec/arch.hpp"
#include "test_support.hpp"

using namespace moejit;

namespace {

// ---- The stand-in driver ----------------------------------------------------------------------

struct FakeContext {
  int device;
  unsigned long long id;  // what cuCtxGetId reports; a new context at an old handle gets a new one
};
FakeContext g_primary{0, 1}, g_engine{0, 2}, g_other_device{1, 3};
CUcontext handle(FakeContext& c) { return reinterpret_cast<CUcontext>(&c); }

char g_module_storage[64];

// A stream handle points at its context (null: a handle cuStreamGetCtx rejects).
struct FakeStream {
  CUcontext context;
};
FakeStream g_primary_stream{handle(g_primary)}, g_engine_stream{handle(g_engine)},
    g_other_device_stream{handle(g_other_device)}, g_bad_stream{nullptr};

struct FakeState {
  int cc_major = 9, cc_minor = 0;
  int devices = 2;
  CUresult init = CUDA_SUCCESS;
  std::size_t param_size = 0;
  CUresult launch_result = CUDA_SUCCESS;
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  int default_dynamic_shared = 48 * 1024;

  std::atomic<int> retains{0}, releases{0}, pushes{0}, pops{0}, loads{0}, unloads{0}, func_loads{0};
  std::atomic<int> set_attribute{0}, last_attribute_value{0}, launches_ex{0}, launches{0};
  std::atomic<int> htod{0}, dtoh{0}, dtod{0}, memsets{0}, syncs{0}, allocs{0}, frees{0}, capture_queries{0};
  std::atomic<int> stream_context_queries{0};
  bool primary_active = true;  // what cuDevicePrimaryCtxGetState reports
  CUcontext context_at_unload = nullptr;
  // The last launch; its launch attributes are copied (config.attrs points into the caller's
  // frame, which is gone by the time the test looks).
  CUlaunchConfig config{};
  CUlaunchAttribute attrs[4]{};
  std::atomic<int> programmatic_launches{0};
  CUfunction function = nullptr;
  void* first_arg = nullptr;
  CUcontext context_at_launch = nullptr;
  // The last memory operation.
  CUdeviceptr dst = 0;
  const void* host_src = nullptr;
  std::size_t bytes = 0;
  unsigned char value = 0;
  CUstream stream = nullptr;
  CUcontext context_at_memory_op = nullptr;
};
FakeState* g = nullptr;

// The calling thread's context stack, fixed-size so that the stand-in itself never allocates.
thread_local CUcontext t_stack[8];
thread_local int t_depth = 0;
CUcontext current() { return t_depth ? t_stack[t_depth - 1] : nullptr; }
void set_current(CUcontext c) {
  if (c == nullptr) t_depth = 0;
  else if (t_depth == 0) t_stack[t_depth++] = c;
  else t_stack[t_depth - 1] = c;
}

CudaApi fake_api() {
  CudaApi a{};
  a.GetErrorName = [](CUresult r, const char** s) {
    *s = r == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES ? "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" : "CUDA_ERROR_FAKE";
    return CUDA_SUCCESS;
  };
  a.GetErrorString = [](CUresult r, const char** s) {
    *s = r == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected" : "too many resources requested for launch";
    return CUDA_SUCCESS;
  };
  a.Init = [](unsigned) { return g->init; };
  a.DriverGetVersion = [](int* v) { *v = 13000; return CUDA_SUCCESS; };
  a.DeviceGetCount = [](int* n) { *n = g->devices; return CUDA_SUCCESS; };
  a.DeviceGet = [](CUdevice* d, int ordinal) { *d = ordinal; return CUDA_SUCCESS; };
  a.DeviceGetName = [](char* name, int len, CUdevice d) {
    std::snprintf(name, static_cast<std::size_t>(len), "Fake GPU %d", d);
    return CUDA_SUCCESS;
  };
  a.DeviceGetAttribute = [](int* v, CUdevice_attribute attr, CUdevice) {
    switch (attr) {
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = g->cc_major; break;
      case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = g->cc_minor; break;
      case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = 232448; break;
      case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
      case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 50 << 20; break;
      default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
  };
  a.DeviceTotalMem = [](std::size_t* b, CUdevice) { *b = std::size_t{141} << 30; return CUDA_SUCCESS; };
  a.DevicePrimaryCtxRetain = [](CUcontext* c, CUdevice) {
    ++g->retains;
    *c = handle(g_primary);
    return CUDA_SUCCESS;
  };
  a.DevicePrimaryCtxRelease = [](CUdevice) { ++g->releases; return CUDA_SUCCESS; };
  a.DevicePrimaryCtxGetState = [](CUdevice, unsigned* flags, int* active) {
    *flags = 0;
    *active = g->primary_active ? 1 : 0;
    return CUDA_SUCCESS;
  };
  a.CtxGetCurrent = [](CUcontext* c) { *c = current(); return CUDA_SUCCESS; };
  a.CtxGetDevice = [](CUdevice* d) {
    if (current() == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    *d = reinterpret_cast<FakeContext*>(current())->device;
    return CUDA_SUCCESS;
  };
  a.CtxGetId = [](CUcontext c, unsigned long long* id) {
    *id = reinterpret_cast<FakeContext*>(c)->id;
    return CUDA_SUCCESS;
  };
  a.CtxPushCurrent = [](CUcontext c) {
    ++g->pushes;
    t_stack[t_depth++] = c;
    return CUDA_SUCCESS;
  };
  a.CtxPopCurrent = [](CUcontext* c) {
    ++g->pops;
    *c = t_stack[--t_depth];
    return CUDA_SUCCESS;
  };
  a.ModuleLoadData = [](CUmodule* m, const void* image) {
    if (std::memcmp(image, "\x7f" "ELF", 4) != 0) return CUDA_ERROR_INVALID_IMAGE;
    *m = reinterpret_cast<CUmodule>(&g_module_storage[g->loads++ % 64]);
    return CUDA_SUCCESS;
  };
  a.ModuleUnload = [](CUmodule) {
    ++g->unloads;
    g->context_at_unload = current();
    return CUDA_SUCCESS;
  };
  a.ModuleGetFunction = [](CUfunction* f, CUmodule m, const char* name) {
    if (std::strcmp(name, "fake_kernel") != 0) return CUDA_ERROR_NOT_FOUND;
    *f = reinterpret_cast<CUfunction>(m);
    return CUDA_SUCCESS;
  };
  a.FuncGetAttribute = [](int* v, CUfunction_attribute attr, CUfunction) {
    if (attr != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_ERROR_INVALID_VALUE;
    *v = g->default_dynamic_shared;
    return CUDA_SUCCESS;
  };
  a.FuncSetAttribute = [](CUfunction, CUfunction_attribute attr, int v) {
    if (attr != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_ERROR_INVALID_VALUE;
    ++g->set_attribute;
    g->last_attribute_value = v;
    return CUDA_SUCCESS;
  };
  a.LaunchKernel = [](CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                      unsigned shared, CUstream stream, void** params, void** extra) {
    ++g->launches;
    g->config = CUlaunchConfig{gx, gy, gz, bx, by, bz, shared, stream, nullptr, 0};
    g->function = f;
    g->first_arg = params[0];
    g->context_at_launch = current();
    return extra == nullptr ? g->launch_result : CUDA_ERROR_INVALID_VALUE;
  };
  a.LaunchKernelEx = [](const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
    ++g->launches_ex;
    g->config = *config;
    if (config->numAttrs > 4 || (config->numAttrs > 0 && config->attrs == nullptr)) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < config->numAttrs; ++i) {
      g->attrs[i] = config->attrs[i];
      if (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
          config->attrs[i].value.programmaticStreamSerializationAllowed != 0)
        ++g->programmatic_launches;
    }
    g->config.attrs = nullptr;
    g->function = f;
    g->first_arg = params[0];
    g->context_at_launch = current();
    return extra == nullptr ? g->launch_result : CUDA_ERROR_INVALID_VALUE;
  };
  a.FuncGetParamInfo = [](CUfunction, std::size_t index, std::size_t* offset, std::size_t* size) {
    if (index != 0) return CUDA_ERROR_INVALID_VALUE;
    *offset = 0;
    *size = g->param_size;
    return CUDA_SUCCESS;
  };
  a.FuncLoad = [](CUfunction) { ++g->func_loads; return CUDA_SUCCESS; };
  a.MemAlloc = [](CUdeviceptr* p, std::size_t bytes) {
    ++g->allocs;
    *p = 0x7f0000000000ull + bytes;
    return CUDA_SUCCESS;
  };
  a.MemFree = [](CUdeviceptr) { ++g->frees; return CUDA_SUCCESS; };
  a.MemGetInfo = [](std::size_t* f, std::size_t* t) { *f = *t = 1; return CUDA_SUCCESS; };
  a.MemcpyHtoDAsync = [](CUdeviceptr dst, const void* src, std::size_t bytes, CUstream s) {
    ++g->htod;
    g->dst = dst, g->host_src = src, g->bytes = bytes, g->stream = s, g->context_at_memory_op = current();
    return CUDA_SUCCESS;
  };
  a.MemcpyDtoHAsync = [](void* dst, CUdeviceptr src, std::size_t bytes, CUstream s) {
    ++g->dtoh;
    g->dst = src, g->host_src = dst, g->bytes = bytes, g->stream = s, g->context_at_memory_op = current();
    return CUDA_SUCCESS;
  };
  a.MemcpyDtoDAsync = [](CUdeviceptr dst, CUdeviceptr, std::size_t bytes, CUstream s) {
    ++g->dtod;
    g->dst = dst, g->bytes = bytes, g->stream = s;
    return CUDA_SUCCESS;
  };
  a.MemsetD8Async = [](CUdeviceptr dst, unsigned char v, std::size_t bytes, CUstream s) {
    ++g->memsets;
    g->dst = dst, g->value = v, g->bytes = bytes, g->stream = s, g->context_at_memory_op = current();
    return CUDA_SUCCESS;
  };
  a.PointerGetAttribute = [](void*, CUpointer_attribute, CUdeviceptr) { return CUDA_ERROR_NOT_SUPPORTED; };
  a.StreamCreate = [](CUstream*, unsigned) { return CUDA_ERROR_NOT_SUPPORTED; };
  a.StreamDestroy = [](CUstream) { return CUDA_ERROR_NOT_SUPPORTED; };
  a.StreamSynchronize = [](CUstream s) {
    ++g->syncs;
    g->stream = s;
    return CUDA_SUCCESS;
  };
  a.StreamIsCapturing = [](CUstream, CUstreamCaptureStatus* status) {
    ++g->capture_queries;
    *status = g->capture;
    return CUDA_SUCCESS;
  };
  a.StreamGetCtx = [](CUstream s, CUcontext* c) {
    ++g->stream_context_queries;
    if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD) {
      *c = current();
      return current() != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    }
    *c = reinterpret_cast<FakeStream*>(s)->context;
    return *c != nullptr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  };
  a.StreamBeginCapture = [](CUstream, CUstreamCaptureMode) { return CUDA_ERROR_NOT_SUPPORTED; };
  a.StreamEndCapture = [](CUstream, CUgraph*) { return CUDA_ERROR_NOT_SUPPORTED; };
  a.GraphInstantiate = [](CUgraphExec*, CUgraph, unsigned long long) { return CUDA_ERROR_NOT_SUPPORTED; };
  a.GraphLaunch = [](CUgraphExec, CUstream) { return CUDA_ERROR_NOT_SUPPORTED; };
  a.GraphExecDestroy = [](CUgraphExec) { return CUDA_ERROR_NOT_SUPPORTED; };
  a.GraphDestroy = [](CUgraph) { return CUDA_ERROR_NOT_SUPPORTED; };
  a.EventCreate = [](CUevent*, unsigned) { return CUDA_ERROR_NOT_SUPPORTED; };
  a.EventDestroy = [](CUevent) { return CUDA_ERROR_NOT_SUPPORTED; };
  a.EventRecord = [](CUevent, CUstream) { return CUDA_ERROR_NOT_SUPPORTED; };
  a.EventSynchronize = [](CUevent) { return CUDA_ERROR_NOT_SUPPORTED; };
  a.EventElapsedTime = [](float*, CUevent, CUevent) { return CUDA_ERROR_NOT_SUPPORTED; };
  return a;
}

// A fresh stand-in per test: state, driver, and the calling thread's context stack.
struct Fake {
  FakeState state;
  std::unique_ptr<CudaDriver> driver;
  explicit Fake(CudaApi api = fake_api()) {
    g = &state;
    t_depth = 0;
    auto d = CudaDriver::from_api(api, "fake-libcuda");
    REQUIRE_MESSAGE(d.ok(), d.status().message());
    driver = std::move(d).value();
  }
  ~Fake() {
    t_depth = 0;
  }
  std::unique_ptr<DeviceLauncher> launcher(int ordinal = 0) {
    auto l = DeviceLauncher::create(ordinal, driver.get());
    REQUIRE_MESSAGE(l.ok(), l.status().message());
    return std::move(l).value();
  }
};

struct TestParams {
  std::uint64_t words[6];
};

ResolvedKernel fake_kernel(std::uint32_t dynamic_shared = 4096, std::uint64_t key = 1, Arch arch = Arch::sm_90a) {
  ResolvedKernel k;
  k.spec = test::align_spec(64, 16, 4, arch);
  k.key = Hash128{0x1234, key};
  k.meta.kind = store::PayloadKind::cubin;
  k.meta.kernel_name = "fake_kernel";
  k.meta.block_threads = 128;
  k.meta.dynamic_shared_bytes = dynamic_shared;
  k.binary = std::string("\x7f" "ELF fake cubin", 14);
  return k;
}

LaunchDims dims_of(const ResolvedKernel& k, std::uint32_t grid_x = 3) {
  LaunchDims d;
  d.grid[0] = grid_x;
  d.grid[1] = 2;
  d.block[0] = k.meta.block_threads;
  d.dynamic_shared_bytes = k.meta.dynamic_shared_bytes;
  return d;
}

CUstream fake_stream(FakeStream& s = g_primary_stream) { return reinterpret_cast<CUstream>(&s); }

bool contains(const std::string& s, std::string_view what) { return s.find(what) != std::string::npos; }

}  // namespace

#if defined(MOEJIT_SANITIZE_ADDRESS)
// AddressSanitizer's allocator calls these on every malloc and operator new of the process; the
// test counts only its own thread's, inside the measured region.
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, std::size_t),
                                                        void (*free_hook)(const volatile void*));
namespace {
thread_local bool t_counting = false;
std::atomic<long> g_allocations{0};
void count_malloc(const volatile void*, std::size_t) {
  if (t_counting) g_allocations.fetch_add(1, std::memory_order_relaxed);
}
void ignore_free(const volatile void*) {}
bool install_hooks() {
  static const bool installed = __sanitizer_install_malloc_and_free_hooks(count_malloc, ignore_free) != 0;
  return installed;
}
}  // namespace
#endif

TEST_SUITE("device") {

TEST_CASE("compute capabilities map to moejit's targets, others are unsupported naming the CC") {
  const std::pair<std::pair<int, int>, Arch> table[] = {
      {{8, 0}, Arch::sm_80},    {{8, 6}, Arch::sm_86},    {{8, 7}, Arch::sm_87},   {{8, 9}, Arch::sm_89},
      {{9, 0}, Arch::sm_90a},   {{10, 0}, Arch::sm_100a}, {{10, 3}, Arch::sm_103a}, {{11, 0}, Arch::sm_110a},
      {{12, 0}, Arch::sm_120a}, {{12, 1}, Arch::sm_121a},
  };
  for (auto [cc, arch] : table) {
    auto a = arch_for_compute_capability(cc.first, cc.second);
    REQUIRE(a.ok());
    CHECK(*a == arch);
    // Warm-up reads a family's plain name as the target its GPUs run.
    const auto plain = parse_arch(fmt::format("sm_{}{}", cc.first, cc.second));
    REQUIRE(plain.has_value());
    CHECK(runtime_target(*plain) == arch);
    CHECK(runtime_target(arch) == arch);
  }
  for (auto [major, minor] : {std::pair{7, 5}, std::pair{8, 8}, std::pair{9, 1}, std::pair{10, 1}, std::pair{13, 0}}) {
    auto a = arch_for_compute_capability(major, minor);
    REQUIRE_FALSE(a.ok());
    CHECK(a.status().code() == Code::unsupported);
    CHECK(contains(a.status().message(), fmt::format("{}.{}", major, minor)));
  }
}

TEST_CASE("a device launcher reports its device, and an unsupported CC or a bad ordinal is an error") {
  Fake fake;
  auto l = fake.launcher(1);
  CHECK(l->backend() == Backend::device);
  CHECK(l->arch() == Arch::sm_90a);
  CHECK(l->info().name == "Fake GPU 1");
  CHECK(l->info().ordinal == 1);
  CHECK(l->info().multiprocessors == 132);
  CHECK(l->info().max_shared_per_block == 232448);
  CHECK(l->info().driver_version == 13000);
  CHECK(fake.state.retains == 0);  // the primary context is retained only when needed

  auto bad = DeviceLauncher::create(2, fake.driver.get());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == Code::invalid_argument);
  CHECK(contains(bad.status().message(), "device ordinal 2: expected 0 to 1"));

  fake.state.cc_major = 7;
  fake.state.cc_minor = 5;
  auto old = DeviceLauncher::create(0, fake.driver.get());
  REQUIRE_FALSE(old.ok());
  CHECK(old.status().code() == Code::unsupported);
  CHECK(contains(old.status().message(), "Fake GPU 0"));
  CHECK(contains(old.status().message(), "7.5"));
}

TEST_CASE("a failing cuInit is unavailable with the driver's error name and text") {
  FakeState state;
  g = &state;
  state.init = CUDA_ERROR_NO_DEVICE;
  auto d = CudaDriver::from_api(fake_api(), "fake-libcuda");
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == Code::unavailable);
  CHECK(contains(d.status().message(), "cuInit"));
  CHECK(contains(d.status().message(), "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"));
  CHECK(contains(d.status().message(), "fake-libcuda"));

  state.init = CUDA_SUCCESS;
  state.devices = 0;
  auto none = CudaDriver::from_api(fake_api(), "fake-libcuda");
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().code() == Code::unavailable);
  CHECK(contains(none.status().message(), "0 devices"));

  CudaApi partial = fake_api();
  partial.MemAlloc = nullptr;
  auto incomplete = CudaDriver::from_api(partial, "fake-libcuda");
  REQUIRE_FALSE(incomplete.ok());
  CHECK(contains(incomplete.status().message(), "MemAlloc"));
}

TEST_CASE("a kernel is loaded once per context and launched with the given dims, stream and params") {
  Fake fake;
  auto l = fake.launcher();
  const ResolvedKernel k = fake_kernel();
  TestParams params{};
  fake.state.param_size = sizeof params;
  set_current(handle(g_primary));  // as cudart leaves it: the primary context current

  for (int i = 0; i < 3; ++i) {
    const Status s = l->launch(k, dims_of(k, 7), &params, sizeof params, fake_stream());
    REQUIRE_MESSAGE(s.ok(), s.message());
  }
  CHECK(fake.state.loads == 1);
  CHECK(fake.state.func_loads == 1);
  CHECK(fake.state.launches_ex == 3);
  CHECK(fake.state.launches == 0);
  CHECK(fake.state.pushes == 0);  // the current context is the device's: used as is
  CHECK(fake.state.config.gridDimX == 7);
  CHECK(fake.state.config.gridDimY == 2);
  CHECK(fake.state.config.gridDimZ == 1);
  CHECK(fake.state.config.blockDimX == 128);
  CHECK(fake.state.config.blockDimY == 1);
  CHECK(fake.state.config.sharedMemBytes == 4096);
  CHECK(fake.state.config.hStream == fake_stream());
  CHECK(fake.state.config.numAttrs == 0);
  CHECK(fake.state.first_arg == &params);  // the params struct is the kernel's one argument
  CHECK(fake.state.context_at_launch == handle(g_primary));
  CHECK(fake.state.set_attribute == 0);  // 4 KB: within the default allowance
  CHECK(l->loaded_functions() == 1);

  // Another kernel (another key): its own module.
  const ResolvedKernel other = fake_kernel(4096, 2);
  REQUIRE(l->launch(other, dims_of(other), &params, sizeof params, nullptr).ok());
  CHECK(fake.state.loads == 2);
  CHECK(l->loaded_functions() == 2);
  set_current(nullptr);
}

TEST_CASE("contexts: the engine's context on the device is used, otherwise the primary one is pushed") {
  Fake fake;
  auto l = fake.launcher();
  const ResolvedKernel k = fake_kernel();
  TestParams params{};

  SUBCASE("no current context: the primary context is retained once and pushed around each call") {
    REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, nullptr).ok());
    REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, nullptr).ok());
    CHECK(fake.state.retains == 1);
    CHECK(fake.state.pushes == 2);
    CHECK(fake.state.pops == 2);
    CHECK(fake.state.context_at_launch == handle(g_primary));
    CHECK(current() == nullptr);  // the caller's state is restored
    CHECK(fake.state.loads == 1);
  }
  SUBCASE("an engine context of the same device: used, with its own module") {
    REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, nullptr).ok());  // primary
    set_current(handle(g_engine));
    const int pushes = fake.state.pushes;
    REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, nullptr).ok());
    REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, nullptr).ok());
    CHECK(fake.state.pushes == pushes);
    CHECK(fake.state.context_at_launch == handle(g_engine));
    CHECK(fake.state.loads == 2);  // once in the primary context, once in the engine's
    CHECK(l->loaded_functions() == 2);
    CHECK(current() == handle(g_engine));
  }
  SUBCASE("an engine context destroyed and a new one created at the same handle: the kernel is loaded again") {
    REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, nullptr).ok());  // primary
    set_current(handle(g_engine));
    REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, nullptr).ok());
    CHECK(fake.state.loads == 2);
    const unsigned long long old_id = g_engine.id;
    g_engine.id = 99;  // the driver reuses the handle; the context, and its modules, are new
    REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, nullptr).ok());
    CHECK(fake.state.loads == 3);
    CHECK(fake.state.function == reinterpret_cast<CUfunction>(&g_module_storage[2]));
    g_engine.id = old_id;
  }
  SUBCASE("another device's context current: the primary context is pushed, then the caller's restored") {
    set_current(handle(g_other_device));
    REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, nullptr).ok());
    CHECK(fake.state.context_at_launch == handle(g_primary));
    CHECK(current() == handle(g_other_device));
    CHECK(fake.state.pushes == 1);
  }
  SUBCASE("another thread with no context") {
    set_current(handle(g_engine));
    REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, nullptr).ok());
    std::thread([&] {
      const Status s = l->launch(k, dims_of(k), &params, sizeof params, nullptr);
      CHECK(s.ok());
      CHECK(fake.state.context_at_launch == handle(g_primary));
      CHECK(current() == nullptr);
    }).join();
    CHECK(fake.state.loads == 2);
  }
  set_current(nullptr);
  l.reset();
  // The launcher unloads what it loaded in the primary context and releases it.
  CHECK(fake.state.releases == fake.state.retains);
  CHECK(fake.state.unloads == 1);
}

TEST_CASE("contexts: modules in the primary context are unloaded with the launcher, also where it was only current") {
  Fake fake;
  auto l = fake.launcher();
  TestParams params{};
  const ResolvedKernel a = fake_kernel(4096, 1), b = fake_kernel(4096, 2);

  SUBCASE("the primary context current as cudart leaves it, an engine context beside it") {
    set_current(handle(g_primary));
    REQUIRE(l->launch(a, dims_of(a), &params, sizeof params, nullptr).ok());
    REQUIRE(l->launch(b, dims_of(b), &params, sizeof params, nullptr).ok());
    set_current(handle(g_engine));
    REQUIRE(l->launch(a, dims_of(a), &params, sizeof params, nullptr).ok());
    CHECK(fake.state.loads == 3);
    CHECK(fake.state.retains == 0);
    set_current(nullptr);
    l.reset();
    CHECK(fake.state.unloads == 2);  // the primary context's two; the engine's one is its own
    CHECK(fake.state.context_at_unload == handle(g_primary));
    CHECK(fake.state.retains == 1);
    CHECK(fake.state.releases == 1);
    CHECK(fake.state.pushes == fake.state.pops);
  }
  SUBCASE("an inactive primary context is not created to unload from") {
    set_current(handle(g_engine));
    REQUIRE(l->launch(a, dims_of(a), &params, sizeof params, nullptr).ok());
    fake.state.primary_active = false;
    set_current(nullptr);
    l.reset();
    CHECK(fake.state.unloads == 0);
    CHECK(fake.state.retains == 0);
    CHECK(fake.state.releases == 0);
  }
  SUBCASE("a primary context reset since (a new context id): its modules are gone, nothing is unloaded") {
    set_current(handle(g_primary));
    REQUIRE(l->launch(a, dims_of(a), &params, sizeof params, nullptr).ok());
    const unsigned long long old_id = g_primary.id;
    g_primary.id = 77;
    set_current(nullptr);
    l.reset();
    g_primary.id = old_id;
    CHECK(fake.state.unloads == 0);
    CHECK(fake.state.retains == fake.state.releases);
  }
  SUBCASE("nothing loaded: the driver is not asked") {
    l.reset();
    CHECK(fake.state.retains == 0);
    CHECK(fake.state.pushes == 0);
  }
  set_current(nullptr);
}

TEST_CASE("contexts: work on a stream runs in the stream's own context, which must be of the device") {
  Fake fake;
  auto l = fake.launcher();
  const ResolvedKernel k = fake_kernel();
  TestParams params{};
  void* device = reinterpret_cast<void*>(std::uintptr_t{0x7f0000001000});
  std::uint32_t host[4] = {};

  SUBCASE("the engine's stream (a green context's, say) with the primary context current") {
    set_current(handle(g_primary));
    REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, fake_stream(g_engine_stream)).ok());
    CHECK(fake.state.context_at_launch == handle(g_engine));
    CHECK(fake.state.config.hStream == fake_stream(g_engine_stream));
    CHECK(fake.state.pushes == 1);
    CHECK(fake.state.pops == 1);
    CHECK(current() == handle(g_primary));
    REQUIRE(l->copy_to_backend(device, host, sizeof host, fake_stream(g_engine_stream)).ok());
    CHECK(fake.state.context_at_memory_op == handle(g_engine));
    REQUIRE(l->fill(device, 7, sizeof host, fake_stream(g_engine_stream)).ok());
    CHECK(fake.state.context_at_memory_op == handle(g_engine));
    // The same kernel on the primary context's stream: loaded there too, each context its own.
    REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, fake_stream(g_primary_stream)).ok());
    CHECK(fake.state.context_at_launch == handle(g_primary));
    CHECK(fake.state.loads == 2);
    CHECK(l->loaded_functions() == 2);
    CHECK(current() == handle(g_primary));
    CHECK(fake.state.pushes == fake.state.pops);
  }
  SUBCASE("no context current: the stream's context is pushed and the primary one never retained") {
    REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, fake_stream(g_engine_stream)).ok());
    REQUIRE(l->synchronize(fake_stream(g_engine_stream)).ok());
    CHECK(fake.state.context_at_launch == handle(g_engine));
    CHECK(fake.state.retains == 0);
    CHECK(current() == nullptr);
    CHECK(fake.state.pushes == 2);
    CHECK(fake.state.pops == 2);
  }
  SUBCASE("the null, legacy and per-thread handles stand for the current context's stream") {
    set_current(handle(g_engine));
    for (CUstream special : {CUstream{nullptr}, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD}) {
      REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, special).ok());
      CHECK(fake.state.context_at_launch == handle(g_engine));
      CHECK(fake.state.config.hStream == special);
    }
    CHECK(fake.state.stream_context_queries == 0);
    CHECK(fake.state.pushes == 0);
    CHECK(fake.state.loads == 1);
  }
  SUBCASE("a stream of another device's context is refused, naming the stream and both devices") {
    set_current(handle(g_primary));
    const Status s = l->launch(k, dims_of(k), &params, sizeof params, fake_stream(g_other_device_stream));
    CHECK(s.code() == Code::invalid_argument);
    CHECK(contains(s.message(), "belongs to a context of CUdevice 1"));
    CHECK(contains(s.message(), "expected a stream of device 0 (Fake GPU 0)"));
    CHECK(fake.state.launches_ex == 0);
    CHECK(fake.state.loads == 0);
    const Status f = l->fill(device, 1, sizeof host, fake_stream(g_other_device_stream));
    CHECK(f.code() == Code::invalid_argument);
    CHECK(fake.state.memsets == 0);
    CHECK(current() == handle(g_primary));  // what was pushed to check it is popped
    CHECK(fake.state.pushes == fake.state.pops);
  }
  SUBCASE("a stream the driver cannot place is an error naming cuStreamGetCtx") {
    const Status s = l->launch(k, dims_of(k), &params, sizeof params, fake_stream(g_bad_stream));
    CHECK_FALSE(s.ok());
    CHECK(contains(s.message(), "cuStreamGetCtx"));
    CHECK(fake.state.launches_ex == 0);
    CHECK(fake.state.pushes == 0);
  }
  set_current(nullptr);
}

TEST_CASE("dynamic shared memory above the default allowance is opted into once per function") {
  Fake fake;
  auto l = fake.launcher();
  TestParams params{};
  set_current(handle(g_primary));
  const ResolvedKernel big = fake_kernel(64 * 1024, 7);
  for (int i = 0; i < 4; ++i) REQUIRE(l->launch(big, dims_of(big), &params, sizeof params, nullptr).ok());
  CHECK(fake.state.set_attribute == 1);
  CHECK(fake.state.last_attribute_value == 64 * 1024);
  // A launch asking for more than the kernel's own need raises the allowance once more.
  LaunchDims more = dims_of(big);
  more.dynamic_shared_bytes = 100 * 1024;
  REQUIRE(l->launch(big, more, &params, sizeof params, nullptr).ok());
  REQUIRE(l->launch(big, more, &params, sizeof params, nullptr).ok());
  CHECK(fake.state.set_attribute == 2);
  CHECK(fake.state.last_attribute_value == 100 * 1024);
  // Exactly the default allowance needs none.
  const ResolvedKernel edge = fake_kernel(48 * 1024, 8);
  REQUIRE(l->launch(edge, dims_of(edge), &params, sizeof params, nullptr).ok());
  CHECK(fake.state.set_attribute == 2);
  set_current(nullptr);
}

TEST_CASE("launch arguments are validated before the driver is called, naming what was expected") {
  Fake fake;
  auto l = fake.launcher();
  TestParams params{};
  fake.state.param_size = sizeof params;
  const ResolvedKernel k = fake_kernel();
  auto launch_error = [&](const ResolvedKernel& kernel, const LaunchDims& d, const void* p, std::size_t bytes) {
    const Status s = l->launch(kernel, d, p, bytes, nullptr);
    CHECK_FALSE(s.ok());
    CHECK(s.code() == Code::invalid_argument);
    return s.message();
  };

  const ResolvedKernel ampere = fake_kernel(4096, 3, Arch::sm_80);
  std::string m = launch_error(ampere, dims_of(ampere), &params, sizeof params);
  CHECK(contains(m, "built for sm_80"));
  CHECK(contains(m, "is sm_90a"));
  CHECK(contains(m, "Fake GPU 0"));

  ResolvedKernel host = k;
  host.spec.backend = Backend::host;
  host.meta.kind = store::PayloadKind::host_shared_object;
  CHECK(contains(launch_error(host, dims_of(k), &params, sizeof params), "expected a device kernel"));
  CHECK(contains(launch_error(k, dims_of(k), nullptr, sizeof params), "params is null"));

  LaunchDims d = dims_of(k);
  d.block[0] = 256;
  CHECK(contains(launch_error(k, d, &params, sizeof params), "launch bounds, 128"));
  d = dims_of(k);
  d.grid[1] = 0;
  CHECK(contains(launch_error(k, d, &params, sizeof params), "dims.grid = (3, 0, 1)"));
  d = dims_of(k);
  d.dynamic_shared_bytes = 1024;
  CHECK(contains(launch_error(k, d, &params, sizeof params), "at least the 4096 bytes"));
  d = dims_of(k);
  d.dynamic_shared_bytes = 300000;
  CHECK(contains(launch_error(k, d, &params, sizeof params), "at most the 232448 bytes"));
  CHECK(fake.state.loads == 0);  // none of these reached the driver

  m = launch_error(k, dims_of(k), &params, 8);
  CHECK(contains(m, "params_bytes = 8: expected 48"));

  ResolvedKernel not_cubin = fake_kernel(4096, 9);
  not_cubin.binary = "not an ELF";
  CHECK(contains(launch_error(not_cubin, dims_of(not_cubin), &params, sizeof params), "not a CUBIN"));
}

TEST_CASE("driver failures name the call, the driver's error and the kernel") {
  Fake fake;
  auto l = fake.launcher();
  TestParams params{};
  const ResolvedKernel k = fake_kernel();
  fake.state.launch_result = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  const Status s = l->launch(k, dims_of(k), &params, sizeof params, nullptr);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == Code::internal);
  CHECK(contains(s.message(), "cuLaunchKernelEx: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (too many resources"));
  CHECK(contains(s.message(), "moe_align"));
  CHECK(contains(s.message(), "grid (3, 2, 1), block (128, 1, 1)"));
  CHECK_FALSE(contains(s.message(), "earlier launch"));  // this launch's own failure

  // A kernel fault surfaces at the next call on the context, whoever launched the kernel.
  fake.state.launch_result = CUDA_ERROR_ILLEGAL_ADDRESS;
  const Status fault = l->launch(k, dims_of(k), &params, sizeof params, nullptr);
  CHECK(contains(fault.message(), "cuLaunchKernelEx: "));
  CHECK(contains(fault.message(), "an earlier launch (of moejit or of the engine) may have caused it"));
  fake.state.launch_result = CUDA_SUCCESS;

  ResolvedKernel missing = fake_kernel(4096, 4);
  missing.meta.kernel_name = "no_such_kernel";
  const Status m = l->launch(missing, dims_of(missing), &params, sizeof params, nullptr);
  REQUIRE_FALSE(m.ok());
  CHECK(m.code() == Code::not_found);
  CHECK(contains(m.message(), "cuModuleGetFunction"));
  CHECK(contains(m.message(), "no_such_kernel"));
  CHECK(fake.state.unloads == 1);  // the module that lacked it is not kept
}

TEST_CASE("without cuLaunchKernelEx the launcher uses cuLaunchKernel") {
  CudaApi api = fake_api();
  api.LaunchKernelEx = nullptr;
  api.FuncGetParamInfo = nullptr;
  api.FuncLoad = nullptr;
  Fake fake(api);
  auto l = fake.launcher();
  TestParams params{};
  const ResolvedKernel k = fake_kernel();
  REQUIRE(l->launch(k, dims_of(k, 5), &params, sizeof params, fake_stream()).ok());
  CHECK(fake.state.launches == 1);
  CHECK(fake.state.launches_ex == 0);
  CHECK(fake.state.config.gridDimX == 5);
  CHECK(fake.state.config.blockDimX == 128);
  CHECK(fake.state.config.sharedMemBytes == 4096);
  CHECK(fake.state.config.hStream == fake_stream());
  CHECK(fake.state.first_arg == &params);
  // No parameter information from the driver: any size passes (nothing to check against).
  CHECK(l->launch(k, dims_of(k), &params, 1, nullptr).ok());
}

TEST_CASE("programmatic dependent launch passes programmatic stream serialization exactly when asked on CC 9.0+") {
  Fake fake;
  auto l = fake.launcher();
  REQUIRE(l->programmatic_launch_supported());
  TestParams params{};
  const ResolvedKernel k = fake_kernel();
  LaunchDims pdl = dims_of(k);
  pdl.programmatic_dependent_launch = true;

  REQUIRE(l->launch(k, pdl, &params, sizeof params, fake_stream()).ok());
  REQUIRE(fake.state.config.numAttrs == 1);
  CHECK(fake.state.attrs[0].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
  CHECK(fake.state.attrs[0].value.programmaticStreamSerializationAllowed == 1);
  CHECK(fake.state.programmatic_launches == 1);
  // Everything else about the launch is as without the flag.
  CHECK(fake.state.config.gridDimX == 3);
  CHECK(fake.state.config.blockDimX == 128);
  CHECK(fake.state.config.sharedMemBytes == 4096);
  CHECK(fake.state.config.hStream == fake_stream());
  CHECK(fake.state.first_arg == &params);

  // Not asked: no attribute, also right after a launch that had one.
  REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, fake_stream()).ok());
  CHECK(fake.state.config.numAttrs == 0);
  CHECK(fake.state.programmatic_launches == 1);
  REQUIRE(l->launch(k, pdl, &params, sizeof params, nullptr).ok());
  CHECK(fake.state.config.numAttrs == 1);
  CHECK(fake.state.programmatic_launches == 2);
  CHECK(fake.state.launches_ex == 3);
}

TEST_CASE("programmatic dependent launch is honoured on every CC from 9.0 and never on 8.x") {
  const struct {
    int major, minor;
    Arch arch;
    bool honoured;
  } devices[] = {
      {8, 0, Arch::sm_80, false},    {8, 6, Arch::sm_86, false},  {8, 7, Arch::sm_87, false},
      {8, 9, Arch::sm_89, false},    {9, 0, Arch::sm_90a, true},  {10, 0, Arch::sm_100a, true},
      {12, 0, Arch::sm_120a, true},  {12, 1, Arch::sm_121a, true},
  };
  for (const auto& d : devices) {
    CAPTURE(d.major);
    CAPTURE(d.minor);
    Fake fake;
    fake.state.cc_major = d.major;
    fake.state.cc_minor = d.minor;
    auto l = fake.launcher();
    REQUIRE(l->arch() == d.arch);
    CHECK(l->programmatic_launch_supported() == d.honoured);
    TestParams params{};
    const ResolvedKernel k = fake_kernel(4096, 1, d.arch);
    LaunchDims pdl = dims_of(k);
    pdl.programmatic_dependent_launch = true;
    for (int i = 0; i < 2; ++i) REQUIRE(l->launch(k, pdl, &params, sizeof params, fake_stream()).ok());
    CHECK(fake.state.launches_ex == 2);
    CHECK(fake.state.config.numAttrs == (d.honoured ? 1u : 0u));
    CHECK(fake.state.programmatic_launches == (d.honoured ? 2 : 0));
    REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, fake_stream()).ok());
    CHECK(fake.state.config.numAttrs == 0);
  }
}

TEST_CASE("without cuLaunchKernelEx a programmatic dependent launch is an ordinary cuLaunchKernel") {
  CudaApi api = fake_api();
  api.LaunchKernelEx = nullptr;
  Fake fake(api);
  auto l = fake.launcher();
  CHECK_FALSE(l->programmatic_launch_supported());
  TestParams params{};
  const ResolvedKernel k = fake_kernel();
  LaunchDims pdl = dims_of(k);
  pdl.programmatic_dependent_launch = true;
  REQUIRE(l->launch(k, pdl, &params, sizeof params, fake_stream()).ok());
  CHECK(fake.state.launches == 1);
  CHECK(fake.state.launches_ex == 0);
}

TEST_CASE("a first launch inside a stream capture is refused and prepare() loads the kernel before it") {
  Fake fake;
  auto l = fake.launcher();
  TestParams params{};
  set_current(handle(g_primary));
  const ResolvedKernel k = fake_kernel(64 * 1024);
  fake.state.capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  const Status refused = l->launch(k, dims_of(k), &params, sizeof params, fake_stream());
  REQUIRE_FALSE(refused.ok());
  CHECK(contains(refused.message(), "being captured"));
  CHECK(contains(refused.message(), "prepare()"));
  CHECK(fake.state.loads == 0);

  REQUIRE(l->prepare(k).ok());
  CHECK(fake.state.loads == 1);
  CHECK(fake.state.set_attribute == 1);
  const int queries = fake.state.capture_queries;
  REQUIRE(l->launch(k, dims_of(k), &params, sizeof params, fake_stream()).ok());
  CHECK(fake.state.capture_queries == queries);  // a loaded kernel asks nothing of the stream
  CHECK(fake.state.launches_ex == 1);
  set_current(nullptr);
}

TEST_CASE("capturing() says whether the stream is being captured, as the driver reports it") {
  Fake fake;
  auto l = fake.launcher();
  set_current(handle(g_primary));
  for (CUstreamCaptureStatus status :
       {CU_STREAM_CAPTURE_STATUS_NONE, CU_STREAM_CAPTURE_STATUS_ACTIVE, CU_STREAM_CAPTURE_STATUS_INVALIDATED}) {
    CAPTURE(static_cast<int>(status));
    fake.state.capture = status;
    auto capturing = l->capturing(fake_stream());
    REQUIRE_MESSAGE(capturing.ok(), capturing.status().message());
    // An invalidated capture is still one: the stream stays in capture mode until it ends.
    CHECK(*capturing == (status != CU_STREAM_CAPTURE_STATUS_NONE));
  }
  CHECK(fake.state.syncs == 0);
  fake.state.capture = CU_STREAM_CAPTURE_STATUS_NONE;
  set_current(nullptr);
}

TEST_CASE("memory operations go to the matching driver calls on the given stream") {
  Fake fake;
  auto l = fake.launcher();
  std::uint32_t host[4] = {1, 2, 3, 4};
  void* device = reinterpret_cast<void*>(std::uintptr_t{0x7f0000001000});

  REQUIRE(l->copy_to_backend(device, host, sizeof host, fake_stream()).ok());
  CHECK(fake.state.htod == 1);
  CHECK(fake.state.dst == 0x7f0000001000);
  CHECK(fake.state.host_src == host);
  CHECK(fake.state.bytes == sizeof host);
  CHECK(fake.state.stream == fake_stream());
  CHECK(fake.state.context_at_memory_op == handle(g_primary));  // no context current: primary

  REQUIRE(l->copy_from_backend(host, device, 8, nullptr).ok());
  CHECK(fake.state.dtoh == 1);
  CHECK(fake.state.bytes == 8);
  REQUIRE(l->fill(device, 0xab, 12, fake_stream()).ok());
  CHECK(fake.state.memsets == 1);
  CHECK(fake.state.value == 0xab);
  CHECK(fake.state.bytes == 12);
  REQUIRE(l->copy_within_backend(device, device, 16, nullptr).ok());
  CHECK(fake.state.dtod == 1);
  REQUIRE(l->synchronize(fake_stream()).ok());
  CHECK(fake.state.syncs == 1);

  // Zero bytes: nothing to do, no driver call; null pointers: an error naming the operation.
  REQUIRE(l->copy_to_backend(nullptr, nullptr, 0, nullptr).ok());
  CHECK(fake.state.htod == 1);
  const Status null_copy = l->copy_to_backend(nullptr, host, 4, nullptr);
  CHECK(null_copy.code() == Code::invalid_argument);
  CHECK(contains(null_copy.message(), "copy to the device of 4 bytes with a null pointer"));
  CHECK(l->fill(nullptr, 0, 4, nullptr).code() == Code::invalid_argument);
  CHECK(current() == nullptr);
}

TEST_CASE("DeviceBuffer frees what it allocated, once, and moves ownership") {
  Fake fake;
  auto l = fake.launcher();
  {
    auto a = DeviceBuffer::allocate(*l, 1000);
    REQUIRE(a.ok());
    CHECK(a->size() == 1000);
    CHECK(a->data() != nullptr);
    DeviceBuffer moved = std::move(a).value();
    DeviceBuffer target;
    target = std::move(moved);
    CHECK_FALSE(moved);
    CHECK(target.size() == 1000);
    CHECK(fake.state.allocs == 1);
    CHECK(fake.state.frees == 0);
  }
  CHECK(fake.state.frees == 1);
  auto zero = DeviceBuffer::allocate(*l, 0);
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.status().code() == Code::invalid_argument);
}

TEST_CASE("a launch of a loaded kernel, and the memory operations, perform no heap allocation") {
#if !defined(MOEJIT_SANITIZE_ADDRESS)
  MESSAGE("skipped: counting heap allocations uses AddressSanitizer's allocator hooks; build with "
          "-DMOEJIT_SANITIZE=address (as .ci/run does) to run this check");
#else
  REQUIRE(install_hooks());
  Fake fake;
  auto l = fake.launcher();
  TestParams params{};
  fake.state.param_size = sizeof params;
  const ResolvedKernel k = fake_kernel(64 * 1024);
  const LaunchDims d = dims_of(k);
  LaunchDims pdl = d;  // the launch attribute is on the stack too
  pdl.programmatic_dependent_launch = true;
  void* device = reinterpret_cast<void*>(std::uintptr_t{0x7f0000001000});
  std::uint32_t host[4] = {};

  // The engine's stream with its context current; the primary context's stream with none
  // current (pushed); the engine's stream with the primary context current (pushed).
  const std::pair<FakeContext*, FakeStream*> cases[] = {
      {&g_engine, &g_engine_stream}, {nullptr, &g_primary_stream}, {&g_primary, &g_engine_stream}};
  for (const auto& [context, stream_object] : cases) {
    CAPTURE(context == &g_engine);
    CAPTURE(stream_object == &g_engine_stream);
    set_current(context != nullptr ? handle(*context) : nullptr);
    const CUstream stream = fake_stream(*stream_object);
    REQUIRE(l->launch(k, d, &params, sizeof params, stream).ok());  // loads: allocates freely
    g_allocations = 0;
    t_counting = true;
    bool all_ok = true;
    for (int i = 0; i < 10000; ++i) {
      all_ok &= l->launch(k, d, &params, sizeof params, stream).ok();
      all_ok &= l->launch(k, pdl, &params, sizeof params, stream).ok();
      all_ok &= l->copy_to_backend(device, host, sizeof host, stream).ok();
      all_ok &= l->fill(device, 0, sizeof host, stream).ok();
    }
    t_counting = false;
    CHECK(all_ok);
    CHECK(g_allocations.load() == 0);
  }
  CHECK(fake.state.loads == 2);  // the engine's context and the primary one
  CHECK(fake.state.programmatic_launches == 3 * 10000);  // the flagged launches carried the attribute
  // The counter works: a failing launch formats its message.
  g_allocations = 0;
  t_counting = true;
  const Status failed = l->launch(k, d, nullptr, sizeof params, fake_stream());
  t_counting = false;
  CHECK_FALSE(failed.ok());
  CHECK(g_allocations.load() > 0);
  set_current(nullptr);
#endif
}

}  // TEST_SUITE
