// The store across processes: concurrent first use, and publishers killed at random points.

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "cache/store.hpp"
#include "compile/nvrtc_library.hpp"
#include "spec/spec_json.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

#ifndef MOEJIT_STORE_WORKER
#error "MOEJIT_STORE_WORKER must name the store_worker binary"
#endif

namespace {

std::vector<std::string> write_specs(const TempDir& dir, const std::vector<KernelSpec>& specs) {
  std::vector<std::string> paths;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    paths.push_back(dir / ("spec" + std::to_string(i) + ".json"));
    write_text(paths.back(), spec_to_json(specs[i]));
  }
  return paths;
}

// Every entry of the store's writable root decodes and verifies; returns how many there are.
std::size_t verify_all(const TempDir& dir) {
  store::Store s(store_options_in(dir));
  std::size_t n = 0;
  for (const auto& info : s.list()) {
    CAPTURE(info.path);
    CHECK_MESSAGE(info.entry.ok(), info.entry.status().message());
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("8 processes asking for the same 4 specs at once compile each key exactly once") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  auto specs = write_specs(dir, {align_spec(64, 16, 2, Arch::sm_90a), align_spec(128, 32, 4, Arch::sm_80),
                                 align_spec(256, 64, 8, Arch::sm_89), align_spec(16, 16, 1, Arch::sm_121a)});
  std::mt19937 rng(std::random_device{}());
  std::vector<std::future<ProcessResult>> runs;
  for (int p = 0; p < 8; ++p) {
    auto order = specs;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::string> argv = {MOEJIT_STORE_WORKER, "resolve", dir / "store", dir / "locks"};
    argv.insert(argv.end(), order.begin(), order.end());
    runs.push_back(std::async(std::launch::async, [argv] { return run_process(argv); }));
  }
  std::map<std::string, int> compiled, seen;
  for (auto& f : runs) {
    ProcessResult r = f.get();
    CHECK_MESSAGE(r.exit_code == 0, r.err);
    std::istringstream lines(r.out);
    std::string key, source;
    int n = 0;
    while (lines >> key >> source) {
      ++n;
      seen[key]++;
      if (source == "compiled") compiled[key]++;
      else CHECK(source == "disk");
    }
    CHECK(n == 4);
  }
  CHECK(seen.size() == 4);
  for (const auto& [key, count] : seen) {
    CAPTURE(key);
    CHECK(count == 8);
    CHECK(compiled[key] == 1);
  }
  CHECK(verify_all(dir) == 4);
}

TEST_CASE("publishers killed at random points never leave a partial entry visible") {
  TempDir dir;
  std::mt19937 rng(std::random_device{}());
  const bool with_compiles = NvrtcLibrary::get().ok();
  std::vector<KernelSpec> compile_specs;
  for (int kill = 0; kill < 50; ++kill) {
    CAPTURE(kill);
    std::vector<std::string> argv;
    int delay_ms;
    if (with_compiles && kill % 2 == 1) {
      // A real compile and publish, killed somewhere between start-up and done.
      compile_specs.push_back(align_spec(8u + static_cast<std::uint32_t>(kill), 16, 1));
      auto paths = write_specs(dir, {compile_specs.back()});
      argv = {MOEJIT_STORE_WORKER, "resolve", dir / "store", dir / "locks", paths[0]};
      delay_ms = std::uniform_int_distribution<int>(0, 400)(rng);
    } else {
      // Large synthetic entries: most of the time goes to writing and fsyncing them.
      std::size_t bytes = std::uniform_int_distribution<std::size_t>(1 << 20, 8 << 20)(rng);
      argv = {MOEJIT_STORE_WORKER, "publish-loop", dir / "store", dir / "locks", std::to_string(bytes)};
      delay_ms = std::uniform_int_distribution<int>(5, 150)(rng);
    }
    int pid = spawn_process(argv);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    verify_all(dir);
  }
  // The next run succeeds: every spec resolves, from disk or by compiling what was cut short.
  if (with_compiles) {
    auto paths = write_specs(dir, compile_specs);
    std::vector<std::string> argv = {MOEJIT_STORE_WORKER, "resolve", dir / "store", dir / "locks"};
    argv.insert(argv.end(), paths.begin(), paths.end());
    ProcessResult r = run_process(argv);
    CHECK_MESSAGE(r.exit_code == 0, r.err);
  }
  CHECK(verify_all(dir) > 0);
}
