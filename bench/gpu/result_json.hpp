#pragma once
// The JSON fields that every timed result of the benchmark shares (GEMM cases, their CUTLASS
// baselines, layer cases), written in one place so that they mean the same everywhere
// (bench/gpu/README.md documents them).

#include <nlohmann/json.hpp>

#include "bench/gpu/gemm_cases.hpp"
#include "bench/gpu/gpu_timer.hpp"

namespace moejit::bench {

inline nlohmann::ordered_json bytes_json(const CaseBytes& b) {
  return {{"weights", b.weights}, {"scales", b.scales}, {"bias", b.bias},
          {"act_in", b.act_in},   {"act_out", b.act_out}, {"total", b.total()}};
}

// `timing`, `graph_error`, `iterations`, `samples`, `median_us`, `min_us`; then what the median
// achieved: `achieved_gbs` (bytes / time) and `tflops`.
inline void add_timing(nlohmann::ordered_json& j, const Timing& t, const CaseBytes& bytes, double flops) {
  j["timing"] = t.mode;
  if (!t.graph_error.empty()) j["graph_error"] = t.graph_error;
  j["iterations"] = t.iterations;
  j["samples"] = t.sample_us.size();
  j["median_us"] = t.median_us;
  j["min_us"] = t.min_us;
  j["achieved_gbs"] = bytes.total() / (t.median_us * 1e-6) / 1e9;
  j["tflops"] = flops / (t.median_us * 1e-6) / 1e12;
}

// `floor_us`, `floor` (its memory and compute parts, which bounds) and `fraction_of_floor`.
inline void add_floor(nlohmann::ordered_json& j, const Floor& floor, double median_us) {
  j["floor_us"] = floor.us();
  j["floor"] = {{"memory_us", floor.memory_us}, {"compute_us", floor.compute_us}, {"bound", floor.bound()}};
  j["fraction_of_floor"] = fraction_of_floor(floor.us(), median_us);
}

}  // namespace moejit::bench
