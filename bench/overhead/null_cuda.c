/* A null CUDA driver: a libcuda that reports one sm_90 device and whose every operation succeeds
   without a GPU. Launches do nothing and return at once; "device" memory is host memory, so
   copies and memsets behave. Loaded by bench_host_overhead through MOEJIT_CUDA_LIBRARY to time
   moejit's own host path, from an API call to the driver's launch entry point, on a machine
   with no GPU. Not a test double for results: nothing a kernel would compute is computed.

   It exports the entry points runtime/cuda_driver binds (cuda_symbols()); events record the
   host time; graphs are not supported; of the launch attributes, programmatic stream
   serialization is accepted and counted. bench_gemm also runs on it (a test of its plumbing: no
   kernel computes anything, so every output check fails as it must). MOEJIT_NULL_CUDA_CC="M.m"
   and MOEJIT_NULL_CUDA_SMS=N make it report another compute capability and SM count (the tests
   of how moejit treats other GPUs: ones it has no target for, stores warmed for a family). */

#include <cuda.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_primary_context;  /* the device's one context: its address is the handle */
static int g_stream;
static _Thread_local CUcontext t_stack[16];
static _Thread_local int t_depth;
static unsigned long long g_launches;
static unsigned long long g_programmatic_launches;

CUresult cuGetErrorName(CUresult error, const char** name) {
  *name = error == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR_NOT_SUPPORTED";
  return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult error, const char** text) {
  *text = error == CUDA_SUCCESS ? "no error" : "not supported by moejit's null driver";
  return CUDA_SUCCESS;
}
CUresult cuInit(unsigned int flags) { return flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE; }
CUresult cuDriverGetVersion(int* version) { *version = CUDA_VERSION; return CUDA_SUCCESS; }
CUresult cuDeviceGetCount(int* count) { *count = 1; return CUDA_SUCCESS; }
CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char* name, int len, CUdevice device) {
  (void)device;
  strncpy(name, "moejit null driver (no GPU)", (size_t)len);
  if (len > 0) name[len - 1] = 0;
  return CUDA_SUCCESS;
}
/* The compute capability: 9.0, or MOEJIT_NULL_CUDA_CC ("M.m"). */
static int compute_capability(int minor) {
  const char* cc = getenv("MOEJIT_NULL_CUDA_CC");
  int major_value = 9, minor_value = 0;
  if (cc != NULL && cc[0] >= '0' && cc[0] <= '9') {
    char* end = NULL;
    major_value = (int)strtol(cc, &end, 10);
    minor_value = end != NULL && *end == '.' ? (int)strtol(end + 1, NULL, 10) : 0;
  }
  return minor ? minor_value : major_value;
}
CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice device) {
  (void)device;
  switch (attribute) {  /* an H200's values */
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = compute_capability(0); break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = compute_capability(1); break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = 227 * 1024; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: {
      const char* sms = getenv("MOEJIT_NULL_CUDA_SMS");
      *value = sms != NULL && atoi(sms) > 0 ? atoi(sms) : 132;
      break;
    }
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *value = 60 * 1024 * 1024; break;
    default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}
CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  (void)device;
  *bytes = (size_t)141 << 30;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  (void)device;
  *context = (CUcontext)&g_primary_context;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) { (void)device; return CUDA_SUCCESS; }
CUresult cuDevicePrimaryCtxGetState(CUdevice device, unsigned int* flags, int* active) {
  (void)device;
  *flags = 0;
  *active = 1;
  return CUDA_SUCCESS;
}
CUresult cuCtxGetCurrent(CUcontext* context) {
  *context = t_depth > 0 ? t_stack[t_depth - 1] : NULL;
  return CUDA_SUCCESS;
}
CUresult cuCtxGetDevice(CUdevice* device) {
  if (t_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  *device = 0;
  return CUDA_SUCCESS;
}
CUresult cuCtxPushCurrent_v2(CUcontext context) {
  if (t_depth == 16) return CUDA_ERROR_NOT_SUPPORTED;
  t_stack[t_depth++] = context;
  return CUDA_SUCCESS;
}
CUresult cuCtxPopCurrent_v2(CUcontext* context) {
  if (t_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  --t_depth;
  if (context) *context = t_stack[t_depth];
  return CUDA_SUCCESS;
}

/* A module or function is a small heap block; the image is not looked at. */
CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  if (image == NULL) return CUDA_ERROR_INVALID_IMAGE;
  *module = (CUmodule)malloc(16);
  return *module ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuModuleUnload(CUmodule module) { free(module); return CUDA_SUCCESS; }
CUresult cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
  if (module == NULL || name == NULL) return CUDA_ERROR_INVALID_HANDLE;
  *function = (CUfunction)module;
  return CUDA_SUCCESS;
}
CUresult cuFuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction function) {
  (void)function;
  *value = attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ? 48 * 1024 : 0;
  return CUDA_SUCCESS;
}
CUresult cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
  (void)function, (void)attribute, (void)value;
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, CUstream stream, void** params, void** extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)params,
      (void)extra;
  ++g_launches;
  return CUDA_SUCCESS;
}
/* Launch attributes: programmatic stream serialization (programmatic dependent launch) is
   accepted and counted; any other attribute is refused, so a caller that starts passing one
   finds out here rather than in a benchmark that silently ignores it. */
CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra) {
  (void)f, (void)params, (void)extra;
  if (config == NULL || (config->numAttrs > 0 && config->attrs == NULL)) return CUDA_ERROR_INVALID_VALUE;
  int programmatic = 0;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    if (config->attrs[i].id != CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) return CUDA_ERROR_NOT_SUPPORTED;
    programmatic = config->attrs[i].value.programmaticStreamSerializationAllowed != 0;
  }
  ++g_launches;
  g_programmatic_launches += (unsigned long long)programmatic;
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  void* p = aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (p == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}
CUresult cuMemFree_v2(CUdeviceptr ptr) { free((void*)(uintptr_t)ptr); return CUDA_SUCCESS; }
CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = (size_t)140 << 30;
  *total_bytes = (size_t)141 << 30;
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
  (void)stream;
  memcpy((void*)(uintptr_t)dst, src, bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  (void)stream;
  memcpy(dst, (const void*)(uintptr_t)src, bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
  (void)stream;
  memmove((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, bytes);
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream) {
  (void)stream;
  memset((void*)(uintptr_t)dst, value, count);
  return CUDA_SUCCESS;
}
CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  (void)data, (void)attribute, (void)ptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  (void)flags;
  *stream = (CUstream)&g_stream;
  return CUDA_SUCCESS;
}
CUresult cuStreamDestroy_v2(CUstream stream) { (void)stream; return CUDA_SUCCESS; }
CUresult cuStreamSynchronize(CUstream stream) { (void)stream; return CUDA_SUCCESS; }
/* A stream of its own belongs to the one context; the special handles name the current one. */
CUresult cuStreamGetCtx(CUstream stream, CUcontext* context) {
  if (stream != NULL && stream != CU_STREAM_LEGACY && stream != CU_STREAM_PER_THREAD) {
    *context = (CUcontext)&g_primary_context;
    return CUDA_SUCCESS;
  }
  if (t_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  *context = t_stack[t_depth - 1];
  return CUDA_SUCCESS;
}
CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  (void)stream;
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

/* Events record the host time (all work is done when it is queued). */
CUresult cuEventCreate(CUevent* e, unsigned int f) {
  (void)f;
  *e = (CUevent)calloc(1, sizeof(struct timespec));
  return *e ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuEventDestroy_v2(CUevent e) { free(e); return CUDA_SUCCESS; }
CUresult cuEventRecord(CUevent e, CUstream s) {
  (void)s;
  clock_gettime(CLOCK_MONOTONIC, (struct timespec*)e);
  return CUDA_SUCCESS;
}
CUresult cuEventSynchronize(CUevent e) { (void)e; return CUDA_SUCCESS; }
CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  const struct timespec* t0 = (const struct timespec*)a;
  const struct timespec* t1 = (const struct timespec*)b;
  *ms = (float)((double)(t1->tv_sec - t0->tv_sec) * 1e3 + (double)(t1->tv_nsec - t0->tv_nsec) * 1e-6);
  return CUDA_SUCCESS;
}

/* Graphs: not supported (callers fall back to stream launches). */
CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode m) { (void)s, (void)m; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuStreamEndCapture(CUstream s, CUgraph* g) { (void)s, (void)g; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuGraphInstantiateWithFlags(CUgraphExec* e, CUgraph g, unsigned long long f) {
  (void)e, (void)g, (void)f;
  return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult cuGraphLaunch(CUgraphExec e, CUstream s) { (void)e, (void)s; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuGraphExecDestroy(CUgraphExec e) { (void)e; return CUDA_ERROR_NOT_SUPPORTED; }
CUresult cuGraphDestroy(CUgraph g) { (void)g; return CUDA_ERROR_NOT_SUPPORTED; }

/* For the benchmark: launches the driver was asked for, and those of them that allowed
   programmatic stream serialization. */
unsigned long long moejit_null_cuda_launches(void) { return g_launches; }
unsigned long long moejit_null_cuda_programmatic_launches(void) { return g_programmatic_launches; }
