// gpu_check_report: assembles the one JSON document bench/gpu/check.sh returns from the pieces
// it collected (the GPU probe, the device test log, the benchmark's JSON, exit statuses and
// durations). Each piece may be missing or partial (a step that timed out, a machine with no
// GPU): the report then says so instead of failing. Fields: bench/gpu/README.md.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>
#include <regex>
#include <sstream>
#include <string>

#include "bench/gpu/model_vs_measured.hpp"
#include "bench/utc_now.hpp"

namespace {

using moejit::bench::utc_now;
using Json = nlohmann::ordered_json;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The file's JSON, or null (with `why` set) when it is absent or not JSON.
Json read_json(const std::string& path, std::string& why) {
  if (path.empty() || !std::filesystem::exists(path)) {
    why = path.empty() ? "not collected" : path + " was not written";
    return nullptr;
  }
  try {
    return Json::parse(slurp(path));
  } catch (const std::exception& e) {
    why = path + " is not JSON: " + e.what();
    return nullptr;
  }
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// What a doctest console log says: the summary counts, the test cases that skipped and why,
// and the failed assertions with their test case.
Json parse_doctest_log(const std::string& text) {
  Json t;
  t["test_cases"] = nullptr;
  t["passed"] = nullptr;
  t["failed"] = nullptr;
  t["assertions"] = nullptr;
  t["assertions_failed"] = nullptr;
  Json skipped = Json::array(), failures = Json::array(), messages = Json::array();
  const std::regex cases_re(R"(\[doctest\] test cases:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed)");
  const std::regex asserts_re(R"(\[doctest\] assertions:\s*(\d+)\s*\|\s*(\d+) passed\s*\|\s*(\d+) failed)");
  std::string test_case;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, cases_re)) {
      t["test_cases"] = std::stoi(m[1]);
      t["passed"] = std::stoi(m[2]);
      t["failed"] = std::stoi(m[3]);
    } else if (std::regex_search(line, m, asserts_re)) {
      t["assertions"] = std::stoi(m[1]);
      t["assertions_failed"] = std::stoi(m[3]);
    } else if (line.rfind("TEST CASE:", 0) == 0) {
      test_case = trim(line.substr(10));
    } else if (auto p = line.find("MESSAGE: skipped: "); p != std::string::npos) {
      skipped.push_back({{"test", test_case}, {"reason", trim(line.substr(p + 18))}});
    } else if (auto q = line.find("MESSAGE: "); q != std::string::npos && messages.size() < 200) {
      messages.push_back({{"test", test_case}, {"message", trim(line.substr(q + 9))}});
    } else if ((line.find(": ERROR: ") != std::string::npos || line.find(": FATAL ERROR: ") != std::string::npos) &&
               failures.size() < 50) {
      failures.push_back({{"test", test_case}, {"line", trim(line)}});
    }
  }
  t["skipped"] = skipped;
  t["failures"] = failures;
  t["messages"] = messages;
  return t;
}

// cutlass_baseline_check's results: its JSON lines parsed, other lines kept as messages.
Json parse_cutlass_check(const std::string& path, int exit_code) {
  Json c;
  c["exit_code"] = exit_code;
  c["timed_out"] = exit_code == 124 || exit_code == 137;
  c["results"] = Json::array();
  c["messages"] = Json::array();
  c["log"] = path.empty() ? Json(nullptr) : Json(std::filesystem::path(path).filename().string());
  std::istringstream in(slurp(path));
  for (std::string line; std::getline(in, line);) {
    line = trim(line);
    if (line.empty()) continue;
    if (line.front() == '{') {
      try {
        c["results"].push_back(Json::parse(line));
        continue;
      } catch (const std::exception&) {
      }
    }
    if (c["messages"].size() < 50) c["messages"].push_back(line);
  }
  return c;
}

// pytest's console output (-rs): the counts of its last summary line and the skip reasons.
// Exit 127 means check.sh did not run it (no wheel for this machine's Python; the log says so).
Json parse_pytest_log(const std::string& path, int exit_code) {
  Json p;
  p["ran"] = exit_code != 127 && exit_code != -1;
  p["exit_code"] = exit_code;
  p["timed_out"] = exit_code == 124 || exit_code == 137;
  p["log"] = path.empty() ? Json(nullptr) : Json(std::filesystem::path(path).filename().string());
  p["summary"] = nullptr;
  p["skipped_reasons"] = Json::array();
  std::istringstream in(path.empty() ? std::string() : slurp(path));
  static const std::regex summary(R"(^=*\s*(.*\b(passed|failed|skipped|error|errors|no tests ran)\b.* in [0-9.]+s.*?)\s*=*$)");
  static const std::regex count(R"(([0-9]+) (passed|failed|skipped|errors?|deselected))");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_match(line, m, summary)) p["summary"] = m[1].str();
    else if (line.rfind("SKIPPED", 0) == 0 && p["skipped_reasons"].size() < 20) p["skipped_reasons"].push_back(trim(line));
    else if (!p["ran"].get<bool>() && line.rfind("not run:", 0) == 0) p["why"] = trim(line);
  }
  for (const char* k : {"passed", "failed", "skipped", "errors"}) p[k] = 0;
  if (p["summary"].is_string()) {
    const std::string text = p["summary"].get<std::string>();
    for (std::sregex_iterator it(text.begin(), text.end(), count), end; it != end; ++it) {
      std::string kind = (*it)[2].str();
      if (kind == "error") kind = "errors";
      if (kind != "deselected") p[kind] = std::stoi((*it)[1].str());
    }
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out, gpu_path, tests_log, bench_path, commit, bench_log, tests_log_name, cutlass_log, model_path,
      python_log, mma_rate_path;
  int tests_exit = -1, bench_exit = -1, probe_exit = -1, cutlass_exit = -1, python_exit = -1, mma_rate_exit = 127;
  std::vector<std::string> durations;
  CLI::App app{"assemble bench/gpu/check.sh's results into one JSON document"};
  app.add_option("--out", out, "where to write the report")->required();
  app.add_option("--gpu", gpu_path, "bench_gemm --probe's JSON");
  app.add_option("--probe-exit", probe_exit, "its exit status");
  app.add_option("--tests-log", tests_log, "the device test suite's console output");
  app.add_option("--tests-exit", tests_exit, "its exit status (124: timed out)");
  app.add_option("--bench", bench_path, "bench_gemm's JSON");
  app.add_option("--bench-exit", bench_exit, "its exit status (124: timed out)");
  app.add_option("--bench-log", bench_log, "bench_gemm's stderr, named in the report");
  app.add_option("--cutlass-log", cutlass_log, "cutlass_baseline_check's output (one JSON object per line)");
  app.add_option("--cutlass-exit", cutlass_exit, "its exit status");
  app.add_option("--python-log", python_log, "the Python package's GPU tests (pytest -rs output)");
  app.add_option("--python-exit", python_exit, "their exit status (127: not run)");
  app.add_option("--mma-rate", mma_rate_path, "mma_rate's JSON (the tensor cores' rate against the model's figure)");
  app.add_option("--mma-rate-exit", mma_rate_exit, "its exit status (127: not run)");
  app.add_option("--perf-model", model_path, "bench/perf_model's JSON for this tree, to set beside the measurements");
  app.add_option("--commit", commit, "source commit of the checked tree");
  app.add_option("--duration", durations, "NAME=SECONDS, repeatable")->delimiter(',');
  CLI11_PARSE(app, argc, argv);

  Json r;
  r["schema"] = "moejit-gpu-check/1";
  r["date"] = utc_now();
  r["commit"] = commit.empty() ? Json(nullptr) : Json(commit);
  char host[256] = {};
  r["host"] = ::gethostname(host, sizeof host - 1) == 0 ? Json(host) : Json(nullptr);

  std::string why;
  const Json probe = read_json(gpu_path, why);
  r["gpu"] = probe.is_object() && probe.contains("gpu") ? probe["gpu"] : Json(nullptr);
  for (const char* k : {"driver_version", "cuda_version", "nvrtc", "libcuda", "build_commit"})
    r[k] = probe.is_object() && probe.contains(k) ? probe[k] : Json(nullptr);
  if (probe.is_object() && probe.contains("error")) r["gpu_error"] = probe["error"]["message"];
  else if (!probe.is_object()) r["gpu_error"] = "no probe result: " + why;
  else r["gpu_error"] = nullptr;
  r["probe_exit_code"] = probe_exit;

  Json tests = tests_log.empty() || !std::filesystem::exists(tests_log)
                   ? Json{{"error", "no test log: the suite did not run"}}
                   : parse_doctest_log(slurp(tests_log));
  tests["exit_code"] = tests_exit;
  tests["timed_out"] = tests_exit == 124 || tests_exit == 137;
  tests["log"] = tests_log.empty() ? Json(nullptr) : Json(std::filesystem::path(tests_log).filename().string());
  r["tests"] = tests;

  std::string bench_why;
  const Json bench = read_json(bench_path, bench_why);
  r["bench"] = bench;
  if (bench.is_null()) r["bench_error"] = bench_why;
  r["bench_exit_code"] = bench_exit;
  r["bench_timed_out"] = bench_exit == 124 || bench_exit == 137;
  r["bench_log"] = bench_log.empty() ? Json(nullptr) : Json(std::filesystem::path(bench_log).filename().string());

  // The measured mma.sync rate (calibrates DeviceProfile::mma_per_clock). Part of the verdict
  // only where it ran and failed: it checks every accumulator, so exit 1 is a wrong mma.
  std::string mma_why;
  Json mma_rate = read_json(mma_rate_path, mma_why);
  if (mma_rate.is_null()) mma_rate = {{"error", mma_rate_exit == 127 ? "not run" : "no result: " + mma_why}};
  else if (!mma_rate.is_object()) mma_rate = {{"error", mma_rate_path + " is not a JSON object"}};
  mma_rate["exit_code"] = mma_rate_exit;
  r["mma_rate"] = mma_rate;

  r["cutlass_check"] = parse_cutlass_check(cutlass_log, cutlass_exit);
  r["python_tests"] = parse_pytest_log(python_log, python_exit);

  // The static model's prediction beside each measured case (calibration; not part of the verdict).
  std::string model_why;
  const Json model = read_json(model_path, model_why);
  if (model.is_null()) r["model_vs_measured"] = {{"error", "no model predictions: " + model_why}};
  else if (bench.is_null()) r["model_vs_measured"] = {{"error", "no measurements: " + bench_why}};
  else if (!r["gpu"].is_object() || !r["gpu"].contains("name"))
    r["model_vs_measured"] = {{"error", "no GPU name to choose the model's profile by"}};
  else r["model_vs_measured"] = moejit::bench::model_vs_measured(model, bench, r["gpu"]["name"].get<std::string>());

  Json d = Json::object();
  for (const std::string& kv : durations) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    try {
      d[kv.substr(0, eq)] = std::stod(kv.substr(eq + 1));
    } catch (const std::exception&) {
      d[kv.substr(0, eq)] = nullptr;
    }
  }
  r["durations_s"] = d;

  // no_gpu: nothing could be checked; pass: the suite and the benchmark both finished cleanly.
  const bool gpu = !r["gpu"].is_null();
  const bool tests_ok = tests_exit == 0 && tests.value("failed", Json(1)) == Json(0);
  const bool bench_ok = bench_exit == 0;
  const bool cutlass_ok = cutlass_exit == 0;
  // Not run (no wheel carried) is reported, not failed: the C++ suites are the core check.
  const bool python_ok = !r["python_tests"]["ran"].get<bool>() || python_exit == 0;
  const bool mma_rate_ok = mma_rate_exit == 0 || mma_rate_exit == 127;
  r["verdict"] = !gpu ? "no_gpu" : tests_ok && bench_ok && cutlass_ok && python_ok && mma_rate_ok ? "pass" : "fail";

  const std::string tmp = out + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << r.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "gpu_check_report: cannot write %s\n", tmp.c_str());
      return 1;
    }
  }
  std::filesystem::rename(tmp, out);
  std::cout << "verdict: " << r["verdict"].get<std::string>() << " (" << out << ")\n";
  return 0;
}
