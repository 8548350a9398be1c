// bench_gemm end to end without a GPU: on moejit's null driver (bench/overhead/null_cuda.c, a
// libcuda whose launches return at once and whose device memory is host memory) every step of a
// run happens: copy bandwidth, host overhead, weights, routings, packed-weight views, workspace
// sizes, parameter checks, launches, timing, JSON. No kernel computes anything, so every output
// check must fail, saying the outputs are not finite, and nothing else may fail: that is what
// proves the plumbing a GPU session depends on. The CUTLASS baselines need cudart and a real
// driver: with them, their weights are made and their plans get as far as cudart's first call.

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

TEST_SUITE("gpu_check_script") {

namespace {

// bench_gemm --quick on Qwen3-30B-A3B's layer with `extra` arguments, on the null driver: its JSON
// (null when the binaries are not built, after saying so).
nlohmann::json run_on_null_driver(const TempDir& dir, std::vector<std::string> extra, std::string compute_capability = "9.0") {
  const fs::path build = fs::path(MOEJIT_CLI).parent_path();
  const fs::path bench = build / "bench" / "gpu" / "bench_gemm";
  const fs::path driver = build / "bench" / "overhead" / "libmoejit-null-cuda.so";
  for (const fs::path& needed : {bench, driver})
    if (!fs::exists(needed)) {
      MESSAGE("skipped: " << needed.string() << " is not there (benchmarks not built?)");
      return nullptr;
    }
  const std::string out = dir / "bench.json";
  std::vector<std::string> argv = {bench.string(), "--quick", "--models", "Qwen3-30B-A3B", "--rotate-bytes", "1",
                                   "--copy-bytes", "1048576", "--out", out};
  argv.insert(argv.end(), extra.begin(), extra.end());
  ProcessResult r = run_process(argv, {{"MOEJIT_CUDA_LIBRARY", driver.string()},
                                       {"MOEJIT_CACHE_DIR", dir / "cache"},
                                       {"MOEJIT_NULL_CUDA_CC", compute_capability}});
  INFO("stderr: " << r.err.substr(r.err.size() > 4000 ? r.err.size() - 4000 : 0));
  CHECK(r.exit_code == 1);  // the output checks failed, as they must
  return nlohmann::json::parse(slurp(out));
}

// Every layer case got as far as its output check, which found the poisoned outputs untouched.
void check_layers_reached_output_check(const nlohmann::json& j) {
  for (const auto& l : j["layers"]) {
    INFO(l.dump());
    REQUIRE(l.contains("error"));
    CHECK(l["error"].get<std::string>().find("layer outputs are not finite") != std::string::npos);
  }
}

}  // namespace

TEST_CASE("mma_rate runs every step on the null driver and only its accumulator checks fail") {
  const fs::path build = fs::path(MOEJIT_CLI).parent_path();
  const fs::path program = build / "bench" / "gpu" / "mma_rate";
  const fs::path driver = build / "bench" / "overhead" / "libmoejit-null-cuda.so";
  for (const fs::path& needed : {program, driver})
    if (!fs::exists(needed)) {
      MESSAGE("skipped: " << needed.string() << " is not there (benchmarks not built?)");
      return;
    }
  // 8.9 and 12.0 have e4m3 mma.sync natively, so they try it as well; 9.0 does not.
  for (const char* cc : {"9.0", "8.9", "12.0"}) {
    CAPTURE(cc);
    TempDir dir;
    const std::string out = dir / "mma_rate.json";
    ProcessResult r = run_process({program.string(), "--out", out, "--warps", "4", "8", "--samples", "2"},
                                  {{"MOEJIT_CUDA_LIBRARY", driver.string()}, {"MOEJIT_NULL_CUDA_CC", cc}});
    INFO("stderr: " << r.err.substr(r.err.size() > 4000 ? r.err.size() - 4000 : 0));
    CHECK(r.exit_code == 1);  // the accumulators were never written, as they must not be here
    const auto j = nlohmann::json::parse(slurp(out));
    CHECK(j["gpu"]["name"].get<std::string>().find("null driver") != std::string::npos);
    const bool e4m3 = std::string(cc) != "9.0";
    REQUIRE(j["runs"].size() == (e4m3 ? 4u : 2u));
    for (const auto& run : j["runs"]) {
      INFO(run.dump());
      REQUIRE(run.contains("error"));
      // Compiled, loaded, launched, copied back: the poisoned (NaN) accumulators are what fails.
      CHECK(run["error"]["message"].get<std::string>().find("thread 0 accumulator 0 is -nan, expected") == 0);
    }
    CHECK(j["best_mma_per_sm_per_clock"].empty());
  }
}

TEST_CASE("bench_gemm runs every step on the null driver and only its output checks fail") {
  TempDir dir;
  const auto j = run_on_null_driver(dir, {"--no-baselines", "--formats", "mxfp4,mxfp4_w4a8,mxfp4_w4a4"});
  if (j.is_null()) return;
  CHECK(j["gpu"]["name"].get<std::string>().find("null driver") != std::string::npos);
  CHECK(j["copy_bandwidth"]["gbs"].get<double>() > 0);
  CHECK(j["kernels"]["errors"].empty());
  CHECK(j["host_overhead"]["overhead_us"].is_number());
  CHECK(j["bf16_gemm"]["reason"] == "--no-baselines");

  // W4A16 and W4A8 MXFP4 x 2 projections x 3 token counts, and 2 formats x 3 layers: each got as
  // far as its output check, which found the poisoned (NaN) outputs untouched. The W4A8 ones
  // (e4m3 activations with their scales, weights packed for them, the layer quantizing its bf16
  // hidden states) say why they have no W4A16 ratio.
  REQUIRE(j["cases"].size() == 12);
  REQUIRE(j["layers"].size() == 6);
  int w4a8 = 0;
  for (const auto& c : j["cases"]) {
    INFO(c.dump());
    REQUIRE(c.contains("error"));
    CHECK(c["error"].get<std::string>().find("outputs are not finite") != std::string::npos);
    if (c["format"] == "mxfp4_w4a8") {
      ++w4a8;
      CHECK(c["act"] == "e4m3");
      CHECK(c["vs_w4a16"]["none"].get<std::string>().find("no time") != std::string::npos);
    }
  }
  CHECK(w4a8 == 6);
  check_layers_reached_output_check(j);
  CHECK(j["summary"]["failed"] == 12);
  CHECK(j["summary"]["skipped"] == 0);
  CHECK(j["layer_summary"]["failed"] == 6);
  // W4A4 asked for on a 9.0 device: no cases, and each projection says why.
  int w4a4 = 0;
  for (const auto& n : j["not_applicable"])
    if (n["format"] == "mxfp4_w4a4") {
      ++w4a4;
      CHECK(n["reason"].get<std::string>().find("sm_120a / sm_121a; this target is sm_90a") != std::string::npos);
    }
  CHECK(w4a4 == 2);
  // The split-K sweep: T = 1 of the first format (mxfp4), both projections, each run at every
  // split of its tile up to 8 beside the planner's own, each as far as its output check.
  REQUIRE(j["split_sweep"].size() == 2);
  for (const auto& sweep : j["split_sweep"]) {
    INFO(sweep.dump());
    CHECK(sweep["format"] == "mxfp4");
    CHECK(sweep["tokens"] == 1);
    const auto stages = sweep["k_stages"].get<unsigned>();
    std::vector<unsigned> splits;
    for (const auto& run : sweep["runs"]) {
      splits.push_back(run["split_k"].get<unsigned>());
      REQUIRE(run.contains("error"));
      CHECK(run["error"].get<std::string>().find("outputs are not finite") != std::string::npos);
    }
    REQUIRE(!splits.empty());
    CHECK(splits.front() == 1);
    CHECK(std::find(splits.begin(), splits.end(), sweep["planner_split_k"].get<unsigned>()) != splits.end());
    for (unsigned split : splits) CHECK(split <= std::max(8u, sweep["planner_split_k"].get<unsigned>()));
    for (unsigned split : splits) CHECK(split <= stages);
    CHECK(sweep["fastest_split_k"].is_null());
  }
}

TEST_CASE("bench_gemm runs W4A4 beside W4A16 on a 12.0 null driver, and only its output checks fail") {
  // sm_120a: MXFP4 activations (e2m1 pairs with E8M0 rows 16 bytes apart) against weights packed
  // for them, and the layer quantizing its bf16 hidden states per 32; every launch checked by
  // the library and made, the outputs left as poisoned.
  TempDir dir;
  const auto j = run_on_null_driver(dir, {"--no-baselines", "--no-split-sweep", "--formats", "mxfp4_w4a4"}, "12.0");
  if (j.is_null()) return;
  CHECK(j["gpu"]["arch"] == "sm_120a");
  CHECK(j["kernels"]["errors"].empty());
  REQUIRE(j["cases"].size() == 6);
  REQUIRE(j["layers"].size() == 3);
  for (const auto& c : j["cases"]) {
    INFO(c.dump());
    CHECK(c["act"] == "e2m1");
    REQUIRE(c.contains("error"));
    CHECK(c["error"].get<std::string>().find("outputs are not finite") != std::string::npos);
    CHECK(c["vs_w4a16"]["none"].get<std::string>().find("was not run") != std::string::npos);
  }
  check_layers_reached_output_check(j);
  CHECK(j["summary"]["failed"] == 6);
  CHECK(j["layer_summary"]["failed"] == 3);
}

TEST_CASE("bench_gemm runs INT4 W4A8 with scales per token and per 128 k on the null driver, and only its output checks fail") {
  // e4m3 activations with one f32 scale per row, or rows of K / 128 of them (a_scale_ld), against
  // INT4 weights packed for e4m3; the layers quantize their bf16 hidden states each way. Every
  // launch checked by the library (the scale rows' stride among it) and made.
  TempDir dir;
  const auto j = run_on_null_driver(dir, {"--no-baselines", "--no-split-sweep", "--formats", "int4_g128_w4a8,int4_g128_w4a8_block128"});
  if (j.is_null()) return;
  CHECK(j["kernels"]["errors"].empty());
  REQUIRE(j["cases"].size() == 12);
  REQUIRE(j["layers"].size() == 6);
  int block128 = 0;
  for (const auto& c : j["cases"]) {
    INFO(c.dump());
    CHECK(c["act"] == "e4m3");
    REQUIRE(c.contains("error"));
    CHECK(c["error"].get<std::string>().find("outputs are not finite") != std::string::npos);
    CHECK(c["vs_w4a16"]["none"].get<std::string>().find("was not run") != std::string::npos);
    if (c["format"] == "int4_g128_w4a8_block128") ++block128;
  }
  CHECK(block128 == 6);
  check_layers_reached_output_check(j);
  CHECK(j["summary"]["failed"] == 12);
  CHECK(j["layer_summary"]["failed"] == 6);
}

TEST_CASE("bench_gemm runs f16 activations beside bf16 on the null driver, and only its output checks fail") {
  // f16 activations, outputs and INT4 scales, MXFP4 weights packed for f16 (the a16f16 order, its
  // packing mark in each expert's range word), every launch checked by the library and made.
  TempDir dir;
  const auto j = run_on_null_driver(dir, {"--no-baselines", "--no-split-sweep", "--formats", "mxfp4,mxfp4_f16,int4_g128_f16"});
  if (j.is_null()) return;
  CHECK(j["kernels"]["errors"].empty());
  REQUIRE(j["cases"].size() == 18);
  REQUIRE(j["layers"].size() == 9);
  int f16 = 0;
  for (const auto& c : j["cases"]) {
    INFO(c.dump());
    REQUIRE(c.contains("error"));
    CHECK(c["error"].get<std::string>().find("outputs are not finite") != std::string::npos);
    if (c["act"] == "f16") {
      ++f16;
      CHECK(c["vs_bf16"]["none"].get<std::string>().find(c["format"] == "mxfp4_f16" ? "no time" : "was not run") !=
            std::string::npos);
    } else {
      CHECK(c["format"] == "mxfp4");
      CHECK_FALSE(c.contains("vs_bf16"));
    }
  }
  CHECK(f16 == 12);
  // The bf16 cases come first.
  CHECK(j["cases"][0]["format"] == "mxfp4");
  CHECK(j["cases"][5]["format"] == "mxfp4");
  CHECK(j["cases"][6]["format"] == "mxfp4_f16");
  check_layers_reached_output_check(j);
  for (const auto& l : j["layers"])
    if (l["format"] != "mxfp4") CHECK(l["vs_bf16"].contains("none"));
  CHECK(j["summary"]["failed"] == 18);
  CHECK(j["layer_summary"]["failed"] == 9);
}

TEST_CASE("bench_gemm on the null driver makes the CUTLASS baselines' weights and stops at cudart") {
  TempDir dir;
  const auto j = run_on_null_driver(dir, {"--no-layers", "--formats", "int4_g128"});
  if (j.is_null()) return;
  CHECK(j["bf16_gemm"]["tflops"].is_null());
#if !MOEJIT_TEST_CUTLASS_KERNELS
  // A build configured without the kernels (CI's test build) says so for each baseline, and
  // counts none as failed.
  CHECK(j["bf16_gemm"]["reason"].get<std::string>().find("MOEJIT_CUTLASS_KERNELS=OFF") != std::string::npos);
  REQUIRE(j["cases"].size() == 6);
  for (const auto& c : j["cases"])
    for (const char* name : {"cutlass_bf16_grouped", "cutlass_int4_grouped"}) {
      INFO(c.dump());
      CHECK(c["baselines"][name]["not_applicable"].get<std::string>().find("not in this build") != std::string::npos);
    }
  CHECK(j["summary"]["baseline_failures"] == 0);
  MESSAGE("skipped the CUTLASS plans' checks: this build has no CUTLASS kernels (-DMOEJIT_CUTLASS_KERNELS=OFF)");
  return;
#endif
  // Without a real driver cudart fails its first call; the dense rate says so.
  CHECK(j["bf16_gemm"]["error"].get<std::string>().find("prepare_bf16_dense") != std::string::npos);
  REQUIRE(j["cases"].size() == 6);
  for (const auto& c : j["cases"]) {
    INFO(c.dump());
    // Each baseline's weights were made in CUTLASS's layout and uploaded; its plan failed at
    // cudart's first call, not before.
    for (const char* name : {"cutlass_bf16_grouped", "cutlass_int4_grouped"}) {
      const std::string error = c["baselines"][name]["error"].get<std::string>();
      CHECK(error.find(std::string("prepare_") + (name[8] == 'b' ? "bf16" : "int4") + "_grouped") != std::string::npos);
      CHECK(error.find("cuda") != std::string::npos);
      CHECK_FALSE(c["baselines"][name].contains("moejit_speedup"));
    }
  }
  CHECK(j["summary"]["baseline_failures"] == 1 + 6 * 2);  // the dense rate, then each baseline of each case
}

}  // TEST_SUITE
