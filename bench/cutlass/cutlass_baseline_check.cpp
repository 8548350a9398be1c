// cutlass_baseline_check: runs each precompiled CUTLASS baseline (cutlass_baselines.hpp) on a
// small random problem on the GPU and compares every output with an fp64 host reference.
//
// One JSON object per kernel run on stdout. Exit status: 0 when every check passes, 1 when one
// fails, 2 when there is no GPU to check on (no driver, no device, or not compute capability 9.0:
// the kernels are sm_90a only).
//
// The inputs are chosen so that the kernels' arithmetic is exact up to the final bf16 rounding of
// D: activations (bf16 or e4m3) and bf16 weights are multiples of 1/8 in [-1, 1], bf16 int4 scales
// have two significant bits and e4m3 ones are powers of two (so each value x scale is exact in
// e4m3 too), so every product and fp32 partial sum is exact. Outputs are filled with 0xFF
// bytes (bf16 NaN) before each run, so an element the kernel does not write fails. Each plan runs
// twice: launched directly, then captured in a CUDA graph and the graph launched.

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/cutlass/cutlass_baselines.hpp"

namespace {

namespace cb = moejit::bench::cutlass_baseline;

std::uint16_t to_bf16(float f) {  // round to nearest even (the inputs here are exact anyway)
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

double from_bf16(std::uint16_t h) {
  std::uint32_t u = std::uint32_t(h) << 16;
  float f = 0;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

std::string cuda_error(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// Device memory for one check; errors are recorded, not thrown.
class Device {
 public:
  ~Device() {
    for (void* p : allocations_) cudaFree(p);
  }
  void* alloc(std::size_t bytes) {
    void* p = nullptr;
    if (cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
      fail(cuda_error("cudaMalloc", e));
      return nullptr;
    }
    allocations_.push_back(p);
    return p;
  }
  template <class T>
  void* upload(const std::vector<T>& host) {
    void* p = alloc(host.size() * sizeof(T));
    if (p != nullptr)
      if (cudaError_t e = cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice); e != cudaSuccess)
        fail(cuda_error("cudaMemcpy to the device", e));
    return p;
  }
  void fail(const std::string& e) {
    if (error.empty()) error = e;
  }
  std::string error;

 private:
  std::vector<void*> allocations_;
};

// One output matrix and its fp64 reference.
struct Output {
  void* device = nullptr;
  std::size_t elements = 0;
  std::vector<double> reference;
};

struct Comparison {
  double max_abs_error = 0, rel_error = 0;
  std::size_t nan = 0;
};

Comparison compare(const std::vector<Output>& outputs, std::string& error) {
  Comparison c;
  double err2 = 0, ref2 = 0;
  for (const Output& o : outputs) {
    std::vector<std::uint16_t> host(o.elements);
    if (cudaError_t e = cudaMemcpy(host.data(), o.device, o.elements * 2, cudaMemcpyDeviceToHost); e != cudaSuccess) {
      error = cuda_error("cudaMemcpy of the output", e);
      return c;
    }
    for (std::size_t i = 0; i < o.elements; ++i) {
      const double v = from_bf16(host[i]), r = o.reference[i];
      if (std::isnan(v)) {
        ++c.nan;
        continue;
      }
      const double d = std::abs(v - r);
      c.max_abs_error = std::max(c.max_abs_error, d);
      err2 += d * d;
      ref2 += r * r;
    }
  }
  c.rel_error = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  return c;
}

std::string poison(const std::vector<Output>& outputs, cudaStream_t stream) {
  for (const Output& o : outputs)
    if (cudaError_t e = cudaMemsetAsync(o.device, 0xFF, o.elements * 2, stream); e != cudaSuccess)
      return cuda_error("cudaMemsetAsync (poison)", e);
  return {};
}

// Runs `plan` directly and through a CUDA graph, comparing the outputs after each; prints the
// JSON line and returns whether both passed.
bool check_plan(const char* kernel, const std::string& problem, cb::PlanResult prepared,
                const std::vector<Output>& outputs, cudaStream_t stream) {
  std::string error = prepared.error, config;
  Comparison direct, graph;
  auto sync = [&](const char* what) {
    if (!error.empty()) return;
    if (cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) error = cuda_error(what, e);
  };
  if (prepared.plan) {
    cb::Plan& plan = *prepared.plan;
    config = plan.name();
    error = poison(outputs, stream);
    if (error.empty()) error = plan.run(stream);
    sync("the direct run");
    if (error.empty()) direct = compare(outputs, error);

    if (error.empty()) error = poison(outputs, stream);
    sync("the poison fill");
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (error.empty()) {
      if (cudaError_t e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal); e != cudaSuccess)
        error = cuda_error("cudaStreamBeginCapture", e);
      else {
        std::string run_error = plan.run(stream);
        cudaError_t end = cudaStreamEndCapture(stream, &g);
        if (!run_error.empty()) error = "captured run: " + run_error;
        else if (end != cudaSuccess) error = cuda_error("cudaStreamEndCapture", end);
      }
    }
    if (error.empty())
      if (cudaError_t e = cudaGraphInstantiate(&exec, g, 0); e != cudaSuccess) error = cuda_error("cudaGraphInstantiate", e);
    if (error.empty())
      if (cudaError_t e = cudaGraphLaunch(exec, stream); e != cudaSuccess) error = cuda_error("cudaGraphLaunch", e);
    sync("the graph launch");
    if (error.empty()) graph = compare(outputs, error);
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    if (g != nullptr) cudaGraphDestroy(g);
  }
  auto ok = [](const Comparison& c) { return c.nan == 0 && c.rel_error < 1e-2; };
  const bool pass = error.empty() && ok(direct) && ok(graph);
  std::printf("{\"kernel\": %s, \"config\": %s, \"problem\": %s, \"max_abs_error\": %.6g, \"rel_error\": %.6g, "
              "\"nan\": %zu, \"graph_max_abs_error\": %.6g, \"graph_rel_error\": %.6g, \"graph_nan\": %zu, "
              "\"error\": %s, \"pass\": %s}\n",
              json_string(kernel).c_str(), json_string(config).c_str(), json_string(problem).c_str(),
              direct.max_abs_error, direct.rel_error, direct.nan, graph.max_abs_error, graph.rel_error, graph.nan,
              json_string(error).c_str(), pass ? "true" : "false");
  std::fflush(stdout);
  return pass;
}

std::string describe(const std::vector<int>& m, int n, int k) {
  std::string s = "m = {";
  for (std::size_t i = 0; i < m.size(); ++i) s += (i ? ", " : "") + std::to_string(m[i]);
  return s + "}, n = " + std::to_string(n) + ", k = " + std::to_string(k);
}

// Multiples of 1/8 in [-1, 1]: exact in bf16, exact products.
std::vector<float> eighths(std::mt19937_64& rng, std::size_t count) {
  std::uniform_int_distribution<int> dist(-8, 8);
  std::vector<float> v(count);
  for (float& x : v) x = static_cast<float>(dist(rng)) / 8.0f;
  return v;
}

// e4m3 (bias 7) of a multiple of 1/8 in [-1, 1] or a power of two in [2^-6, 1]: exact.
std::uint8_t to_e4m3(float f) {
  if (f == 0) return 0;
  const std::uint8_t sign = f < 0 ? 0x80 : 0;
  int e = 0;
  const float m = std::frexp(std::abs(f), &e);  // f = m 2^e, m in [0.5, 1)
  const int mantissa = static_cast<int>(m * 16) - 8;  // 3 bits after the leading one
  return static_cast<std::uint8_t>(sign | ((e - 1 + 7) << 3) | mantissa);
}

std::vector<std::uint8_t> e4m3_of(const std::vector<float>& v) {
  std::vector<std::uint8_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = to_e4m3(v[i]);
  return out;
}

std::vector<std::uint16_t> bf16_of(const std::vector<float>& v) {
  std::vector<std::uint16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = to_bf16(v[i]);
  return out;
}

// D = A . W^T reference, W given as doubles [n][k].
std::vector<double> reference(const std::vector<float>& a, const std::vector<double>& w, int m, int n, int k) {
  std::vector<double> d(static_cast<std::size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int c = 0; c < k; ++c) s += double(a[std::size_t(i) * k + c]) * w[std::size_t(j) * k + c];
      d[std::size_t(i) * n + j] = s;
    }
  return d;
}

bool check_bf16_grouped(std::mt19937_64& rng, cudaStream_t stream, const std::vector<int>& m, int n, int k) {
  Device dev;
  cb::GroupedProblem p;
  p.n = n;
  p.k = k;
  p.m = m;
  std::vector<Output> outputs;
  for (int rows : m) {
    std::vector<float> a = eighths(rng, std::size_t(rows) * k), w = eighths(rng, std::size_t(n) * k);
    p.a.push_back(dev.upload(bf16_of(a)));
    p.w.push_back(dev.upload(bf16_of(w)));
    Output o;
    o.elements = std::size_t(rows) * n;
    o.device = dev.alloc(o.elements * 2);
    o.reference = reference(a, std::vector<double>(w.begin(), w.end()), rows, n, k);
    p.d.push_back(o.device);
    outputs.push_back(std::move(o));
  }
  cb::PlanResult r = dev.error.empty() ? cb::prepare_bf16_grouped(p) : cb::PlanResult{nullptr, dev.error};
  return check_plan("bf16_grouped", describe(m, n, k), std::move(r), outputs, stream);
}

// What differs between the two int4 kernels' checks: how scales and activations are encoded,
// which scales keep the arithmetic exact, and the entry points.
struct Int4Kernel {
  const char* name;
  std::vector<float> scale_values;
  std::string (*weight_bytes)(const std::int8_t*, int, int, std::vector<std::uint8_t>&);
  std::string (*scale_bytes)(const std::vector<float>& scales, int n, int k, int group, std::vector<std::uint8_t>& out);
  std::vector<std::uint8_t> (*act_bytes)(const std::vector<float>&);
  cb::PlanResult (*prepare)(const cb::GroupedProblem&, int);
};

template <class T>
std::vector<std::uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<std::uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// int4 x bf16: bf16 scales with two significant bits.
const Int4Kernel kInt4Bf16 = {
    "int4_grouped",
    {1.0f / 16, 1.0f / 32, 3.0f / 64, 3.0f / 128},
    cb::int4_weight_bytes,
    [](const std::vector<float>& s, int n, int k, int group, std::vector<std::uint8_t>& out) {
      std::vector<std::uint16_t> bf16;
      std::string e = cb::int4_scale_bytes(bf16_of(s).data(), n, k, group, bf16);
      out = bytes_of(bf16);
      return e;
    },
    [](const std::vector<float>& a) { return bytes_of(bf16_of(a)); },
    cb::prepare_int4_grouped,
};

// W4A8: e4m3 activations and e4m3 power-of-two group scales.
const Int4Kernel kInt4E4m3 = {
    "int4_fp8_grouped",
    {1.0f / 4, 1.0f / 8, 1.0f / 16, 1.0f / 32},
    cb::int4_fp8_weight_bytes,
    [](const std::vector<float>& s, int n, int k, int group, std::vector<std::uint8_t>& out) {
      return cb::int4_fp8_scale_bytes(e4m3_of(s).data(), n, k, group, out);
    },
    e4m3_of,
    cb::prepare_int4_fp8_grouped,
};

bool check_int4_grouped(const Int4Kernel& kernel, std::mt19937_64& rng, cudaStream_t stream, const std::vector<int>& m,
                        int n, int k, int group) {
  Device dev;
  cb::GroupedProblem p;
  p.n = n;
  p.k = k;
  p.m = m;
  std::vector<Output> outputs;
  std::uniform_int_distribution<int> q_dist(-8, 7);
  std::uniform_int_distribution<std::size_t> s_dist(0, kernel.scale_values.size() - 1);
  for (int rows : m) {
    const int groups = k / group;
    std::vector<std::int8_t> q(std::size_t(n) * k);
    for (auto& x : q) x = static_cast<std::int8_t>(q_dist(rng));
    std::vector<float> s(std::size_t(n) * groups);
    for (float& x : s) x = kernel.scale_values[s_dist(rng)];
    std::vector<double> w(q.size());  // dequantized
    for (int j = 0; j < n; ++j)
      for (int c = 0; c < k; ++c)
        w[std::size_t(j) * k + c] = double(q[std::size_t(j) * k + c]) * s[std::size_t(j) * groups + c / group];
    std::vector<std::uint8_t> w_bytes, s_bytes;
    if (auto e = kernel.weight_bytes(q.data(), n, k, w_bytes); !e.empty()) dev.fail(e);
    if (auto e = kernel.scale_bytes(s, n, k, group, s_bytes); !e.empty()) dev.fail(e);
    std::vector<float> a = eighths(rng, std::size_t(rows) * k);
    p.a.push_back(dev.upload(kernel.act_bytes(a)));
    p.w.push_back(dev.upload(w_bytes));
    p.scales.push_back(dev.upload(s_bytes));
    Output o;
    o.elements = std::size_t(rows) * n;
    o.device = dev.alloc(o.elements * 2);
    o.reference = reference(a, w, rows, n, k);
    p.d.push_back(o.device);
    outputs.push_back(std::move(o));
  }
  cb::PlanResult r = dev.error.empty() ? kernel.prepare(p, group) : cb::PlanResult{nullptr, dev.error};
  return check_plan(kernel.name, describe(m, n, k) + ", group = " + std::to_string(group), std::move(r), outputs,
                    stream);
}

bool check_bf16_dense(std::mt19937_64& rng, cudaStream_t stream, int m, int n, int k) {
  Device dev;
  std::vector<float> a = eighths(rng, std::size_t(m) * k), w = eighths(rng, std::size_t(n) * k);
  void* da = dev.upload(bf16_of(a));
  void* dw = dev.upload(bf16_of(w));
  Output o;
  o.elements = std::size_t(m) * n;
  o.device = dev.alloc(o.elements * 2);
  o.reference = reference(a, std::vector<double>(w.begin(), w.end()), m, n, k);
  std::vector<Output> outputs;
  outputs.push_back(std::move(o));
  cb::PlanResult r = dev.error.empty() ? cb::prepare_bf16_dense(m, n, k, da, dw, outputs[0].device)
                                       : cb::PlanResult{nullptr, dev.error};
  return check_plan("bf16_dense", std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k), std::move(r),
                    outputs, stream);
}

}  // namespace

int main() {
  std::fprintf(stderr, "cutlass_baseline_check: %s\n", cb::build_info().c_str());
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess) {
    std::fprintf(stderr, "cutlass_baseline_check: no GPU to check on: %s\n", cuda_error("cudaGetDeviceCount", e).c_str());
    return 2;
  }
  if (count == 0) {
    std::fprintf(stderr, "cutlass_baseline_check: no GPU to check on: no CUDA device visible\n");
    return 2;
  }
  cudaDeviceProp prop{};
  if (cudaError_t e = cudaGetDeviceProperties(&prop, 0); e != cudaSuccess) {
    std::fprintf(stderr, "cutlass_baseline_check: no GPU to check on: %s\n",
                 cuda_error("cudaGetDeviceProperties", e).c_str());
    return 2;
  }
  if (prop.major != 9 || prop.minor != 0) {
    std::fprintf(stderr,
                 "cutlass_baseline_check: no GPU to check on: device 0 is %s (compute capability %d.%d); the "
                 "kernels are built for sm_90a only\n",
                 prop.name, prop.major, prop.minor);
    return 2;
  }
  if (!cb::available()) {
    std::fprintf(stderr, "cutlass_baseline_check: the CUTLASS kernels are not in this build\n");
    return 1;
  }
  if (cudaError_t e = cudaSetDevice(0); e != cudaSuccess) {
    std::fprintf(stderr, "cutlass_baseline_check: %s\n", cuda_error("cudaSetDevice", e).c_str());
    return 1;
  }
  cudaStream_t stream = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking); e != cudaSuccess) {
    std::fprintf(stderr, "cutlass_baseline_check: %s\n", cuda_error("cudaStreamCreate", e).c_str());
    return 1;
  }
  std::fprintf(stderr, "cutlass_baseline_check: on %s\n", prop.name);

  std::mt19937_64 rng(20250901);
  bool pass = true;
  // Rows per group: one row, a few, more than a 16-row tile, more than a 128-row tile.
  pass &= check_bf16_grouped(rng, stream, {1, 7, 33, 130}, 256, 512);
  // The int4 kernel's two tiles: 128 activation rows (largest group > 16) and 16 (all <= 16),
  // the latter with n = 144: a partial 128-row weight tile in the reordered layout.
  pass &= check_int4_grouped(kInt4Bf16, rng, stream, {1, 7, 33, 130}, 256, 512, 128);
  pass &= check_int4_grouped(kInt4Bf16, rng, stream, {1, 16, 5, 9}, 144, 384, 128);
  // The same for the W4A8 kernel (its K tile is 128: k a multiple of 128), and a group of 256.
  pass &= check_int4_grouped(kInt4E4m3, rng, stream, {1, 7, 33, 130}, 256, 512, 128);
  pass &= check_int4_grouped(kInt4E4m3, rng, stream, {1, 16, 5, 9}, 144, 384, 128);
  pass &= check_int4_grouped(kInt4E4m3, rng, stream, {3, 20}, 128, 1024, 256);
  pass &= check_bf16_dense(rng, stream, 256, 384, 512);

  cudaStreamDestroy(stream);
  std::fprintf(stderr, "cutlass_baseline_check: %s\n", pass ? "all passed" : "FAILED");
  return pass ? 0 : 1;
}
