// Programmatic dependent launch (templates/common/grid_dependency.cuh) and the L2 evict-first
// cache hint on cp.async (templates/common/cp_async.cuh): a kernel using them compiles with NVRTC
// for every default target, its PTX carries the instructions where the target has them
// (griddepcontrol vanishes below sm_90), and on the host backend it copies exactly what the
// unhinted copy does. The same kernel checks the 4-byte cp.async (cp_async_ca_4, one f32 per
// row) against its input, with and without zero fill.

#include <doctest/doctest.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "codegen/generate.hpp"
#include "kernels/kernel_def.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "compile/nvrtc_library.hpp"
#include "host_test_support.hpp"
#include "nvrtc_ptx.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

// Each block copies its 16 bytes per thread global -> shared with cp.async (mode 0: hinted,
// evict-first; 1: unhinted; 2 and 3: the same with src_size 8, so the upper 8 bytes are zero; 4:
// four 4-byte copies; 5: the same with src_size 0 for the upper two, which are then zero),
// waits, and writes the block's shared memory back out reversed by thread, so every output word
// went through another thread's copy. Everything an earlier kernel wrote (the input) is read after
// grid_dependency_wait(); the next kernel may be scheduled once the block's loads are done.
const char* kPdlCopyKernel = R"(#pragma once
#include "common/cp_async.cuh"
#include "common/grid_dependency.cuh"
#include "common/memory.cuh"
#include "common/platform.cuh"
#include "common/sync.cuh"
#include "hosttest/params.cuh"
namespace moejit::kernels {

template <class Spec>
MOEJIT_GLOBAL void pdl_hint_copy(hosttest::Params p) {
  using namespace moejit::prim;
  const L2Policy policy = l2_evict_first_policy();  // no memory access: may precede the wait
  const u32 t = thread_x(), threads = block_threads();
  const u32 first = block_x() * threads;
  unsigned char* sh = dynamic_shared();
  grid_dependency_wait();
  const u32* src = p.in + (first + t) * 4;
  if (p.mode >= 4) {
    for (u32 w = 0; w < 4; ++w) cp_async_ca_4(sh + t * 16 + 4 * w, src + w, p.mode == 5 && w >= 2 ? 0u : 4u);
  } else {
    const u32 src_bytes = p.mode >= 2 ? 8 : 16;
    if (p.mode % 2 == 0) cp_async_cg_16_hint(sh + t * 16, src, policy, src_bytes);
    else cp_async_cg_16(sh + t * 16, src, src_bytes);
  }
  cp_async_commit();
  cp_async_wait<0>();
  block_sync();
  launch_dependent_grids();
  const u32 r = threads - 1 - t;
  st_global_v4(p.out + (first + r) * 4, ld_shared_v4(sh + r * 16));
}

}  // namespace moejit::kernels
)";

constexpr const char* kEntry = "test/pdl_hint_copy.cuh";
constexpr std::uint32_t kThreads = 64;
constexpr std::uint32_t kShared = kThreads * 16;

const KernelDef kDef = test_kernel_def<kThreads, kShared>(kEntry, "moejit::kernels::pdl_hint_copy");

codegen::TemplateSet test_templates() { return templates_with({{kEntry, kPdlCopyKernel}}); }

KernelSpec device_spec(Arch arch) {
  KernelSpec s = align_spec(8, 8, 1, arch);
  s.backend = Backend::device;
  return s;
}

}  // namespace

TEST_CASE("griddepcontrol and the evict-first cp.async compile for every target arch") {
  auto nvrtc = NvrtcCompiler::create({});
  if (!nvrtc.ok()) {
    toolchain_missing("NVRTC is not available here: " + nvrtc.status().message());
    return;
  }
  const codegen::TemplateSet set = test_templates();
  for (Arch arch : default_target_archs()) {
    CAPTURE(to_string(arch));
    const KernelSpec spec = device_spec(arch);
    auto g = codegen::generate_from_def(spec, kDef, set);
    REQUIRE_MESSAGE(g.ok(), g.status().message());
    auto c = (*nvrtc)->compile(*g, set, spec);
    REQUIRE_MESSAGE(c.ok(), c.status().message());
    CHECK(c->binary.substr(0, 4) == "\x7f" "ELF");
    CHECK(c->lowered_name.find("pdl_hint_copy") != std::string::npos);
    CHECK(c->report.spill_store_bytes == 0);

    // The PTX of the same source for the target's virtual architecture.
    const ArchInfo& info = arch_info(arch);
    const std::string compute = "compute_" + std::string(info.name.substr(3));
    auto ptx = ptx_for(*g, set, compute);
    REQUIRE_MESSAGE(ptx.ok(), ptx.status().message());
    CHECK(contains(*ptx, "createpolicy.fractional.L2::evict_first.b64"));
    CHECK(contains(*ptx, "cp.async.cg.shared.global.L2::cache_hint"));
    CHECK(contains(*ptx, "cp.async.cg.shared.global ["));  // the unhinted copy stays unhinted
    const auto four = ptx->find("cp.async.ca.shared.global [");
    REQUIRE(four != std::string::npos);
    CHECK(contains(ptx->substr(four, ptx->find(';', four) - four), "], 4,"));
    const bool pdl = info.sm >= 90;
    CHECK(contains(*ptx, "griddepcontrol.wait;") == pdl);
    CHECK(contains(*ptx, "griddepcontrol.launch_dependents;") == pdl);
    if (pdl) {
      // The wait stays ahead of the first global read, launch_dependents after the copies.
      const auto wait = ptx->find("griddepcontrol.wait;");
      const auto first_copy = ptx->find("cp.async.cg.shared.global");
      CHECK(wait < first_copy);
      CHECK(ptx->find("griddepcontrol.launch_dependents;") > ptx->rfind("cp.async.wait_group"));
    }
  }
}

TEST_CASE("the evict-first cp.async copies what cp.async.cg does on the host backend and so do 4-byte copies") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  auto k = build_host_test_kernel(*compiler, {{kEntry, kPdlCopyKernel}}, kEntry, "pdl_hint_copy", kThreads, kShared);
  REQUIRE_MESSAGE(k.ok(), k.status().message());
  constexpr std::uint32_t kBlocks = 3, kWords = kBlocks * kThreads * 4;
  alignas(16) std::array<std::uint32_t, kWords> in;  // cp.async sources are 16-byte aligned
  for (std::uint32_t i = 0; i < kWords; ++i) in[i] = 0x9e3779b9u * (i + 1) ^ (i << 7);
  std::vector<std::array<std::uint32_t, kWords>> outs;
  for (std::uint32_t mode = 0; mode < 6; ++mode) {
    CAPTURE(mode);
    alignas(16) std::array<std::uint32_t, kWords> out;
    out.fill(0xdeadbeefu);
    HostTestParams p;
    p.out = out.data();
    p.in = in.data();
    p.mode = mode;
    const Status s = launch_test_kernel(*k, p, shape_of(kBlocks, kThreads, kShared));
    REQUIRE_MESSAGE(s.ok(), s.message());
    for (std::uint32_t i = 0; i < kWords; ++i) {
      CAPTURE(i);
      // src_size 8 (modes 2, 3) or the upper two 4-byte copies with src_size 0 (mode 5): the
      // first two words of each 16 bytes copied, the rest zero.
      const bool upper_zero = mode == 2 || mode == 3 || mode == 5;
      const std::uint32_t expected = !upper_zero || i % 4 < 2 ? in[i] : 0u;
      REQUIRE(out[i] == expected);
    }
    outs.push_back(out);
  }
  CHECK(outs[0] == outs[1]);  // hinted and unhinted: the same bytes
  CHECK(outs[2] == outs[3]);
  CHECK(outs[4] == outs[0]);  // four 4-byte copies: the same bytes as one of 16
  CHECK(outs[5] == outs[2]);
}
