#pragma once
// Pairs the static performance model's predictions (bench/perf_model's JSON) with what
// bench_gemm measured on a GPU, case by case, so the model can be calibrated against the machine.

#include <nlohmann/json.hpp>

#include <string_view>

namespace moejit::bench {

// The profile of `model` (perf_model's JSON: "profiles", "cases") that describes `gpu_name`
// (the probe's device name, e.g. "NVIDIA H200"): the first profile every word of whose name
// ("RTX-PRO-6000": rtx, pro, 6000; no case) is a word of the device name. Null when none is.
nlohmann::ordered_json matching_profile(const nlohmann::ordered_json& model, std::string_view gpu_name);

// One row per bench_gemm case (bench JSON: "cases") that the model predicted for that profile
// (same model, format, GEMM and T): the predicted fraction and its binding bound, the measured
// fraction of the datasheet bandwidth on the model's terms (weight and scale bytes / median
// time / the profile's bandwidth), bench_gemm's own fraction of its measured floor, measured
// over predicted, and both tiles (the two choose them through the same planner; a difference
// is worth a look). Returns {"profile", "rows", "unmatched"} or {"error"}.
nlohmann::ordered_json model_vs_measured(const nlohmann::ordered_json& model, const nlohmann::ordered_json& bench,
                                         std::string_view gpu_name);

}  // namespace moejit::bench
