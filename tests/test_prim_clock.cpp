// sm_cycles() and sm_id() (templates/common/clock.cuh): on the device, reads of %clock64 and
// %smid, each kept where it is called (two readings around a loop stay two, on either side of
// it); on the host backend, a clock that does not go backwards and SM 0.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "codegen/generate.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "host_test_support.hpp"
#include "kernels/kernel_def.hpp"
#include "nvrtc_ptx.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

// Each thread reads the clock, runs a data-dependent loop (p.mode steps), reads it again, then
// writes the loop's sum, both readings (low and high words) and its SM.
const char* kClockKernel = R"(#pragma once
#include "common/clock.cuh"
#include "common/platform.cuh"
#include "hosttest/params.cuh"
namespace moejit::kernels {

template <class Spec>
MOEJIT_GLOBAL void clock_readings(hosttest::Params p) {
  using namespace moejit::prim;
  const u32 slot = block_x() * block_threads() + thread_x();
  const u64 before = sm_cycles();
  u32 sum = 0;
  for (u32 i = 0; i < p.mode; ++i) sum = sum * 31u + p.in[(slot + i) % p.n];
  const u64 after = sm_cycles();
  u32* out = p.out + slot * 6;
  out[0] = sum;
  out[1] = static_cast<u32>(before);
  out[2] = static_cast<u32>(before >> 32);
  out[3] = static_cast<u32>(after);
  out[4] = static_cast<u32>(after >> 32);
  out[5] = sm_id();
}

}  // namespace moejit::kernels
)";

constexpr const char* kEntry = "test/clock_readings.cuh";
constexpr std::uint32_t kThreads = 64;

const KernelDef kDef = test_kernel_def<kThreads>(kEntry, "moejit::kernels::clock_readings");

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("sm_cycles and sm_id read %clock64 and %smid where they are called, on every target") {
  auto nvrtc = NvrtcCompiler::create({});
  if (!nvrtc.ok()) {
    toolchain_missing("NVRTC is not available here: " + nvrtc.status().message());
    return;
  }
  const codegen::TemplateSet set = templates_with({{kEntry, kClockKernel}});
  for (Arch arch : default_target_archs()) {
    CAPTURE(to_string(arch));
    KernelSpec spec = align_spec(8, 8, 1, arch);
    spec.backend = Backend::device;
    auto g = codegen::generate_from_def(spec, kDef, set);
    REQUIRE_MESSAGE(g.ok(), g.status().message());
    auto c = (*nvrtc)->compile(*g, set, spec);
    REQUIRE_MESSAGE(c.ok(), c.status().message());
    const ArchInfo& info = arch_info(arch);
    auto ptx = ptx_for(*g, set, "compute_" + std::string(info.name.substr(3)));
    REQUIRE_MESSAGE(ptx.ok(), ptx.status().message());
    // Two clock readings, one before the loop's first load and one after its last.
    CHECK(count_of(*ptx, "%clock64;") == 2);
    CHECK(count_of(*ptx, "%smid;") == 1);
    const auto first_load = ptx->find("ld.global"), last_load = ptx->rfind("ld.global");
    REQUIRE(first_load != std::string::npos);
    CHECK(ptx->find("%clock64;") < first_load);
    CHECK(ptx->rfind("%clock64;") > last_load);
  }
}

TEST_CASE("sm_cycles does not go backwards and sm_id is 0 on the host backend") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  auto k = build_host_test_kernel(*compiler, {{kEntry, kClockKernel}}, kEntry, "clock_readings", kThreads, 0);
  REQUIRE_MESSAGE(k.ok(), k.status().message());
  constexpr std::uint32_t kBlocks = 3, kSlots = kBlocks * kThreads;
  std::vector<std::uint32_t> in(kSlots);
  for (std::uint32_t i = 0; i < kSlots; ++i) in[i] = 0x9e3779b9u * (i + 1) ^ (i << 7);
  std::vector<std::uint32_t> out(kSlots * 6, 0xdeadbeefu);
  HostTestParams p;
  p.out = out.data();
  p.in = in.data();
  p.mode = 1000;
  p.n = kSlots;
  const Status s = launch_test_kernel(*k, p, shape_of(kBlocks, kThreads, 0));
  REQUIRE_MESSAGE(s.ok(), s.message());
  for (std::uint32_t slot = 0; slot < kSlots; ++slot) {
    CAPTURE(slot);
    std::uint32_t sum = 0;
    for (std::uint32_t i = 0; i < p.mode; ++i) sum = sum * 31u + in[(slot + i) % kSlots];
    const std::uint32_t* o = &out[slot * 6];
    REQUIRE(o[0] == sum);
    const std::uint64_t before = o[1] | std::uint64_t{o[2]} << 32, after = o[3] | std::uint64_t{o[4]} << 32;
    CHECK(before > 0);
    CHECK(after >= before);
    CHECK(o[5] == 0);
  }
}
