// bench_host_overhead: the host time moejit spends per call on a store hit, from the public API
// call to the driver's launch entry point, measured without a GPU: the device backend runs on
// moejit's null driver (null_cuda.c, loaded through MOEJIT_CUDA_LIBRARY), whose launches return
// at once. Real CUBINs are compiled by NVRTC on the first call; every timed call is a memory hit.
// On a GPU, bench_gemm measures the same thing against the real driver (host_overhead).
//
// Prints or writes one JSON object: per call (median over rounds) of moejit_grouped_gemm (one
// launch) and moejit_fused_moe (four launches), and of the null driver's cuLaunchKernelEx
// alone, which the moejit figures include.

#include <moejit/moejit.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "bench/utc_now.hpp"

#include "moejit_build_commit.h"  // MOEJIT_BUILD_COMMIT, stamped each build

namespace {

using moejit::bench::utc_now;
using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// Small shapes: the host path's cost does not depend on them, and packing stays quick.
constexpr std::uint32_t kExperts = 8, kHidden = 256, kIntermediate = 128, kTopk = 2, kTokens = 1;

struct Settings {
  std::string driver, out;
  int rounds = 31;
  int calls = 20000;
};

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "bench_host_overhead: %s: %s\n", what, moejit_last_error());
  std::exit(1);
}
void check(moejit_status_t s, const char* what) {
  if (s != MOEJIT_OK) fail(what);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// Median and minimum over rounds of the per-call time of `calls` back-to-back calls, in ns.
Json per_call_ns(const Settings& s, const std::function<void()>& call) {
  for (int i = 0; i < s.calls / 10 + 1; ++i) call();  // caches and branch predictors warm
  std::vector<double> rounds;
  for (int r = 0; r < s.rounds; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < s.calls; ++i) call();
    rounds.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / s.calls);
  }
  return {{"median_ns", median(rounds)}, {"min_ns", *std::min_element(rounds.begin(), rounds.end())}};
}

// "Device" memory: the null driver's device memory is host memory, so the benchmark's buffers
// come from the same kind of allocation, freed together at the end.
struct Arena {
  std::vector<void*> blocks;
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() {
    for (void* b : blocks) std::free(b);
  }
  void* alloc(std::size_t bytes) {
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (p == nullptr) {
      std::fprintf(stderr, "bench_host_overhead: out of memory\n");
      std::exit(1);
    }
    blocks.push_back(p);
    return p;
  }
  void* copy(const void* data, std::size_t bytes) { return std::memcpy(alloc(bytes), data, bytes); }
};

// Packed MXFP4 weights of `experts` x `n` x `k` from random codes, in device memory.
moejit_packed_weights_t pack(moejit_context_t ctx, std::uint32_t n, std::uint32_t k, bool gate_up,
                             std::mt19937& rng, Arena& arena) {
  std::vector<std::uint8_t> codes(std::size_t{kExperts} * n * k), scales(std::size_t{kExperts} * n * k / 32);
  for (auto& c : codes) c = static_cast<std::uint8_t>(rng() % 16);
  for (auto& e : scales) e = static_cast<std::uint8_t>(124 + rng() % 6);
  moejit_weights_desc_t d;
  moejit_weights_desc_init(&d);
  d.format = MOEJIT_WEIGHT_MXFP4;
  d.group_size = 32;
  d.scale_dtype = MOEJIT_DTYPE_E8M0;
  d.experts = kExperts;
  d.n = n;
  d.k = k;
  d.source = MOEJIT_SOURCE_PLAIN_CODES;
  d.rows = gate_up ? MOEJIT_ROWS_CONCATENATED : MOEJIT_ROWS_PLAIN;
  d.qweight = codes.data();
  d.scales = scales.data();
  moejit_packed_sizes_t sizes{};
  check(moejit_packed_weights_size(ctx, &d, &sizes), "moejit_packed_weights_size");
  moejit_packed_weights_t p;
  moejit_packed_weights_init(&p);
  p.qweight = arena.alloc(sizes.qweight_bytes);
  p.scales = arena.alloc(sizes.scales_bytes);
  p.qweight_bytes = sizes.qweight_bytes;
  p.scales_bytes = sizes.scales_bytes;
  check(moejit_pack_weights(ctx, &d, &p, nullptr), "moejit_pack_weights");
  return p;
}

std::string default_driver() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("libmoejit-null-cuda.so") : (exe.parent_path() / "libmoejit-null-cuda.so").string();
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  s.driver = default_driver();
  CLI::App app{"moejit's host time per call on a hit, on the null driver (no GPU needed)"};
  app.add_option("--driver", s.driver, "the null driver library (default: next to this binary)");
  app.add_option("--out", s.out, "write the JSON here instead of stdout");
  app.add_option("--rounds", s.rounds, "rounds (the median is reported)")->check(CLI::Range(1, 10000));
  app.add_option("--calls", s.calls, "calls per round")->check(CLI::Range(1, 10000000));
  CLI11_PARSE(app, argc, argv);

  // The null driver's own entry points: its launch, timed alone, and its launch counter.
  void* lib = ::dlopen(s.driver.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "bench_host_overhead: --driver %s: %s\n", s.driver.c_str(), ::dlerror());
    return 1;
  }
  using LaunchEx = int (*)(const void*, void*, void**, void**);
  using Count = unsigned long long (*)();
  auto launch_ex = reinterpret_cast<LaunchEx>(::dlsym(lib, "cuLaunchKernelEx"));
  auto launches = reinterpret_cast<Count>(::dlsym(lib, "moejit_null_cuda_launches"));
  if (launch_ex == nullptr || launches == nullptr) {
    std::fprintf(stderr, "bench_host_overhead: %s is not moejit's null driver\n", s.driver.c_str());
    return 1;
  }
  ::setenv("MOEJIT_CUDA_LIBRARY", s.driver.c_str(), 1);

  moejit_context_options_t o;
  moejit_context_options_init(&o);
  o.backend = MOEJIT_BACKEND_DEVICE;
  moejit_context_t ctx = nullptr;
  check(moejit_context_create(&o, &ctx), "moejit_context_create");
  const char* arch = nullptr;
  moejit_backend_t backend{};
  check(moejit_context_backend(ctx, &backend, &arch), "moejit_context_backend");

  Arena arena;
  std::mt19937 rng(20261129);
  moejit_packed_weights_t w13 = pack(ctx, 2 * kIntermediate, kHidden, true, rng, arena);
  moejit_packed_weights_t w2 = pack(ctx, kHidden, kIntermediate, false, rng, arena);
  moejit_packed_weights_t plain = pack(ctx, kHidden, kHidden, false, rng, arena);

  // One token routed to two experts, laid out as moe_align_block_size (block 16) would.
  std::vector<std::int32_t> ids = {3, 5};
  std::vector<float> weights = {0.75f, 0.25f};
  std::vector<std::int32_t> sorted(32, kTokens * kTopk), expert_ids(4, -1), post_pad = {32};
  sorted[0] = 0, sorted[16] = 1, expert_ids[0] = 3, expert_ids[1] = 5;
  std::vector<std::uint16_t> hidden(std::size_t{kTokens} * kHidden, 0x3f80);  // bf16 1.0
  auto dev = [&](const auto& v) { return arena.copy(v.data(), v.size() * sizeof(v[0])); };
  void* d_hidden = dev(hidden);
  void* d_out = arena.alloc(std::size_t{kTokens} * kTopk * kHidden * 4);

  moejit_grouped_gemm_args_t g;
  moejit_grouped_gemm_args_init(&g);
  g.weights = &plain;
  g.m = kTokens * kTopk;
  g.a = d_hidden;
  g.lda = kHidden;
  g.c = d_out;
  g.ldc = kHidden;
  g.sorted_token_ids = static_cast<const std::int32_t*>(dev(sorted));
  g.expert_ids = static_cast<const std::int32_t*>(dev(expert_ids));
  g.num_tokens_post_pad = static_cast<const std::int32_t*>(dev(post_pad));
  g.block_size = 16;
  g.a_row_divisor = kTopk;

  moejit_fused_moe_args_t f;
  moejit_fused_moe_args_init(&f);
  f.w13 = &w13;
  f.w2 = &w2;
  f.tokens = kTokens;
  f.topk = kTopk;
  f.hidden = d_hidden;
  f.topk_ids = static_cast<const std::int32_t*>(dev(ids));
  f.topk_weights = static_cast<const float*>(dev(weights));
  f.output = d_out;
  check(moejit_fused_moe_workspace_size(ctx, &f, &f.workspace_bytes), "moejit_fused_moe_workspace_size");
  f.workspace = arena.alloc(f.workspace_bytes);
  std::memset(f.workspace, 0, f.workspace_bytes);

  // First calls: kernels compiled (or loaded from the store) and modules loaded.
  const auto warm_start = Clock::now();
  check(moejit_grouped_gemm(ctx, &g, nullptr), "moejit_grouped_gemm");
  check(moejit_fused_moe(ctx, &f, nullptr), "moejit_fused_moe");
  const double first_calls_ms = std::chrono::duration<double, std::milli>(Clock::now() - warm_start).count();

  const unsigned long long before_gemm = launches();
  const Json gemm = per_call_ns(s, [&] {
    if (moejit_grouped_gemm(ctx, &g, nullptr) != MOEJIT_OK) fail("moejit_grouped_gemm");
  });
  const unsigned long long gemm_launches = launches() - before_gemm;
  const unsigned long long before_fused = launches();
  const Json fused = per_call_ns(s, [&] {
    if (moejit_fused_moe(ctx, &f, nullptr) != MOEJIT_OK) fail("moejit_fused_moe");
  });
  const unsigned long long fused_launches = launches() - before_fused;
  const Json driver = per_call_ns(s, [&] { (void)launch_ex(nullptr, nullptr, nullptr, nullptr); });

  moejit_stats_t stats;
  moejit_stats_init(&stats);
  check(moejit_get_stats(ctx, &stats), "moejit_get_stats");
  const double calls_per_measure = static_cast<double>(s.rounds) * s.calls + s.calls / 10 + 1;
  Json j;
  j["benchmark"] = "host_overhead";
  j["date"] = utc_now();
  j["build_commit"] = MOEJIT_BUILD_COMMIT;
  j["driver"] = "moejit null driver (no GPU): launches return at once";
  j["arch"] = arch;
  j["settings"] = {{"rounds", s.rounds}, {"calls_per_round", s.calls}};
  j["problem"] = {{"experts", kExperts}, {"hidden", kHidden}, {"intermediate", kIntermediate}, {"topk", kTopk},
                  {"tokens", kTokens}, {"format", "mxfp4"}, {"act", "bf16"}};
  j["first_calls_ms"] = first_calls_ms;
  j["grouped_gemm"] = gemm;
  j["grouped_gemm"]["launches_per_call"] = static_cast<double>(gemm_launches) / calls_per_measure;
  j["fused_moe"] = fused;
  j["fused_moe"]["launches_per_call"] = static_cast<double>(fused_launches) / calls_per_measure;
  j["null_driver_launch"] = driver;
  j["stats"] = {{"memory_hits", stats.memory_hits}, {"disk_hits", stats.disk_hits}, {"compiles", stats.compiles},
                {"launches", stats.launches}};
  check(moejit_context_destroy(ctx), "moejit_context_destroy");
  if (s.out.empty()) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::ofstream(s.out) << j.dump(2) << "\n";
  }
  return 0;
}
