// bench/gpu/check.sh on a machine without a GPU (the driver hidden behind a missing
// MOEJIT_CUDA_LIBRARY): it must still run every step, say that there is no GPU, and write a
// results.json that says so. Its own doctest suite, "gpu_check_script", which check.sh itself
// does not run (it runs suite "device").

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

TEST_SUITE("gpu_check_script") {

TEST_CASE("check.sh without a GPU reports no_gpu in a complete results.json") {
  const fs::path build = fs::path(MOEJIT_CLI).parent_path();
  const fs::path root = fs::path(__FILE__).parent_path().parent_path();
  const fs::path script = root / "bench" / "gpu" / "check.sh";
  for (const fs::path& needed : {script, build / "bench" / "gpu" / "bench_gemm", build / "bench" / "gpu" / "gpu_check_report",
                                 build / "bench" / "cutlass" / "cutlass_baseline_check", build / "tests" / "moejit_tests"})
    if (!fs::exists(needed)) {
      MESSAGE("skipped: " << needed.string() << " is not there (benchmarks not built?)");
      return;
    }
  TempDir dir;
  const std::string out = dir / "out";
  ProcessResult r = run_process({"/bin/bash", script.string()},
                                {{"OUT", out},
                                 {"MOEJIT_BUILD_DIR", build.string()},
                                 {"MOEJIT_CUDA_LIBRARY", "/nonexistent/moejit-test/libcuda.so.1"},
                                 {"MOEJIT_CHECK_SECONDS", "400"},
                                 {"MOEJIT_CHECK_QUICK", "1"}});
  INFO("stdout: " << r.out.substr(r.out.size() > 4000 ? r.out.size() - 4000 : 0));
  INFO("stderr: " << r.err.substr(r.err.size() > 4000 ? r.err.size() - 4000 : 0));
  CHECK(r.exit_code == 2);  // no GPU
  for (const char* f : {"results.json", "gpu.json", "tests.log", "bench.log", "check.log", "bench.json", "cutlass_check.log"})
    CHECK_MESSAGE(fs::exists(fs::path(out) / f), f);

  const auto results = nlohmann::json::parse(slurp(out + "/results.json"));
  CHECK(results["schema"] == "moejit-gpu-check/1");
  CHECK(results["verdict"] == "no_gpu");
  CHECK(results["gpu"].is_null());
  REQUIRE(results["gpu_error"].is_string());
  CHECK(results["gpu_error"].get<std::string>().find("no CUDA driver") != std::string::npos);
  CHECK(results["gpu_error"].get<std::string>().find("/nonexistent/moejit-test/libcuda.so.1") != std::string::npos);
  CHECK(results["probe_exit_code"] == 2);
  // The suite ran: its CPU-side tests passed and every GPU test skipped saying why.
  const auto& tests = results["tests"];
  CHECK(tests["exit_code"] == 0);
  CHECK(tests["failed"] == 0);
  CHECK(tests["passed"].get<int>() > 10);
  REQUIRE(tests["skipped"].is_array());
  CHECK(tests["skipped"].size() >= 10);
  for (const auto& s : tests["skipped"]) CHECK(s["reason"].is_string());
  bool gemm_skip = false;
  for (const auto& s : tests["skipped"])
    gemm_skip |= s["test"].get<std::string>().find("GPU grouped GEMM") != std::string::npos &&
                 s["reason"].get<std::string>().find("no CUDA driver") != std::string::npos;
  CHECK(gemm_skip);
  // The benchmark said there is no GPU, with its exit status and its own JSON.
  CHECK(results["bench_exit_code"] == 2);
  CHECK(results["bench"]["error"]["code"] == "unavailable");
  // The CUTLASS baselines' check found no GPU either, and said so.
  CHECK(results["cutlass_check"]["exit_code"] == 2);
  CHECK(results["cutlass_check"]["log"] == "cutlass_check.log");
  CHECK(results["durations_s"]["total"].get<double>() >= 0);
  CHECK(results["durations_s"]["cutlass_check"].get<double>() >= 0);
  CHECK(results["commit"].is_string());
  // No wheel was carried for this python3: the Python GPU tests did not run, and say why.
  CHECK(fs::exists(fs::path(out) / "python_tests.log"));
  CHECK(results["python_tests"]["ran"] == false);
  CHECK(results["python_tests"]["exit_code"] == 127);
  REQUIRE(results["python_tests"]["why"].is_string());
  CHECK(results["python_tests"]["why"].get<std::string>().find("no moejit wheel") != std::string::npos);
  CHECK(results["durations_s"]["python_tests"].get<double>() >= 0);
  // The tensor-core rate needs the GPU the probe did not find: not run, and the report says so.
  CHECK(results["mma_rate"]["exit_code"] == 127);
  CHECK(results["mma_rate"]["error"] == "not run");
  CHECK(results["durations_s"]["mma_rate"].get<double>() >= 0);
}

namespace {

// gpu_check_report from this build, or empty after saying why it is missing.
fs::path report_or_skip() {
  const fs::path report = fs::path(MOEJIT_CLI).parent_path() / "bench" / "gpu" / "gpu_check_report";
  if (fs::exists(report)) return report;
  MESSAGE("skipped: " << report.string() << " is not there (benchmarks not built?)");
  return {};
}

}  // namespace

TEST_CASE("gpu_check_report reads pytest's summary and skip reasons, and its exit status decides the verdict") {
  const fs::path report = report_or_skip();
  if (report.empty()) return;
  TempDir dir;
  const std::string log = dir / "python_tests.log", gpu = dir / "gpu.json", tests = dir / "tests.log";
  {
    std::ofstream(tests) << "[doctest] test cases: 3 | 3 passed | 0 failed | 0 skipped\n";
    std::ofstream(log) << "..s.F\n"
                          "SKIPPED [1] python/tests/test_torch_gpu.py:40: needs two GPUs\n"
                          "FAILED python/tests/test_torch_gpu.py::test_graph_replay - AssertionError\n"
                          "==== 1 failed, 3 passed, 1 skipped in 12.50s ====\n";
    std::ofstream(gpu) << R"({"gpu": {"name": "NVIDIA H200"}})";
  }
  for (const int exit_code : {1, 0}) {
    const std::string out = dir / ("results-" + std::to_string(exit_code) + ".json");
    ProcessResult r = run_process({report.string(), "--out", out, "--gpu", gpu, "--python-log", log, "--python-exit",
                                   std::to_string(exit_code), "--tests-log", tests, "--tests-exit", "0",
                                   "--bench-exit", "0", "--cutlass-exit", "0"},
                                  {});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto results = nlohmann::json::parse(slurp(out));
    const auto& p = results["python_tests"];
    CHECK(p["ran"] == true);
    CHECK(p["summary"] == "1 failed, 3 passed, 1 skipped in 12.50s");
    CHECK(p["passed"] == 3);
    CHECK(p["failed"] == 1);
    CHECK(p["skipped"] == 1);
    REQUIRE(p["skipped_reasons"].size() == 1);
    CHECK(p["skipped_reasons"][0].get<std::string>().find("needs two GPUs") != std::string::npos);
    // Everything else passed: pytest's exit status decides.
    CHECK(results["verdict"] == (exit_code == 0 ? "pass" : "fail"));
  }
}

TEST_CASE("gpu_check_report embeds mma_rate's JSON, and a failed mma_rate (a wrong accumulator) fails the verdict") {
  const fs::path report = report_or_skip();
  if (report.empty()) return;
  TempDir dir;
  const std::string gpu = dir / "gpu.json", tests = dir / "tests.log", mma = dir / "mma_rate.json";
  {
    std::ofstream(tests) << "[doctest] test cases: 3 | 3 passed | 0 failed | 0 skipped\n";
    std::ofstream(gpu) << R"({"gpu": {"name": "NVIDIA H200"}})";
    std::ofstream(mma) << R"({"benchmark": "mma_rate", "best_mma_per_sm_per_clock": {"bf16": 0.52}})";
  }
  struct Case {
    const char* exit_code;
    bool written;
    const char* verdict;
  };
  for (const Case c : {Case{"0", true, "pass"}, Case{"1", true, "fail"}, Case{"127", false, "pass"}, Case{"1", false, "fail"}}) {
    CAPTURE(c.exit_code);
    CAPTURE(c.written);
    const std::string out = dir / "results.json";
    ProcessResult r = run_process({report.string(), "--out", out, "--gpu", gpu, "--tests-log", tests, "--tests-exit", "0",
                                   "--bench-exit", "0", "--cutlass-exit", "0", "--mma-rate",
                                   c.written ? mma : dir / "missing.json", "--mma-rate-exit", c.exit_code},
                                  {});
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    const auto results = nlohmann::json::parse(slurp(out));
    CHECK(results["mma_rate"]["exit_code"] == std::stoi(c.exit_code));
    if (c.written) CHECK(results["mma_rate"]["best_mma_per_sm_per_clock"]["bf16"] == 0.52);
    else CHECK(results["mma_rate"]["error"].get<std::string>().find(c.exit_code == std::string("127") ? "not run" : "no result") == 0);
    CHECK(results["verdict"] == c.verdict);
  }
}

}  // TEST_SUITE
