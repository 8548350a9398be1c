#pragma once
// Timing work on the GPU with CUDA events: streams and events that clean up after themselves,
// the median time of a launch (replayed from a CUDA graph, so launch overhead is not measured;
// plain stream launches when capture is not possible), and the device-to-device copy bandwidth
// that the benchmark's floor is measured against.

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "runtime/device_launcher.hpp"

namespace moejit::bench {

// The launcher's primary context made current for the life of the object, popped after: streams
// and events need a current context, and launches then find it current and push nothing.
class PrimaryContextScope {
 public:
  static Result<PrimaryContextScope> enter(const DeviceLauncher& launcher);
  PrimaryContextScope(PrimaryContextScope&& o) noexcept : api_(o.api_) { o.api_ = nullptr; }
  PrimaryContextScope(const PrimaryContextScope&) = delete;
  PrimaryContextScope& operator=(const PrimaryContextScope&) = delete;
  PrimaryContextScope& operator=(PrimaryContextScope&&) = delete;
  ~PrimaryContextScope();

 private:
  explicit PrimaryContextScope(const CudaApi* api) : api_(api) {}
  const CudaApi* api_;
};

class Stream {
 public:
  static Result<Stream> create(const CudaDriver& driver);  // non-blocking: capturable
  Stream(Stream&& o) noexcept : driver_(o.driver_), stream_(o.stream_) { o.stream_ = nullptr; }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream& operator=(Stream&&) = delete;
  ~Stream();
  CUstream get() const { return stream_; }

 private:
  Stream(const CudaDriver* driver, CUstream s) : driver_(driver), stream_(s) {}
  const CudaDriver* driver_;
  CUstream stream_;
};

struct TimingOptions {
  int samples = 9;                // timed samples; the median is reported
  double target_sample_ms = 2.0;  // each sample runs launches for about this long
  int min_iterations = 2;
  int max_iterations = 256;
  bool graph = true;  // replay the launches of a sample from a CUDA graph
};

struct Timing {
  std::vector<double> sample_us;  // per launch, one value per sample
  double median_us = 0;
  double min_us = 0;
  int iterations = 0;  // launches per sample
  std::string mode;    // "graph" or "stream"
  std::string graph_error;  // why the graph was not used, when it was asked for
};

// Times `enqueue(i)`, which queues launch i (i = 0, 1, ...; the callee rotates buffers by it) on
// `stream`: a warm-up, an estimate that sizes the samples, then `samples` samples.
Result<Timing> time_launches(const CudaDriver& driver, CUstream stream,
                             const std::function<Status(std::uint64_t)>& enqueue, const TimingOptions& options);

struct CopyBandwidth {
  std::uint64_t bytes = 0;  // per copy; twice that moves (read + write)
  double median_ms = 0;
  double bytes_per_s = 0;   // read + write
  int samples = 0;
};

// The median of `samples` device-to-device copies of `bytes` between two fresh buffers.
Result<CopyBandwidth> measure_copy_bandwidth(DeviceLauncher& launcher, CUstream stream, std::uint64_t bytes,
                                             int samples);

double median(std::vector<double> values);

}  // namespace moejit::bench
