#pragma once
// Host-side overhead of a grouped GEMM call on a store hit: what moejit adds between an
// engine's call and the kernel launch. Measured as the per-call time of moejit_grouped_gemm
// (public C API, device backend, kernel already in memory) minus that of a bare
// cuLaunchKernelEx of the same kernel with the same parameters, both enqueued back to back on
// one stream with the queue drained between rounds.

#include <nlohmann/json.hpp>

#include <random>

#include "runtime/device_launcher.hpp"

namespace moejit::bench {

struct OverheadOptions {
  int rounds = 31;            // median over rounds
  int calls_per_round = 256;  // enqueued without waiting; few enough that the queue never fills
};

// `moejit_call_us`, `raw_launch_us` (medians per call), `overhead_us` (their difference),
// the problem and the kernel; a GPU and NVRTC are needed.
Result<nlohmann::ordered_json> measure_host_overhead(DeviceLauncher& l, CUstream stream, const OverheadOptions& options,
                                                     std::mt19937_64& rng);

}  // namespace moejit::bench
