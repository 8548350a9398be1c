// The compile matrix: every tile configuration the heuristics can pick, on every target
// architecture, compiles with NVRTC with zero spill bytes (DESIGN §5, §9).

#include <doctest/doctest.h>

#include <future>
#include <optional>

#include "codegen/generate.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "compile/nvrtc_library.hpp"
#include "dispatch/tile_configs.hpp"
#include "kernels/grouped_gemm.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"
#include "spec/spec_json.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

// The two corners of the format space: MXFP4 with bf16 activations and a plain store, and
// asymmetric INT4 (g128, f16 scales) with f16 activations and the act-and-mul epilogue,
// which holds the most registers.
std::vector<KernelSpec> format_corners(Arch arch) {
  KernelSpec a{};
  a.op = Op::grouped_gemm;
  a.arch = arch;
  a.backend = Backend::device;
  a.weight = WeightFormat::mxfp4;
  a.scale = DType::e8m0;
  a.act = DType::bf16;
  a.out = DType::bf16;
  a.layout = Layout::indexed;
  a.epilogue = Epilogue::none;
  a.group_size = 32;
  a.n = 4096;
  a.k = 7168;
  a.experts = 256;
  KernelSpec b = a;
  b.weight = WeightFormat::int4_asym;
  b.scale = DType::f16;
  b.act = DType::f16;
  b.group_size = 128;
  b.epilogue = Epilogue::silu_and_mul;
  return {a, b};
}

// A layer that uses the grouped GEMM: its epilogue and shapes.
struct LayerUse {
  Epilogue epilogue;
  std::uint32_t n, k, experts;
  bool mxfp4_only;  // K no multiple of INT4's 128-groups; the checkpoint is MXFP4 anyway
};
constexpr LayerUse kDeepSeekUp{Epilogue::silu_and_mul, 4096, 7168, 256, false};
constexpr LayerUse kDeepSeekDown{Epilogue::topk_weight, 7168, 2048, 256, false};
constexpr LayerUse kQwen3Up{Epilogue::silu_and_mul, 1536, 2048, 128, false};
constexpr LayerUse kQwen3Down{Epilogue::topk_weight, 2048, 768, 128, false};
constexpr LayerUse kGptOssUp{Epilogue::swiglu_oai, 5760, 2880, 128, true};
constexpr LayerUse kGptOssDown{Epilogue::topk_weight, 2880, 2880, 128, true};

// `corner` at the layer's shapes and epilogue; nullopt where its format does not fit them.
std::optional<KernelSpec> at_layer(const KernelSpec& corner, const LayerUse& use) {
  if (use.mxfp4_only && corner.weight != WeightFormat::mxfp4) return std::nullopt;
  KernelSpec spec = corner;
  spec.epilogue = use.epilogue;
  spec.n = use.n;
  spec.k = use.k;
  spec.experts = use.experts;
  return spec;
}

using CompileJobs = std::vector<std::pair<KernelSpec, std::future<Result<Resolution>>>>;

// Every tile the planner has for `corner` on its target, compiled in the background.
void add_every_tile(KernelResolver& r, const KernelSpec& corner, CompileJobs& jobs) {
  for (const auto& tile : dispatch::gemm_tile_configs(corner.arch, corner.k, corner.weight, corner.scale, corner.group_size,
                                                          corner.act, corner.act_scale)) {
    KernelSpec spec = dispatch::with_tile(corner, tile);
    jobs.emplace_back(spec, r.resolve_async(spec));
  }
}

// Each compiled: no spill bytes, no stack frame (a stack frame is a local array: the
// accumulators once sat in one on sm_100a/sm_120a, read and written in local memory every
// main-loop stage, with no spill reported), registers and shared memory within the target's.
void check_compiled(CompileJobs& jobs) {
  REQUIRE(!jobs.empty());
  for (auto& [spec, future] : jobs) {
    auto res = future.get();
    CAPTURE(spec_to_json(spec));
    REQUIRE_MESSAGE(res.ok(), res.status().message());
    const auto& m = res->kernel->meta;
    CHECK(m.spill_store_bytes == 0);
    CHECK(m.spill_load_bytes == 0);
    CHECK(m.stack_bytes == 0);
    CHECK(m.registers <= 255);
    CHECK(m.dynamic_shared_bytes <= arch_info(spec.arch).max_shared_per_block);
  }
}

// Whether `spec`'s target builds the same kernels as another one that the test compiles instead:
// sm_121a as sm_120a, and (`with_sm86`, for bf16/f16 activations, which take none of sm_89's e4m3
// instructions) sm_86 as sm_89, whose shared memory is the same. Their columns of the compile
// matrix agree everywhere (README), and the first test here compiles every tile on all seven
// targets; the longer ones compile each pair once. The premise is checked: both of a pair plan
// the same tiles.
bool compiled_by_twin(const KernelSpec& spec, bool with_sm86) {
  const Arch twin = spec.arch == Arch::sm_121a              ? Arch::sm_120a
                    : with_sm86 && spec.arch == Arch::sm_86 ? Arch::sm_89
                                                            : spec.arch;
  if (twin == spec.arch) return false;
  CAPTURE(to_string(spec.arch));
  CHECK(dispatch::gemm_tile_configs(spec.arch, spec.k, spec.weight, spec.scale, spec.group_size, spec.act,
                                    spec.act_scale) ==
        dispatch::gemm_tile_configs(twin, spec.k, spec.weight, spec.scale, spec.group_size, spec.act, spec.act_scale));
  return true;
}

}  // namespace

TEST_CASE("every grouped GEMM tile configuration compiles on every target with no spills and no stack frame") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  auto r = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(r.ok());
  CompileJobs jobs;
  for (Arch arch : default_target_archs())
    for (const KernelSpec& corner : format_corners(arch)) add_every_tile(**r, corner, jobs);
  check_compiled(jobs);
}

TEST_CASE("every grouped GEMM tile configuration compiles with every fused epilogue on every target with no spills") {
  // The epilogues the fused layer uses (act-and-mul for gate/up, the top-k weight for down) hold
  // registers past the main loop, and how many depends on the shape: MXFP4's 64x128x64 tile on
  // sm_120a spilled the block's first column with both at Qwen3-30B-A3B's and gpt-oss-120b's
  // shapes, not at the corners' 4096 x 7168. Each format with each epilogue, at the shapes
  // of the layer that uses it.
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  auto r = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(r.ok());
  CompileJobs jobs;
  for (Arch arch : default_target_archs())
    for (const KernelSpec& corner : format_corners(arch))
      for (const LayerUse& use : {kQwen3Up, kQwen3Down, kGptOssUp, kGptOssDown}) {
        const std::optional<KernelSpec> spec = at_layer(corner, use);
        if (!spec || compiled_by_twin(*spec, /*with_sm86=*/true)) continue;
        add_every_tile(**r, *spec, jobs);
      }
  check_compiled(jobs);
}

TEST_CASE("every grouped GEMM tile configuration with e4m3 activations compiles on every sm_89+ target with no spills") {
  // The W4A8 corners: MXFP4 with per-token scales and a plain store; asymmetric INT4 (g128,
  // bf16 scales) with per-128-k scales (a scale load per row and run) and the act-and-mul
  // epilogue; on sm_90a also with per-token scales, which its wgmma tiles take.
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  auto r = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(r.ok());
  CompileJobs jobs;
  for (Arch arch : default_target_archs()) {
    if (arch_info(arch).sm < 89) continue;
    std::vector<KernelSpec> corners = format_corners(arch);
    corners[0].act = DType::e4m3;
    corners[0].act_scale = ActScale::token;
    corners[1].act = DType::e4m3;
    corners[1].act_scale = ActScale::block128;
    corners[1].scale = DType::bf16;
    if (arch == Arch::sm_90a) {
      KernelSpec token = corners[1];
      token.act_scale = ActScale::token;
      corners.push_back(token);
    }
    for (const KernelSpec& corner : corners)
      if (!compiled_by_twin(corner, /*with_sm86=*/false)) add_every_tile(**r, corner, jobs);
  }
  check_compiled(jobs);
}

TEST_CASE("every grouped GEMM tile configuration with e2m1 activations compiles on sm_120a and sm_121a with no spills") {
  // W4A4: MXFP4 x MXFP4 through kind::mxf4 block-scaled mma's, the plain store and the
  // act-and-mul epilogue, on the two targets that have the instruction.
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  auto r = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(r.ok());
  CompileJobs jobs;
  for (Arch arch : default_target_archs()) {
    if (!has_block_scale_mma(arch)) continue;
    KernelSpec corner = format_corners(arch)[0];
    corner.act = DType::e2m1;
    corner.act_scale = ActScale::block32;
    for (Epilogue epilogue : {Epilogue::none, Epilogue::silu_and_mul}) {
      corner.epilogue = epilogue;
      add_every_tile(**r, corner, jobs);
    }
  }
  CHECK(jobs.size() >= 8);  // both targets
  check_compiled(jobs);
}

TEST_CASE("sm_90a's wgmma tiles keep their wgmma pipeline: ptxas serializes none") {
  // ptxas serializes a kernel's wgmma.mma_async's where it finds too few registers for their
  // pipeline (its C7511 "Potential Performance Loss") or other instructions writing their
  // accumulators while they run (C7515): each then waits for the last, the dequantization stops
  // overlapping the tensor cores, and nothing else shows it (no spill, the same results). A main
  // loop per wgmma N in the INT4 tiles that keep a second set of sums did the first to 8 of 86
  // kernels of the static model's prefill set; the second was the INT4 W4A8 tiles with zero
  // points and per-128-k scales. Each wgmma tile of each format corner (16-bit and e4m3
  // activations) at the shapes of the layers that use its epilogues.
  if (!nvrtc_or_skip()) return;
  auto compiler = NvrtcCompiler::create({});
  REQUIRE(compiler.ok());
  const auto templates = codegen::TemplateSet::embedded();
  std::vector<KernelSpec> corners = format_corners(Arch::sm_90a);
  for (const auto& [act_scale, weight] : {std::pair{ActScale::token, 0}, std::pair{ActScale::token, 1},
                                          std::pair{ActScale::block128, 1}}) {
    KernelSpec c = format_corners(Arch::sm_90a)[weight];
    c.act = DType::e4m3;
    c.act_scale = act_scale;
    if (c.weight != WeightFormat::mxfp4) c.scale = DType::bf16;
    corners.push_back(c);
  }
  std::vector<std::pair<KernelSpec, std::future<Result<CompiledKernel>>>> jobs;
  for (const KernelSpec& corner : corners)
    for (const LayerUse& use : {kDeepSeekUp, kDeepSeekDown, kQwen3Up, kQwen3Down, kGptOssUp, kGptOssDown}) {
      const std::optional<KernelSpec> spec = at_layer(corner, use);
      if (!spec) continue;
      for (const auto& tile : dispatch::gemm_tile_configs(spec->arch, spec->k, spec->weight, spec->scale,
                                                          spec->group_size, spec->act, spec->act_scale)) {
        const KernelSpec tiled = dispatch::with_tile(*spec, tile);
        if (!gemm_uses_wgmma(tiled)) continue;
        jobs.emplace_back(tiled, std::async(std::launch::async, [&compiler, &templates, tiled] {
                            auto g = codegen::generate_kernel(tiled, *templates);
                            if (!g.ok()) return Result<CompiledKernel>(g.status());
                            return (*compiler)->compile(*g, *templates, tiled);
                          }));
        if (jobs.size() % 2 == 0) jobs[jobs.size() - 2].second.wait();  // two at a time
      }
    }
  REQUIRE(jobs.size() >= 30);
  for (auto& [spec, future] : jobs) {
    auto c = future.get();
    CAPTURE(spec_to_json(spec));
    REQUIRE_MESSAGE(c.ok(), c.status().message());
    CHECK_MESSAGE(!c->report.wgmma_serialized, c->report.wgmma_serialization);
  }
}
