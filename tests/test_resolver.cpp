// The resolver: memory, store and compile layers; single flight; frozen mode; bad input.

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>
#include <vector>

#include "compile/nvrtc_library.hpp"
#include "host_test_support.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

}  // namespace

TEST_CASE("a spec is compiled then found in memory then on disk by a new resolver") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  KernelSpec spec = align_spec(64, 16, 2);
  {
    auto r = KernelResolver::create(resolver_options_in(dir));
    REQUIRE(r.ok());
    auto first = (*r)->resolve(spec);
    REQUIRE(first.ok());
    CHECK(first->source == KernelSource::compiled);
    auto second = (*r)->resolve(spec);
    REQUIRE(second.ok());
    CHECK(second->source == KernelSource::memory);
    CHECK(second->kernel == first->kernel);
    const auto& m = first->kernel->meta;
    CHECK(m.block_threads == 64);
    CHECK(m.dynamic_shared_bytes == (2 * 64 + 64 + 1) * 4);
    CHECK(m.registers > 0);
    CHECK(first->kernel->binary.substr(0, 4) == "\x7f" "ELF");
    auto stats = (*r)->stats();
    CHECK(stats.compiles == 1);
    CHECK(stats.memory_hits == 1);
    CHECK(stats.store.published == 1);
  }
  auto r = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(r.ok());
  auto third = (*r)->resolve(spec);
  REQUIRE(third.ok());
  CHECK(third->source == KernelSource::disk);
  CHECK((*r)->stats().compiles == 0);
  CHECK((*r)->stats().disk_hits == 1);
}

TEST_CASE("single flight makes threads asking for one spec at once compile it once") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  auto r = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(r.ok());
  KernelSpec spec = align_spec(96, 32, 3);
  std::vector<std::thread> threads;
  std::vector<const ResolvedKernel*> got(8, nullptr);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      auto res = (*r)->resolve(spec);
      if (res.ok()) got[t] = res->kernel;
    });
  for (auto& t : threads) t.join();
  for (auto* k : got) CHECK(k == got[0]);
  CHECK(got[0] != nullptr);
  CHECK((*r)->stats().compiles == 1);
}

TEST_CASE("resolve_async compiles a batch through the pool") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  auto r = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(r.ok());
  std::vector<std::future<Result<Resolution>>> futures;
  for (std::uint16_t bm : {16, 32, 64, 128})
    futures.push_back((*r)->resolve_async(align_spec(32, bm, 2)));
  for (auto& f : futures) {
    auto res = f.get();
    REQUIRE(res.ok());
    CHECK(res->source == KernelSource::compiled);
  }
  CHECK((*r)->stats().compiles == 4);
}

TEST_CASE("a resolver destroyed with compiles still queued finishes them before its tables go") {
  // What an engine does when start-up fails half-way through an async warm-up (or a test whose
  // REQUIRE throws): the resolver goes while its pool still holds work that uses it.
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  const std::uint16_t bms[] = {16, 32, 64, 128};
  std::vector<std::future<Result<Resolution>>> futures;
  {
    auto r = KernelResolver::create(resolver_options_in(dir));  // one compile thread: three wait
    REQUIRE(r.ok());
    for (std::uint16_t bm : bms) futures.push_back((*r)->resolve_async(align_spec(48, bm, 2)));
  }
  for (auto& f : futures) {
    REQUIRE(f.wait_for(std::chrono::seconds(0)) == std::future_status::ready);
    const auto res = f.get();
    CHECK_MESSAGE(res.ok(), res.status().message());
  }
  // Each was published: a new resolver finds them all on disk.
  auto r = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(r.ok());
  for (std::uint16_t bm : bms) {
    auto res = (*r)->resolve(align_spec(48, bm, 2));
    REQUIRE(res.ok());
    CHECK(res->source == KernelSource::disk);
  }
}

TEST_CASE("a spec that fails to compile is compiled and dumped once, then its error is returned") {
  // An engine retrying a shape every step must not pay a compile (and a dump) every step.
  if (!nvrtc_or_skip()) return;
  TempDir dir, dumps;
  ScopedEnv dump_dir("MOEJIT_DUMP_DIR", dumps.path());
  auto files = codegen::TemplateSet::embedded()->files();
  files["moe/align.cuh"] += "\nthis_is_not_cuda_code;\n";
  auto o = resolver_options_in(dir);
  o.templates = std::make_shared<codegen::TemplateSet>(std::move(files));
  auto r = KernelResolver::create(o);
  REQUIRE(r.ok());
  KernelSpec spec = align_spec(64, 16, 2);
  auto first = (*r)->resolve(spec);
  REQUIRE_FALSE(first.ok());
  CHECK(first.status().code() == Code::compile_error);
  CHECK(contains(first.status().message(), "this_is_not_cuda_code"));
  std::vector<std::future<Result<Resolution>>> again;
  for (int i = 0; i < 3; ++i) again.push_back((*r)->resolve_async(spec));
  again.push_back(std::async(std::launch::async, [&] { return (*r)->resolve(spec); }));
  for (auto& f : again) {
    auto res = f.get();
    REQUIRE_FALSE(res.ok());
    CHECK(res.status().code() == Code::compile_error);
    CHECK(res.status().message() == first.status().message());
  }
  CHECK((*r)->stats().compile_errors == 1);
  std::size_t dumped = 0;
  for (const auto& e : std::filesystem::directory_iterator(dumps.path()))
    dumped += e.is_directory();
  CHECK(dumped == 1);
  // Other specs still compile (their source fails the same way here, each once).
  auto other = (*r)->resolve(align_spec(64, 32, 2));
  REQUIRE_FALSE(other.ok());
  CHECK((*r)->stats().compile_errors == 2);
}

TEST_CASE("frozen mode makes a miss an error and never a compile") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  auto o = resolver_options_in(dir);
  KernelSpec warm = align_spec(64, 16, 2), cold = align_spec(64, 32, 2);
  {
    auto r = KernelResolver::create(o);
    REQUIRE(r.ok());
    REQUIRE((*r)->resolve(warm).ok());
  }
  o.frozen = true;
  auto r = KernelResolver::create(o);
  REQUIRE(r.ok());
  auto hit = (*r)->resolve(warm);
  REQUIRE(hit.ok());
  CHECK(hit->source == KernelSource::disk);
  auto miss = (*r)->resolve(cold);
  REQUIRE_FALSE(miss.ok());
  CHECK(miss.status().code() == Code::frozen_miss);
  CHECK(miss.status().message().find("\"bm\":32") != std::string::npos);
  CHECK((*r)->stats().compiles == 0);
}

TEST_CASE("invalid specs are refused before anything is compiled or stored") {
  TempDir dir;
  auto r = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(r.ok());
  KernelSpec bad = align_spec();
  bad.bm = 3;
  auto res = (*r)->resolve(bad);
  REQUIRE_FALSE(res.ok());
  CHECK(res.status().code() == Code::invalid_argument);
  CHECK(res.status().message().find("'bm' = 3") != std::string::npos);
  CHECK((*r)->stats().compiles == 0);
  CHECK((*r)->store().list().empty());

  // The host backend is a valid target: the same spec compiles with the host C++ compiler.
  KernelSpec host = align_spec();
  host.backend = Backend::host;
  res = (*r)->resolve(host);
  REQUIRE_MESSAGE(res.ok(), res.status().message());
  CHECK(res->source == KernelSource::compiled);
  CHECK(res->kernel->meta.kind == store::PayloadKind::host_shared_object);
  CHECK((*r)->stats().compiles == 1);
}
