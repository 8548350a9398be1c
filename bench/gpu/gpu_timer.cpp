#include "bench/gpu/gpu_timer.hpp"

#include <algorithm>
#include <cmath>

#include "bench/gpu/gemm_cases.hpp"
#include "runtime/device_buffer.hpp"

namespace moejit::bench {
namespace {

class Events {
 public:
  Events(const CudaDriver& driver, std::size_t count) : driver_(driver) { events_.reserve(count); }
  ~Events() {
    for (CUevent e : events_) (void)driver_.api().EventDestroy(e);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
  Status add(std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
      CUevent e = nullptr;
      MOEJIT_TRY(driver_.check(driver_.api().EventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate"));
      events_.push_back(e);
    }
    return {};
  }
  CUevent operator[](std::size_t i) const { return events_[i]; }
  Result<double> elapsed_ms(std::size_t from, std::size_t to) const {
    float ms = 0;
    MOEJIT_TRY(driver_.check(driver_.api().EventElapsedTime(&ms, events_[from], events_[to]), "cuEventElapsedTime"));
    return static_cast<double>(ms);
  }

 private:
  const CudaDriver& driver_;
  std::vector<CUevent> events_;
};

// A captured graph and its executable form, destroyed together.
struct Graph {
  const CudaDriver& driver;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  ~Graph() {
    if (exec) (void)driver.api().GraphExecDestroy(exec);
    if (graph) (void)driver.api().GraphDestroy(graph);
  }
};

// Captures launches [0, iterations) into `g`; on failure the stream is left out of capture.
Status capture(const CudaDriver& driver, CUstream stream, const std::function<Status(std::uint64_t)>& enqueue,
               int iterations, Graph& g) {
  const CudaApi& api = driver.api();
  MOEJIT_TRY(driver.check(api.StreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture"));
  Status launched;
  for (int i = 0; i < iterations && launched.ok(); ++i) launched = enqueue(static_cast<std::uint64_t>(i));
  const Status ended = driver.check(api.StreamEndCapture(stream, &g.graph), "cuStreamEndCapture");
  MOEJIT_TRY(launched);
  MOEJIT_TRY(ended);
  return driver.check(api.GraphInstantiate(&g.exec, g.graph, 0), "cuGraphInstantiateWithFlags");
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

Result<PrimaryContextScope> PrimaryContextScope::enter(const DeviceLauncher& launcher) {
  MOEJIT_ASSIGN_OR_RETURN(CUcontext primary, launcher.primary_context());
  const CudaApi& api = launcher.driver().api();
  MOEJIT_TRY(launcher.driver().check(api.CtxPushCurrent(primary), "cuCtxPushCurrent"));
  return PrimaryContextScope(&api);
}

PrimaryContextScope::~PrimaryContextScope() {
  if (api_ == nullptr) return;
  CUcontext popped = nullptr;
  (void)api_->CtxPopCurrent(&popped);
}

Result<Stream> Stream::create(const CudaDriver& driver) {
  CUstream s = nullptr;
  MOEJIT_TRY(driver.check(driver.api().StreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  return Stream(&driver, s);
}

Stream::~Stream() {
  if (stream_ != nullptr) (void)driver_->api().StreamDestroy(stream_);
}

Result<Timing> time_launches(const CudaDriver& driver, CUstream stream,
                             const std::function<Status(std::uint64_t)>& enqueue, const TimingOptions& o) {
  const CudaApi& api = driver.api();
  auto sync = [&] { return driver.check(api.StreamSynchronize(stream), "cuStreamSynchronize"); };
  Events ev(driver, 2 * static_cast<std::size_t>(o.samples) + 2);
  MOEJIT_TRY(ev.add(2 * static_cast<std::size_t>(o.samples) + 2));
  const std::size_t est0 = 2 * static_cast<std::size_t>(o.samples), est1 = est0 + 1;

  // Warm-up (module loads, clocks, TLBs), then an estimate that sizes the samples.
  for (std::uint64_t i = 0; i < 3; ++i) MOEJIT_TRY(enqueue(i));
  MOEJIT_TRY(sync());
  constexpr int kEstimateLaunches = 4;
  MOEJIT_TRY(driver.check(api.EventRecord(ev[est0], stream), "cuEventRecord"));
  for (std::uint64_t i = 0; i < kEstimateLaunches; ++i) MOEJIT_TRY(enqueue(i));
  MOEJIT_TRY(driver.check(api.EventRecord(ev[est1], stream), "cuEventRecord"));
  MOEJIT_TRY(sync());
  MOEJIT_ASSIGN_OR_RETURN(double estimate_ms, ev.elapsed_ms(est0, est1));
  estimate_ms = std::max(estimate_ms / kEstimateLaunches, 1e-4);

  Timing t;
  t.iterations = std::clamp(static_cast<int>(std::ceil(o.target_sample_ms / estimate_ms)), o.min_iterations,
                            o.max_iterations);
  Graph g{driver};
  bool use_graph = false;
  if (o.graph) {
    if (Status s = capture(driver, stream, enqueue, t.iterations, g); s.ok()) {
      use_graph = true;
    } else {
      t.graph_error = s.message();
      MOEJIT_TRY(sync());
    }
  }
  t.mode = use_graph ? "graph" : "stream";
  if (use_graph) {  // one untimed replay: the graph's first launch uploads it
    MOEJIT_TRY(driver.check(api.GraphLaunch(g.exec, stream), "cuGraphLaunch"));
    MOEJIT_TRY(sync());
  }
  std::uint64_t next = 0;
  for (int s = 0; s < o.samples; ++s) {
    MOEJIT_TRY(driver.check(api.EventRecord(ev[2 * s], stream), "cuEventRecord"));
    if (use_graph) {
      MOEJIT_TRY(driver.check(api.GraphLaunch(g.exec, stream), "cuGraphLaunch"));
    } else {
      for (int i = 0; i < t.iterations; ++i) MOEJIT_TRY(enqueue(next++));
    }
    MOEJIT_TRY(driver.check(api.EventRecord(ev[2 * s + 1], stream), "cuEventRecord"));
  }
  MOEJIT_TRY(sync());
  for (int s = 0; s < o.samples; ++s) {
    MOEJIT_ASSIGN_OR_RETURN(double ms, ev.elapsed_ms(2 * s, 2 * s + 1));
    t.sample_us.push_back(ms * 1000.0 / t.iterations);
  }
  t.median_us = median(t.sample_us);
  t.min_us = *std::min_element(t.sample_us.begin(), t.sample_us.end());
  return t;
}

Result<CopyBandwidth> measure_copy_bandwidth(DeviceLauncher& launcher, CUstream stream, std::uint64_t bytes,
                                             int samples) {
  const CudaDriver& driver = launcher.driver();
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer src, DeviceBuffer::allocate(launcher, bytes));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer dst, DeviceBuffer::allocate(launcher, bytes));
  MOEJIT_TRY(launcher.fill(src.data(), 0x5a, bytes, stream));
  MOEJIT_TRY(launcher.fill(dst.data(), 0, bytes, stream));
  Events ev(driver, 2 * static_cast<std::size_t>(samples));
  MOEJIT_TRY(ev.add(2 * static_cast<std::size_t>(samples)));
  for (int i = 0; i < 2; ++i) MOEJIT_TRY(launcher.copy_within_backend(dst.data(), src.data(), bytes, stream));
  for (int s = 0; s < samples; ++s) {
    MOEJIT_TRY(driver.check(driver.api().EventRecord(ev[2 * s], stream), "cuEventRecord"));
    MOEJIT_TRY(launcher.copy_within_backend(dst.data(), src.data(), bytes, stream));
    MOEJIT_TRY(driver.check(driver.api().EventRecord(ev[2 * s + 1], stream), "cuEventRecord"));
  }
  MOEJIT_TRY(launcher.synchronize(stream));
  std::vector<double> ms;
  for (int s = 0; s < samples; ++s) {
    MOEJIT_ASSIGN_OR_RETURN(double m, ev.elapsed_ms(2 * s, 2 * s + 1));
    ms.push_back(m);
  }
  CopyBandwidth c;
  c.bytes = bytes;
  c.samples = samples;
  c.median_ms = median(ms);
  c.bytes_per_s = copy_bandwidth_bytes_per_s(static_cast<double>(bytes), c.median_ms / 1000.0);
  return c;
}

}  // namespace moejit::bench
