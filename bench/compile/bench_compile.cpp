// Compile and store benchmarks (CPU only): cold NVRTC compile with and without precompiled
// headers, disk-hit load, memory-hit lookup (and its heap allocations), a batch of distinct specs
// through the compile pool, and resident memory across many compiles. Medians over repeated
// runs; the two sides of each comparison are interleaved in one run. Prints one JSON object.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <new>
#include <random>

#include "codegen/generate.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "runtime/kernel_resolver.hpp"
#include "support/fs.hpp"

namespace {

std::atomic<long> g_allocations{0};

}  // namespace

// Counts heap allocations, to show the memory-hit path makes none. (GCC flags free() in a
// replacement operator delete as mismatched; these replace every form, so it is not.)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace {

using namespace moejit;
using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

Json summary(const std::vector<double>& v) {
  return Json{{"median", median(v)},
              {"min", *std::min_element(v.begin(), v.end())},
              {"max", *std::max_element(v.begin(), v.end())},
              {"runs", v.size()}};
}

long rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

std::string command_output(const char* cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd, "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

KernelSpec align_spec(std::uint32_t experts, std::uint16_t bm, std::uint16_t warps, Arch arch) {
  KernelSpec s{};
  s.op = Op::moe_align;
  s.arch = arch;
  s.backend = Backend::device;
  s.experts = experts;
  s.bm = bm;
  s.warps = warps;
  return s;
}

[[noreturn]] void die(const Status& s) {
  std::fprintf(stderr, "bench_compile: %s\n", s.to_string().c_str());
  std::exit(1);
}

template <typename T>
T check(Result<T> r) {
  if (!r.ok()) die(r.status());
  return std::move(r).value();
}

KernelResolver::Options resolver_options(const std::string& root, unsigned threads) {
  KernelResolver::Options o;
  o.store.dir = root + "/store";
  o.store.lock_dir = root + "/locks";
  o.compile_threads = threads;
  o.templates = codegen::TemplateSet::embedded();
  return o;
}

// DeepSeek-V3's gate/up projection, MXFP4, decode tile.
KernelSpec gemm_spec() {
  KernelSpec s{};
  s.op = Op::grouped_gemm;
  s.arch = Arch::sm_90a;
  s.backend = Backend::device;
  s.weight = WeightFormat::mxfp4;
  s.scale = DType::e8m0;
  s.act = DType::bf16;
  s.out = DType::bf16;
  s.layout = Layout::indexed;
  s.epilogue = Epilogue::silu_and_mul;
  s.group_size = 32;
  s.n = 4096;
  s.k = 7168;
  s.experts = 256;
  s.bm = 16;
  s.bn = 128;
  s.bk = 64;
  s.stages = 4;
  s.warps = 4;
  s.split_k = 1;
  return s;
}

// Cold compiles of one kernel, PCH off and on, interleaved.
Json bench_cold_compile(const KernelSpec& spec, const char* label, int runs) {
  auto templates = codegen::TemplateSet::embedded();
  auto off = check(NvrtcCompiler::create({.use_pch = false, .lineinfo = false}));
  auto on = check(NvrtcCompiler::create({.use_pch = true, .lineinfo = false}));
  auto g = check(codegen::generate_kernel(spec, *templates));
  // The first PCH compile also writes the precompiled header; reported on its own.
  auto t = Clock::now();
  check(on->compile(g, *templates, spec));
  double pch_create_ms = ms_since(t);
  std::vector<double> off_ms, on_ms;
  for (int i = 0; i < runs; ++i) {
    t = Clock::now();
    check(off->compile(g, *templates, spec));
    off_ms.push_back(ms_since(t));
    t = Clock::now();
    check(on->compile(g, *templates, spec));
    on_ms.push_back(ms_since(t));
  }
  return Json{{"spec", label},
              {"pch_off_ms", summary(off_ms)},
              {"pch_on_ms", summary(on_ms)},
              {"pch_first_compile_ms", pch_create_ms},
              {"pch_speedup", median(off_ms) / median(on_ms)}};
}

// Store::load of a synthetic 200 KB entry (read, checksum, decode), and a resolver disk hit of
// a real kernel (codegen + key + load) in a fresh resolver.
Json bench_disk_hit(const std::string& root, int runs) {
  store::StoreOptions o;
  o.dir = root + "/disk-hit";
  store::Store s(o);
  store::Entry e;
  e.key_material = "bench 200 KB entry";
  e.key = xxh3_128(e.key_material);
  e.meta.kernel_name = "_Z6kernelv";
  e.meta.compiler = "bench";
  std::mt19937_64 rng(42);
  e.payload.resize(200 * 1024);
  for (auto& c : e.payload) c = static_cast<char>(rng());
  if (Status st = s.publish(e); !st.ok()) die(st);
  std::vector<double> load_ms;
  for (int i = 0; i < runs; ++i) {
    auto t = Clock::now();
    auto loaded = s.load(e.key, e.key_material);
    load_ms.push_back(ms_since(t));
    if (!loaded || loaded->payload.size() != e.payload.size()) die(Status(Code::internal, "load failed"));
  }

  KernelSpec spec = align_spec(256, 64, 16, Arch::sm_90a);
  std::size_t kernel_bytes = 0;
  {
    auto r = check(KernelResolver::create(resolver_options(root, 1)));
    kernel_bytes = check(r->resolve(spec)).kernel->binary.size();
  }
  std::vector<double> resolve_ms;
  for (int i = 0; i < runs; ++i) {
    auto r = check(KernelResolver::create(resolver_options(root, 1)));
    auto t = Clock::now();
    auto res = check(r->resolve(spec));
    resolve_ms.push_back(ms_since(t));
    if (res.source != KernelSource::disk) die(Status(Code::internal, "expected a disk hit"));
  }
  return Json{{"store_load_200KB_ms", summary(load_ms)},
              {"resolver_disk_hit_ms", summary(resolve_ms)},
              {"resolver_disk_hit_kernel_bytes", kernel_bytes}};
}

// resolve() on a spec already in memory: nanoseconds per call and heap allocations.
Json bench_memory_hit(const std::string& root) {
  auto r = check(KernelResolver::create(resolver_options(root, 1)));
  KernelSpec spec = align_spec(256, 64, 16, Arch::sm_90a);
  check(r->resolve(spec));
  constexpr int kBatches = 21, kCalls = 200000;
  std::vector<double> ns;
  long allocations = 0;
  for (int b = 0; b < kBatches; ++b) {
    long before = g_allocations.load();
    auto t = Clock::now();
    for (int i = 0; i < kCalls; ++i) {
      auto hit = r->resolve(spec);
      if (!hit.ok() || hit->source != KernelSource::memory) die(Status(Code::internal, "not a hit"));
    }
    double elapsed_ms = ms_since(t);
    allocations += g_allocations.load() - before;
    ns.push_back(elapsed_ms * 1e6 / kCalls);
  }
  return Json{{"ns_per_lookup", summary(ns)},
              {"calls", static_cast<long>(kBatches) * kCalls},
              {"heap_allocations", allocations}};
}

// A batch of distinct specs through the compile pool, with 1 and with N threads.
Json bench_batch(const std::string& root, int specs, unsigned threads) {
  Json out = Json::object();
  for (unsigned t : {1u, threads}) {
    std::string dir = root + "/batch-" + std::to_string(t);
    auto r = check(KernelResolver::create(resolver_options(dir, t)));
    std::vector<std::future<Result<Resolution>>> futures;
    auto start = Clock::now();
    for (int i = 0; i < specs; ++i)
      futures.push_back(r->resolve_async(align_spec(32u + static_cast<std::uint32_t>(i), 64, 8, Arch::sm_90a)));
    for (auto& f : futures) check(f.get());
    double wall = ms_since(start);
    out[std::to_string(t) + "_threads"] = Json{{"specs", specs},
                                               {"wall_ms", wall},
                                               {"ms_per_spec", wall / specs},
                                               {"compile_ms_total", r->stats().compile_ms}};
    if (t == threads) break;
  }
  return out;
}

// Resident memory across many compiles in one process: generate and compile distinct specs
// and drop the results, so any growth is NVRTC state (programs, logs) that was not released.
Json bench_rss(int compiles) {
  auto templates = codegen::TemplateSet::embedded();
  auto compiler = check(NvrtcCompiler::create({}));
  auto compile_one = [&](int i) {
    auto s = align_spec(1 + static_cast<std::uint32_t>(i % 4000), static_cast<std::uint16_t>(8 << (i % 3)),
                        static_cast<std::uint16_t>(1 + i % 4), Arch::sm_90a);
    auto g = check(codegen::generate_kernel(s, *templates));
    check(compiler->compile(g, *templates, s));
  };
  for (int i = 0; i < 20; ++i) compile_one(100000 + i);  // warm-up: NVRTC's own one-time state
  long before = rss_kib();
  std::vector<long> samples;
  for (int i = 0; i < compiles; ++i) {
    compile_one(i);
    if ((i + 1) % 100 == 0) samples.push_back(rss_kib());
  }
  return Json{{"compiles", compiles},
              {"rss_before_kib", before},
              {"rss_after_kib", rss_kib()},
              {"rss_every_100_kib", samples}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"moejit compile/store benchmarks (CPU)"};
  int runs = 15, batch = 16, rss_compiles = 500;
  unsigned threads = std::max(2u, std::thread::hardware_concurrency());
  std::string out_path;
  app.add_option("--runs", runs, "Repetitions per timing (medians reported)");
  app.add_option("--batch", batch, "Distinct specs in the pool batch");
  app.add_option("--threads", threads, "Pool threads for the batch");
  app.add_option("--rss-compiles", rss_compiles, "Compiles in the resident-memory run (0: skip)");
  app.add_option("--out", out_path, "Also write the JSON here");
  CLI11_PARSE(app, argc, argv);

  std::string root = (fs::temp_directory_path() / ("moejit-bench-" + unique_suffix())).string();
  fs::create_directories(root);

  Json doc;
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  utsname u{};
  ::uname(&u);
  doc["date"] = date;
  doc["commit"] = command_output("git rev-parse --short HEAD 2>/dev/null");
  doc["host"] = {{"cpu", command_output("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2")},
                 {"cores", std::thread::hardware_concurrency()},
                 {"kernel", u.release}};
  auto t = Clock::now();
  auto nvrtc = check(NvrtcLibrary::get());
  doc["nvrtc"] = {{"identity", nvrtc->identity()}, {"first_use_ms", ms_since(t)}};
  doc["cold_compile"] = bench_cold_compile(align_spec(256, 64, 16, Arch::sm_90a),
                                           "moe_align experts=256 bm=64 warps=16 sm_90a", runs);
  doc["cold_compile_gemm"] = bench_cold_compile(
      gemm_spec(), "grouped_gemm mxfp4 bf16 silu_and_mul n=4096 k=7168 16x128x64 sm_90a", runs);
  doc["disk_hit"] = bench_disk_hit(root, std::max(runs, 50));
  doc["memory_hit"] = bench_memory_hit(root);
  doc["batch"] = bench_batch(root, batch, threads);
  if (rss_compiles > 0) doc["rss"] = bench_rss(rss_compiles);

  std::error_code ec;
  fs::remove_all(root, ec);
  std::string text = doc.dump(2);
  std::printf("%s\n", text.c_str());
  if (!out_path.empty()) {
    if (Status s = write_file_atomic(out_path, text + "\n"); !s.ok()) die(s);
  }
  return 0;
}
