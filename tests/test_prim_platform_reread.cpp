// thread_x_reread() and block_x_reread() (templates/common/platform.cuh): on the device each is a
// read of %tid.x / %ctaid.x of its own, made where it is called, which the compiler keeps apart
// from the builtin's read at the kernel's top; on the host backend each is the thread's and the
// block's index, as thread_x() and block_x() give them.

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

// Each thread runs a data-dependent loop (p.mode steps over the input) between the indices read
// at the top and the ones read again, then writes four words: the loop's sum (so that the loop
// stays), the index pairs packed as (top, again).
const char* kRereadKernel = R"(#pragma once
#include "common/memory.cuh"
#include "common/platform.cuh"
#include "hosttest/params.cuh"
namespace moejit::kernels {

template <class Spec>
MOEJIT_GLOBAL void reread_indices(hosttest::Params p) {
  using namespace moejit::prim;
  const u32 tid = thread_x(), block = block_x(), threads = block_threads();
  const u32 slot = block * threads + tid;
  u32 sum = 0;
  for (u32 i = 0; i < p.mode; ++i) sum = sum * 31u + p.in[(slot + i) % p.n];
  const u32 tid_again = thread_x_reread(), block_again = block_x_reread();
  u32* out = p.out + slot * 4;
  out[0] = sum;
  out[1] = tid;
  out[2] = tid_again;
  out[3] = block * 65536u + block_again;
}

}  // namespace moejit::kernels
)";

constexpr const char* kEntry = "test/reread_indices.cuh";
constexpr std::uint32_t kThreads = 96;

const KernelDef kDef = test_kernel_def<kThreads>(kEntry, "moejit::kernels::reread_indices");

codegen::TemplateSet test_templates() { return templates_with({{kEntry, kRereadKernel}}); }

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("thread_x_reread and block_x_reread read %tid.x and %ctaid.x again where they are called, on every target") {
  auto nvrtc = NvrtcCompiler::create({});
  if (!nvrtc.ok()) {
    toolchain_missing("NVRTC is not available here: " + nvrtc.status().message());
    return;
  }
  const codegen::TemplateSet set = test_templates();
  for (Arch arch : default_target_archs()) {
    CAPTURE(to_string(arch));
    KernelSpec spec = align_spec(8, 8, 1, arch);
    spec.backend = Backend::device;
    auto g = codegen::generate_from_def(spec, kDef, set);
    REQUIRE_MESSAGE(g.ok(), g.status().message());
    auto c = (*nvrtc)->compile(*g, set, spec);
    REQUIRE_MESSAGE(c.ok(), c.status().message());
    CHECK(c->binary.substr(0, 4) == "\x7f" "ELF");

    const ArchInfo& info = arch_info(arch);
    auto ptx = ptx_for(*g, set, "compute_" + std::string(info.name.substr(3)));
    REQUIRE_MESSAGE(ptx.ok(), ptx.status().message());
    // The builtin's read at the top and the primitive's after the loop: two of each, the second
    // past the loop's load.
    CHECK(count_of(*ptx, "%ctaid.x;") == 2);
    CHECK(count_of(*ptx, "%tid.x;") == 2);
    const auto last_load = ptx->rfind("ld.global");
    REQUIRE(last_load != std::string::npos);
    CHECK(ptx->rfind("%ctaid.x;") > last_load);
    CHECK(ptx->rfind("%tid.x;") > last_load);
  }
}

TEST_CASE("thread_x_reread and block_x_reread give the thread's and block's index on the host backend") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  auto k = build_host_test_kernel(*compiler, {{kEntry, kRereadKernel}}, kEntry, "reread_indices", kThreads, 0);
  REQUIRE_MESSAGE(k.ok(), k.status().message());
  constexpr std::uint32_t kBlocks = 5, kSlots = kBlocks * kThreads;
  std::vector<std::uint32_t> in(kSlots);
  for (std::uint32_t i = 0; i < kSlots; ++i) in[i] = 0x9e3779b9u * (i + 1) ^ (i << 5);
  std::vector<std::uint32_t> out(kSlots * 4, 0xdeadbeefu);
  HostTestParams p;
  p.out = out.data();
  p.in = in.data();
  p.mode = 7;
  p.n = kSlots;
  const Status s = launch_test_kernel(*k, p, shape_of(kBlocks, kThreads, 0));
  REQUIRE_MESSAGE(s.ok(), s.message());
  for (std::uint32_t b = 0; b < kBlocks; ++b)
    for (std::uint32_t t = 0; t < kThreads; ++t) {
      CAPTURE(b);
      CAPTURE(t);
      const std::uint32_t slot = b * kThreads + t;
      std::uint32_t sum = 0;
      for (std::uint32_t i = 0; i < p.mode; ++i) sum = sum * 31u + in[(slot + i) % kSlots];
      REQUIRE(out[slot * 4] == sum);
      REQUIRE(out[slot * 4 + 1] == t);
      REQUIRE(out[slot * 4 + 2] == t);
      REQUIRE(out[slot * 4 + 3] == b * 65536u + b);
    }
}
