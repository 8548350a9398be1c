// The model-vs-measured join of gpu_check_report, on hand-written JSON with hand-worked numbers.

#include <doctest/doctest.h>

#include "bench/gpu/model_vs_measured.hpp"

using moejit::bench::matching_profile;
using moejit::bench::model_vs_measured;
using Json = nlohmann::ordered_json;

namespace {

Json model_json() {
  return Json::parse(R"({
    "profiles": [{"name": "H100-SXM", "memory_bytes_per_s": 3.35e12},
                 {"name": "H200", "memory_bytes_per_s": 4.8e12},
                 {"name": "RTX-PRO-6000", "memory_bytes_per_s": 1.792e12}],
    "cases": [
      {"profile": "H200", "model": "Qwen3-30B-A3B", "format": "mxfp4", "gemm": "up", "tokens": 1,
       "tile": {"bm": 16, "bn": 128}, "predicted_fraction": 0.8, "binding": "latency"},
      {"profile": "H200", "model": "Qwen3-30B-A3B", "format": "mxfp4", "gemm": "down", "tokens": 1,
       "tile": {"bm": 16, "bn": 256}, "predicted_fraction": 0.5, "binding": "fill"},
      {"profile": "RTX-PRO-6000", "model": "Qwen3-30B-A3B", "format": "mxfp4", "gemm": "up", "tokens": 1,
       "predicted_fraction": 0.3, "binding": "fill"},
      {"profile": "H200", "model": "Qwen3-30B-A3B", "format": "mxfp4", "gemm": "up", "tokens": 2,
       "error": "compile failed"}
    ]})");
}

Json bench_json() {
  // gate_up T=1: 3.6e6 weight + 0.24e6 scale bytes in 1 us = 3.84e12 B/s = 0.8 of 4.8e12.
  // down T=1: 1.2e6 bytes in 0.5 us = 2.4e12 B/s = 0.5 of 4.8e12; measured 0.5 / predicted 0.5 = 1.
  return Json::parse(R"({
    "cases": [
      {"model": "Qwen3-30B-A3B", "format": "mxfp4", "projection": "gate_up", "tokens": 1, "median_us": 1.0,
       "bytes": {"weights": 3.6e6, "scales": 0.24e6, "act_in": 4096, "total": 3.9e6}, "fraction_of_floor": 0.7,
       "tile": {"bm": 16, "bn": 128}},
      {"model": "Qwen3-30B-A3B", "format": "mxfp4", "projection": "down", "tokens": 1, "median_us": 0.5,
       "bytes": {"weights": 1.1e6, "scales": 0.1e6}, "tile": {"bm": 16, "bn": 128}},
      {"model": "Qwen3-30B-A3B", "format": "mxfp4", "projection": "gate_up", "tokens": 2, "median_us": 2.0,
       "bytes": {"weights": 1e6, "scales": 0}},
      {"model": "Qwen3-30B-A3B", "format": "int4_g128", "projection": "gate_up", "tokens": 1, "median_us": 2.0,
       "bytes": {"weights": 1e6, "scales": 0}},
      {"model": "Qwen3-30B-A3B", "format": "mxfp4", "projection": "gate_up", "tokens": 4,
       "error": {"message": "failed"}}
    ]})");
}

}  // namespace

TEST_CASE("matching_profile finds the profile a probe's device name describes") {
  const Json m = model_json();
  CHECK(matching_profile(m, "NVIDIA H200")["name"] == "H200");
  CHECK(matching_profile(m, "NVIDIA H100 SXM5 80GB").is_null());  // "sxm" is not a word of it
  CHECK(matching_profile(m, "NVIDIA RTX PRO 6000 Blackwell Server Edition")["name"] == "RTX-PRO-6000");
  CHECK(matching_profile(m, "NVIDIA H20").is_null());  // not "H200"
  CHECK(matching_profile(m, "NVIDIA A100-SXM4-80GB").is_null());
  CHECK(matching_profile(Json::object(), "NVIDIA H200").is_null());
}

TEST_CASE("model_vs_measured pairs each measured case with its prediction") {
  const Json j = model_vs_measured(model_json(), bench_json(), "NVIDIA H200");
  REQUIRE(j.contains("rows"));
  CHECK(j["profile"] == "H200");
  REQUIRE(j["rows"].size() == 2);

  const Json& up = j["rows"][0];
  CHECK(up["gemm"] == "up");
  CHECK(up["predicted_fraction"].get<double>() == doctest::Approx(0.8));
  CHECK(up["binding"] == "latency");
  CHECK(up["measured_fraction"].get<double>() == doctest::Approx(0.8));
  CHECK(up["measured_over_predicted"].get<double>() == doctest::Approx(1.0));
  CHECK(up["fraction_of_measured_floor"].get<double>() == doctest::Approx(0.7));
  CHECK(up["predicted_tile"] == up["measured_tile"]);

  const Json& down = j["rows"][1];
  CHECK(down["measured_fraction"].get<double>() == doctest::Approx(0.5));
  CHECK(down["measured_over_predicted"].get<double>() == doctest::Approx(1.0));
  CHECK(down["fraction_of_measured_floor"].is_null());
  CHECK(down["predicted_tile"] != down["measured_tile"]);  // shown, so a planner mismatch is visible

  // T=2 has a model case with an error (no prediction) and int4_g128 none at all; the failed
  // T=4 measurement has no time and is left out.
  REQUIRE(j["unmatched"].size() == 2);
  CHECK(j["unmatched"][0]["tokens"] == 2);
  CHECK(j["unmatched"][1]["format"] == "int4_g128");
}

TEST_CASE("model_vs_measured says why when there is nothing to pair") {
  CHECK(model_vs_measured(model_json(), bench_json(), "NVIDIA A100-SXM4-80GB").contains("error"));
  CHECK(model_vs_measured(model_json(), Json::object(), "NVIDIA H200").contains("error"));
  CHECK(model_vs_measured(Json::object(), bench_json(), "NVIDIA H200").contains("error"));
}
