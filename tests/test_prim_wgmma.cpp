// wgmma (templates/common/wgmma.cuh): the matrix descriptor's bits; the host twin run as a whole
// warpgroup MMA on the host backend against fp64 products of the inputs, with B written into
// shared memory by layouts written out here from the PTX ISA's shared-memory matrix layouts
// (independently of twin::wgmma_b_address); the twin's checks of the asynchrony; and the PTX
// NVRTC emits on sm_90a (a trap elsewhere).

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codegen/generate.hpp"
#include "common/wgmma.cuh"
#include "compile/nvrtc_compiler.hpp"
#include "host_test_support.hpp"
#include "kernels/kernel_def.hpp"
#include "nvrtc_ptx.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"
#include "wgmma_probe.hpp"

using namespace moejit;
using namespace moejit::test;

TEST_CASE("wgmma matrix descriptor: the PTX ISA's bit fields") {
  std::mt19937 rng(std::random_device{}());
  for (int rep = 0; rep < 200; ++rep) {
    const std::uint32_t start = (rng() % (1u << 18)) & ~15u, lbo = (rng() % (1u << 18)) & ~15u,
                        sbo = (rng() % (1u << 18)) & ~15u;
    const auto layout = rep % 3 == 2   ? prim::WgmmaLayout::swizzle_64b
                        : rep % 3 == 1 ? prim::WgmmaLayout::swizzle_128b
                                       : prim::WgmmaLayout::interleave;
    const std::uint64_t d = prim::make_wgmma_descriptor(start, lbo, sbo, layout);
    CAPTURE(d);
    // Matrix descriptor format: bits 13-0 start >> 4, 29-16 LBO >> 4, 45-32 SBO >> 4, 51-49
    // base offset, 63-62 swizzle mode (0 none, 1 128B, 2 64B); every other bit 0.
    CHECK((d & 0x3FFF) == start >> 4);
    CHECK(((d >> 16) & 0x3FFF) == lbo >> 4);
    CHECK(((d >> 32) & 0x3FFF) == sbo >> 4);
    CHECK(((d >> 49) & 7) == 0);
    CHECK((d >> 62) == (layout == prim::WgmmaLayout::swizzle_64b ? 2u : layout == prim::WgmmaLayout::swizzle_128b ? 1u : 0u));
    CHECK((d & 0x3FFFC000C000C000ull & ~(7ull << 49)) == 0);
    const prim::twin::WgmmaDescriptor back = prim::twin::decode_wgmma_descriptor(d);
    CHECK(back.start == start);
    CHECK(back.lbo == lbo);
    CHECK(back.sbo == sbo);
  }
}

namespace {

using namespace wgmma_probe;

struct Run {
  Status status;
  std::vector<std::uint32_t> out;
};

Run run_case(const ResolvedKernel& k, Type type, std::uint32_t layout, std::uint32_t misuse,
             std::uint32_t n, std::uint32_t threads, const Operands& o) {
  const std::uint32_t rows = threads / 2, n_index = n == 64 ? 1 : n == 256 ? 2 : 0;
  std::vector<std::uint32_t> in((o.a.size() + o.b.size()) / 4);
  std::memcpy(in.data(), o.a.data(), o.a.size());
  std::memcpy(reinterpret_cast<std::uint8_t*>(in.data()) + o.a.size(), o.b.data(), o.b.size());
  Run run;
  run.out.assign(std::size_t{3} * rows * n, 0xDEADBEEFu);
  HostTestParams p;
  p.out = run.out.data();
  p.in = in.data();
  p.mode = type | layout << 2 | misuse << 4 | n_index << 8;
  run.status = launch_test_kernel(k, p, shape_of(1, threads, kShared));
  return run;
}

}  // namespace


TEST_CASE("wgmma twin on the host backend: D = A * B for every type, N and layout, one and two warpgroups") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  auto probe = build_host_test_kernel(*compiler, {{kEntry, kWgmmaKernel}}, kEntry, "wgmma_probe", 256, kShared);
  REQUIRE_MESSAGE(probe.ok(), probe.status().message());
  auto pipeline = build_host_test_kernel(*compiler, {{kEntry, kWgmmaKernel}}, kEntry, "wgmma_pipeline", 128, kShared);
  REQUIRE_MESSAGE(pipeline.ok(), pipeline.status().message());
  std::mt19937 rng(std::random_device{}());
  auto check = [&](const ResolvedKernel& k, Type type, std::uint32_t n, std::uint32_t layout,
                   std::uint32_t threads) {
    const std::uint32_t rows = threads / 2;
    CAPTURE(type_name(type));
    CAPTURE(n);
    CAPTURE(layout);
    CAPTURE(threads);
    const Operands o = random_operands(type, rows, n, rng);
    const Run run = run_case(k, type, layout, 0, n, threads, o);
    REQUIRE_MESSAGE(run.status.ok(), run.status.message());
    const std::vector<float> want = reference(type, o, rows, n, type == type_e4m3 ? 128 : 64);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
      if (run.out[i] != std::bit_cast<std::uint32_t>(want[i])) ++wrong;
    CHECK(wrong == 0);
  };
  for (Type type : {type_bf16, type_f16, type_e4m3})
    for (std::uint32_t n : kNs)
      for (std::uint32_t layout = 0; layout < kLayouts; ++layout)
        check(*probe, type, n, layout, (n + layout) % 2 ? 256 : 128);
  check(*pipeline, type_bf16, 128, 2, 128);
}

TEST_CASE("wgmma twin: a second group waits for its own wait_group, and its accumulators read as poison until then") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  auto k = build_host_test_kernel(*compiler, {{kEntry, kWgmmaKernel}}, kEntry, "wgmma_probe", 128, kShared);
  REQUIRE_MESSAGE(k.ok(), k.status().message());
  std::mt19937 rng(std::random_device{}());
  const Operands o = random_operands(type_bf16, 64, 64, rng);
  const Run run = run_case(*k, type_bf16, 2, 4, 64, 128, o);
  REQUIRE_MESSAGE(run.status.ok(), run.status.message());
  const std::vector<float> full = reference(type_bf16, o, 64, 64, 64), first = reference(type_bf16, o, 64, 64, 16);
  for (std::size_t i = 0; i < full.size(); ++i) {
    CAPTURE(i);
    REQUIRE(run.out[i] == std::bit_cast<std::uint32_t>(full[i]));
    REQUIRE(run.out[full.size() + i] == prim::twin::kWgmmaPoison);
    REQUIRE(run.out[2 * full.size() + i] == std::bit_cast<std::uint32_t>(first[i]));
  }
}

TEST_CASE("wgmma twin: a group chained on accumulators with a group in flight keeps them poisoned until its own wait") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  auto k = build_host_test_kernel(*compiler, {{kEntry, kWgmmaKernel}}, kEntry, "wgmma_probe", 128, kShared);
  REQUIRE_MESSAGE(k.ok(), k.status().message());
  std::mt19937 rng(std::random_device{}());
  const Operands o = random_operands(type_f16, 64, 64, rng);
  const Run run = run_case(*k, type_f16, 0, 8, 64, 128, o);
  REQUIRE_MESSAGE(run.status.ok(), run.status.message());
  const std::vector<float> full = reference(type_f16, o, 64, 64, 64), first = reference(type_f16, o, 64, 64, 16);
  for (std::size_t i = 0; i < full.size(); ++i) {
    CAPTURE(i);
    REQUIRE(run.out[i] == std::bit_cast<std::uint32_t>(full[i] + first[i]));  // exact: small multiples of 1/16
    REQUIRE(run.out[full.size() + i] == prim::twin::kWgmmaPoison);
  }
}

TEST_CASE("wgmma twin: what the device leaves undefined fails the launch or reads as poison") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  auto k = build_host_test_kernel(*compiler, {{kEntry, kWgmmaKernel}}, kEntry, "wgmma_probe", 128, kShared);
  REQUIRE_MESSAGE(k.ok(), k.status().message());
  std::mt19937 rng(std::random_device{}());
  const Operands o = random_operands(type_f16, 64, 8, rng);

  SUBCASE("accumulators read before the wait") {
    const Run run = run_case(*k, type_f16, 0, 1, 8, 128, o);
    REQUIRE_MESSAGE(run.status.ok(), run.status.message());
    for (std::size_t i = 0; i < 64 * 8; ++i) REQUIRE(run.out[i] == prim::twin::kWgmmaPoison);
  }
  SUBCASE("B overwritten while in flight") {
    const Run run = run_case(*k, type_f16, 1, 2, 8, 128, o);
    CHECK(contains(run.status.message(), "shared memory B changed between wgmma.mma_async and the wait"));
  }
  SUBCASE("a thread exits without waiting") {
    const Run run = run_case(*k, type_f16, 2, 3, 8, 128, o);
    CHECK(contains(run.status.message(), "wgmma.mma_async operation(s) not waited for"));
  }
  SUBCASE("lanes disagree on b-desc") {
    const Run run = run_case(*k, type_f16, 0, 5, 8, 128, o);
    CHECK(contains(run.status.message(), "b-desc or the accumulate flag differs between lanes"));
  }
  SUBCASE("an accumulator written while in flight, before the wait or between chained wgmmas") {
    for (std::uint32_t misuse : {6u, 7u}) {
      CAPTURE(misuse);
      const Run run = run_case(*k, type_f16, 0, misuse, 8, 128, o);
      CHECK(contains(run.status.message(), "an accumulator was written while a wgmma.mma_async on it was in flight"));
    }
  }
}

TEST_CASE("wgmma lowers to wgmma.mma_async on sm_90a and to a trap on other targets") {
  auto nvrtc = NvrtcCompiler::create({});
  if (!nvrtc.ok()) {
    toolchain_missing("NVRTC is not available here: " + nvrtc.status().message());
    return;
  }
  const codegen::TemplateSet set = templates_with({{kEntry, kWgmmaKernel}});
  const KernelDef def = test_kernel_def<256, kShared>(kEntry, "moejit::kernels::wgmma_probe");
  const KernelDef plain = test_kernel_def<128, kShared>(kEntry, "moejit::kernels::wgmma_pipeline");
  for (const Arch arch : {Arch::sm_90a, Arch::sm_90, Arch::sm_80, Arch::sm_100a, Arch::sm_120a}) {
    CAPTURE(to_string(arch));
    KernelSpec spec = align_spec(8, 8, 1, arch);
    spec.backend = Backend::device;
    auto g = codegen::generate_from_def(spec, def, set);
    REQUIRE_MESSAGE(g.ok(), g.status().message());
    auto compiled = (*nvrtc)->compile(*g, set, spec);
    REQUIRE_MESSAGE(compiled.ok(), compiled.status().message());
    const ArchInfo& info = arch_info(arch);
    auto ptx = ptx_for(*g, set, "compute_" + std::string(info.name.substr(3)));
    REQUIRE_MESSAGE(ptx.ok(), ptx.status().message());
    const bool native = arch == Arch::sm_90a;
    for (const char* shape : {"m64n8k16.f32.bf16.bf16", "m64n64k16.f32.f16.f16", "m64n256k16.f32.bf16.bf16",
                              "m64n8k32.f32.e4m3.e4m3", "m64n256k32.f32.e4m3.e4m3"}) {
      CAPTURE(shape);
      CHECK(contains(*ptx, std::string("wgmma.mma_async.sync.aligned.") + shape) == native);
    }
    CHECK(contains(*ptx, "wgmma.fence.sync.aligned;") == native);
    CHECK(contains(*ptx, "wgmma.commit_group.sync.aligned;") == native);
    CHECK(contains(*ptx, "wgmma.wait_group.sync.aligned 1;") == native);
    CHECK(contains(*ptx, "fence.proxy.async.shared::cta;") == native);
    CHECK(contains(*ptx, "trap;") == !native);
    if (!native) continue;
    // The plain use: chained wgmmas, one commit, one wait. ptxas keeps the accumulators in
    // registers and does not serialize the wgmmas (it says so in its log when it has to, or
    // when it must wait on a wgmma before a register it writes is used).
    auto pg = codegen::generate_from_def(spec, plain, set);
    REQUIRE_MESSAGE(pg.ok(), pg.status().message());
    auto pc = (*nvrtc)->compile(*pg, set, spec);
    REQUIRE_MESSAGE(pc.ok(), pc.status().message());
    CHECK(pc->report.spill_store_bytes == 0);
    CHECK_MESSAGE(!contains(pc->log, "serialized"), pc->log);
    CHECK_MESSAGE(!contains(pc->log, "is injected"), pc->log);  // neither a wait nor a fence
  }
}
