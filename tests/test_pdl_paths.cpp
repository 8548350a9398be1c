// Programmatic dependent launch chains the fused layer's kernels: each may start before the one
// ahead has finished, and a grid that completes (or lets the next one start) without having
// waited breaks the chain for every kernel after it (templates/common/grid_dependency.cuh). The
// host backend runs launches one after another and cannot see that, so these tests read it off
// the PTX: on every path of every kernel the layer launches, griddepcontrol.wait comes before
// each exit and before griddepcontrol.launch_dependents.

#include <doctest/doctest.h>

#include "codegen/generate.hpp"
#include "codegen/template_set.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "dispatch/fused_moe_op.hpp"
#include "host_test_support.hpp"
#include "nvrtc_ptx.hpp"
#include "ptx_paths.hpp"
#include "quant/pack.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

constexpr std::string_view kWait = "griddepcontrol.wait";
const std::vector<std::string_view> kExits = {"ret", "exit"};
const std::vector<std::string_view> kTrigger = {"griddepcontrol.launch_dependents"};

std::string entry(std::string_view body) { return ".visible .entry k(\n.param .u64 p\n)\n{\n" + std::string(body) + "}\n"; }

}  // namespace

TEST_CASE("ptx paths: a path to an exit that skips the wait is found, through branches, labels and loops") {
  // Waits first: every path waits.
  CHECK_FALSE(ptx_path_avoiding(entry("griddepcontrol.wait;\nld.global.u32 %r1, [%rd1];\nret;\n"), kWait, kExits));
  // An early exit branched around the wait.
  const std::string early = entry(
      "setp.eq.s32 %p1, %r1, 0;\n@%p1 bra $L__BB0_2;\ngriddepcontrol.wait;\nst.global.u32 [%rd1], %r1;\n"
      "$L__BB0_2:\nret;\n");
  const auto path = ptx_path_avoiding(early, kWait, kExits);
  REQUIRE(path.has_value());
  CHECK(contains(*path, "@p bra $L__BB0_2;\n$L__BB0_2:\nret;\n"));
  // A wait on both arms of a branch, a wait under a predicate (not every path), a return under a
  // predicate, and an unconditional branch past the wait.
  CHECK_FALSE(ptx_path_avoiding(entry("@%p1 bra $L__BB0_1;\ngriddepcontrol.wait;\nbra.uni $L__BB0_2;\n"
                                      "$L__BB0_1:\ngriddepcontrol.wait;\n$L__BB0_2:\nret;\n"),
                                kWait, kExits));
  CHECK(ptx_path_avoiding(entry("@%p1 griddepcontrol.wait;\nret;\n"), kWait, kExits));
  CHECK(ptx_path_avoiding(entry("@%p1 ret;\ngriddepcontrol.wait;\nret;\n"), kWait, kExits));
  CHECK(ptx_path_avoiding(entry("bra.uni $L__BB0_9;\ngriddepcontrol.wait;\n$L__BB0_9:\nexit;\n"), kWait, kExits));
  // A loop that waits inside: its first trip waits; leaving before the loop does not.
  const std::string loop = "$L__BB0_3:\ngriddepcontrol.wait;\nadd.s32 %r1, %r1, 1;\n@%p2 bra $L__BB0_3;\n";
  CHECK_FALSE(ptx_path_avoiding(entry(loop + "ret;\n"), kWait, kExits));
  CHECK(ptx_path_avoiding(entry("@%p1 bra $L__BB0_4;\n" + loop + "$L__BB0_4:\nret;\n"), kWait, kExits));
  // Inline-assembly scopes and directives are not statements; a trigger is found like an exit.
  CHECK(ptx_path_avoiding(entry(".reg .pred %p<3>;\n{\n.reg .b32 t;\ngriddepcontrol.launch_dependents;\n}\n"
                                "griddepcontrol.wait;\nret;\n"),
                          kWait, kTrigger));
}

TEST_CASE("every kernel of the fused layer waits for the kernel ahead on every path, before it exits or triggers") {
  auto nvrtc = NvrtcCompiler::create({});
  if (!nvrtc.ok()) {
    toolchain_missing("NVRTC is not available here: " + nvrtc.status().message());
    return;
  }
  static const unsigned char dummy[256] = {};
  struct Layer {
    const char* what;
    Arch arch;
    DType act;  // the activations the weights are packed for
    ActScale act_scale;
    std::int32_t tokens;
  };
  // Decode (split-K, the down projection's early weights), prefill, W4A8 (the quantization
  // kernels) on sm_90a; W4A4 (block-scaled mma, e2m1 quantization) on sm_120a.
  const Layer layers[] = {
      {"bf16 decode", Arch::sm_90a, DType::bf16, ActScale::none, 1},
      {"bf16 prefill", Arch::sm_90a, DType::bf16, ActScale::none, 4096},
      {"W4A8 per token", Arch::sm_90a, DType::e4m3, ActScale::token, 4},
      {"W4A4", Arch::sm_120a, DType::e2m1, ActScale::block32, 4},
  };
  const codegen::TemplateSet& set = *codegen::TemplateSet::embedded();
  int kernels = 0;
  for (const Layer& l : layers) {
    const std::string what = l.what;
    CAPTURE(what);
    const PackedOrder order = quant::packed_order_for(l.act, WeightFormat::mxfp4);
    dispatch::FusedMoeRequest r;
    r.w13 = {WeightFormat::mxfp4, 32, DType::e8m0, 32, 2 * 256, 512, true, dummy, dummy, nullptr, nullptr, order};
    r.w2 = {WeightFormat::mxfp4, 32, DType::e8m0, 32, 512, 256, false, dummy, dummy, nullptr, nullptr, order};
    r.act = DType::bf16;
    r.act_scale = l.act_scale;
    r.tokens = l.tokens;
    r.topk = 4;
    r.global_experts = 64;
    auto specs = dispatch::fused_moe_specs(r, l.arch, Backend::device, arch_info(l.arch).sm == 120 ? 48 : 132);
    REQUIRE_MESSAGE(specs.ok(), specs.status().message());
    std::vector<KernelSpec> launched = {specs->align, specs->up, specs->down, specs->reduce};
    for (const KernelSpec* q : {&specs->quantize_hidden, &specs->quantize_intermediate})
      if (q->op != Op::none) launched.push_back(*q);
    // The grouped GEMM's other layouts, launched the same way by moejit_grouped_gemm.
    if (l.tokens == 1)
      for (Layout layout : {Layout::contiguous, Layout::masked}) {
        KernelSpec g = specs->down;
        g.layout = layout;
        g.epilogue = Epilogue::none;  // the routing weights are the indexed layout's
        launched.push_back(g);
      }
    for (const KernelSpec& spec : launched) {
      CAPTURE(codegen::spec_slug(spec));
      auto g = codegen::generate_kernel(spec, set);
      REQUIRE_MESSAGE(g.ok(), g.status().message());
      auto ptx = ptx_for(*g, set, "compute_" + std::string(arch_info(l.arch).name.substr(3)));
      REQUIRE_MESSAGE(ptx.ok(), ptx.status().message());
      REQUIRE(contains(*ptx, "griddepcontrol.wait;"));
      const auto exit = ptx_path_avoiding(*ptx, kWait, kExits);
      CHECK_MESSAGE(!exit, "a path leaves without griddepcontrol.wait:\n" << exit.value_or(""));
      const auto trigger = ptx_path_avoiding(*ptx, kWait, kTrigger);
      CHECK_MESSAGE(!trigger, "a path triggers the next kernel before griddepcontrol.wait:\n" << trigger.value_or(""));
      ++kernels;
    }
  }
  CHECK(kernels >= 18);
}
