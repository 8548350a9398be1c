#pragma once
// The benchmark's layer cases: a model's whole MoE layer through the public API
// (moejit_fused_moe, device backend), timed like the GEMM cases and held to the same floor.

#include <moejit/moejit.h>
#include <nlohmann/json.hpp>

#include <random>
#include <span>

#include "bench/gpu/gemm_cases.hpp"
#include "bench/gpu/gpu_timer.hpp"
#include "bench/gpu/weight_set.hpp"

namespace moejit::bench {

struct LayerRun {
  moejit_context_t context = nullptr;  // device backend
  TimingOptions timing;
  int routings = 8;                     // random routings rotated over
  double copy_bytes_per_s = 0, flops_per_s = 0;
};

// Times `c` with gate/up weights `w13` (packed from a gate/up row order) and down weights `w2`,
// then checks that every output value is finite. The case's JSON: bytes, floor, timings.
Result<nlohmann::ordered_json> run_layer_case(DeviceLauncher& l, CUstream stream, const LayerRun& run,
                                              const LayerCase& c, const WeightSet& w13, const WeightSet& w2,
                                              std::mt19937_64& rng);

}  // namespace moejit::bench
