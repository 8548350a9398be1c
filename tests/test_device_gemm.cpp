// The grouped GEMM on the GPU against the fp64 reference, with the harness the host suites use
// (tests/gemm_case.hpp): every weight format x activation dtype x MoE layout x epilogue at small
// shapes, group sizes, every tile configuration, edge rows, E8M0 edge scale bytes, and split-K
// that must be bitwise reproducible run to run; W4A8 (e4m3 activations) on sm_89 and newer;
// on sm_90a the warpgroup-MMA tiles, with the host suite's cases. Skips without a GPU.

#include <doctest/doctest.h>

#include <thread>

#include "gemm_case.hpp"
#include "kernels/grouped_gemm.hpp"
#include "spec/arch.hpp"
#include "test_device_support.hpp"
#include "wgmma_gemm_cases.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

// A resolver whose compile pool uses the machine (the GPU hosts have cores to spare).
std::unique_ptr<KernelResolver> device_resolver(const TempDir& dir) {
  KernelResolver::Options o = resolver_options_in(dir);
  o.compile_threads = std::clamp(std::thread::hardware_concurrency(), 2u, 8u);
  auto r = KernelResolver::create(std::move(o));
  REQUIRE(r.ok());
  return std::move(r).value();
}

// Compiles every case's kernel in parallel, then runs the cases one by one.
void run_cases(DeviceLauncher& launcher, const std::vector<GemmCase>& cases) {
  TempDir dir;
  auto resolver = device_resolver(dir);
  std::vector<std::future<Result<Resolution>>> pending;
  for (const GemmCase& c : cases)
    pending.push_back(resolver->resolve_async(gemm_case_spec(c, Backend::device, launcher.arch())));
  for (auto& f : pending) {
    auto r = f.get();
    REQUIRE_MESSAGE(r.ok(), r.status().message());
  }
  for (const GemmCase& c : cases) run_gemm_case(*resolver, launcher, c, fresh_seed());
}

}  // namespace

TEST_SUITE("device") {

TEST_CASE("GPU grouped GEMM: mxfp4 x activations x layouts x epilogues") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  run_cases(*l, format_matrix({WeightFormat::mxfp4, DType::e8m0, 32}));
}

TEST_CASE("GPU grouped GEMM: int4 symmetric x activations x layouts x epilogues") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  run_cases(*l, format_matrix({WeightFormat::int4_sym, DType::bf16, 128}));
}

TEST_CASE("GPU grouped GEMM: int4 asymmetric x activations x layouts x epilogues") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  run_cases(*l, format_matrix({WeightFormat::int4_asym, DType::f16, 64}));
}

TEST_CASE("GPU grouped GEMM: int4 group sizes 32 64 128 and per-channel with bf16 and f16 scales") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  std::vector<GemmCase> cases;
  for (WeightFormat w : {WeightFormat::int4_sym, WeightFormat::int4_asym})
    for (DType scale : {DType::bf16, DType::f16})
      for (std::uint32_t group : {32u, 64u, 128u, 256u}) {
        GemmCase c;
        c.weight = w;
        c.scale = scale;
        c.group = group;
        c.act = scale;
        c.layout = Layout::contiguous;
        c.tokens = 40;
        cases.push_back(c);
      }
  run_cases(*l, cases);
}

TEST_CASE("GPU grouped GEMM: every tile configuration the planner can pick, N not a multiple of the tile, many rows") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  std::vector<GemmCase> cases;
  for (auto [n, k] : {std::pair{96u, 96u}, std::pair{160u, 192u}, std::pair{512u, 1024u}})
    for (const auto& tile : dispatch::gemm_tile_configs(l->arch(), k, WeightFormat::mxfp4, DType::e8m0, 32)) {
      GemmCase c;
      c.tile = tile;
      c.n = n;
      c.k = k;
      c.tokens = 3 * static_cast<std::int32_t>(tile.bm) + 5;  // several tiles per expert, one partial
      c.topk = 2;
      cases.push_back(c);
      c.weight = WeightFormat::int4_asym;
      c.scale = DType::bf16;
      c.group = 32;
      c.layout = Layout::masked;
      c.epilogue = Epilogue::silu_and_mul;
      cases.push_back(c);
    }
  run_cases(*l, cases);
}

TEST_CASE("GPU grouped GEMM, wgmma tiles (sm_90a): the host suite's cases, 16-bit and e4m3 activations, MXFP4 and INT4") {
  // The same cases as tests/test_gemm_host_wgmma.cpp, whose host twin of wgmma follows the PTX
  // ISA's fragment layouts: here the hardware checks them, the shared-memory descriptors and the
  // pipeline's waits, against the same fp64 reference.
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  if (l->arch() != Arch::sm_90a) {
    MESSAGE("skipped: the wgmma tiles are sm_90a's (warpgroup MMA); this GPU is " << to_string(l->arch()));
    return;
  }
  std::vector<GemmCase> cases;
  for (const auto& list : {wgmma_tile_cases(), wgmma_fallback_cases(), wgmma_int4_cases(),
                           wgmma_w4a8_cases(ActScale::token), wgmma_w4a8_cases(ActScale::block128),
                           wgmma_mxfp4_w4a8_cases(ActScale::token), wgmma_mxfp4_w4a8_cases(ActScale::block128),
                           wgmma_row_cases()})
    for (const NamedGemmCase& named : list) {
      CAPTURE(named.name);
      REQUIRE(gemm_uses_wgmma(gemm_case_spec(named.c, Backend::device, l->arch())));
      cases.push_back(named.c);
    }
  run_cases(*l, cases);
}

TEST_CASE("GPU grouped GEMM: edge rows, empty experts, dropped blocks, smallest N and K") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  std::vector<GemmCase> cases;
  for (std::int32_t rows : {0, 1, 7, 23})
    for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked}) {
      GemmCase c;
      c.layout = layout;
      c.tokens = rows;
      c.topk = 1;
      cases.push_back(c);
    }
  GemmCase dropped;
  dropped.experts = 16;
  dropped.touched_experts = 5;
  dropped.tokens = 9;
  dropped.topk = 3;
  dropped.drop_blocks = true;
  cases.push_back(dropped);
  dropped.epilogue = Epilogue::topk_weight;
  dropped.a_per_pair = true;
  dropped.tile = {32, 128, 64, 4, 4};
  cases.push_back(dropped);
  GemmCase smallest;
  smallest.n = 32;
  smallest.k = 32;
  smallest.tile = {16, 32, 32, 2, 1};
  cases.push_back(smallest);
  run_cases(*l, cases);
}

TEST_CASE("GPU grouped GEMM: E8M0 scale bytes 0x00, 0xFE and 0xFF, bf16 and f16 activations") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  std::vector<GemmCase> cases = edge_scale_cases();
  for (GemmCase c : edge_scale_cases()) {
    c.act = DType::f16;
    cases.push_back(c);
  }
  run_cases(*l, cases);
}

TEST_CASE("GPU grouped GEMM: MXFP4 tiles marked for other activations give NaN, unmarked ones run as packed") {
  // The packing mark (grouped_gemm_params.cuh) on the hardware: NaN in every written output where
  // the kernel refuses the mark (run_gemm_case checks none is left as poison), results where not.
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  const std::uint32_t a16 = packed_order_mark(PackedOrder::a16) >> 16, a16f16 = packed_order_mark(PackedOrder::a16f16) >> 16;
  std::vector<GemmCase> cases;
  GemmCase bf16;
  bf16.epilogue = Epilogue::silu_and_mul;
  for (std::uint32_t mark : {0u, a16f16}) {
    bf16.packing_mark = mark;
    cases.push_back(bf16);
  }
  GemmCase f16;
  f16.act = DType::f16;
  f16.layout = Layout::contiguous;
  f16.out = DType::f32;
  f16.split_k = 2;
  for (std::uint32_t mark : {0u, a16}) {
    f16.packing_mark = mark;
    cases.push_back(f16);
  }
  if (arch_info(l->arch()).sm >= 89) {
    GemmCase e4m3;
    e4m3.act = DType::e4m3;
    e4m3.act_scale = ActScale::token;
    for (std::uint32_t mark : {0u, a16}) {
      e4m3.packing_mark = mark;
      cases.push_back(e4m3);
    }
  }
  for (const GemmCase& c : cases) CHECK(packing_mark_refused(c) == (*c.packing_mark != 0 || c.act == DType::f16));
  run_cases(*l, cases);
}

TEST_CASE("GPU grouped GEMM: split-K over several slices is bitwise identical run to run") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  TempDir dir;
  auto resolver = device_resolver(dir);
  for (std::uint16_t splits : {2, 3, 5, 8}) {
    CAPTURE(splits);
    GemmCase c;
    c.n = 512;
    c.k = 2048;  // 64 k32 tiles: slices of 32, 22, 13 or 8 (the last one shorter)
    c.tokens = 48;
    c.topk = 2;
    c.split_k = splits;
    c.out = DType::f32;
    c.weight = WeightFormat::int4_asym;
    c.scale = DType::bf16;
    c.group = 128;
    const std::uint32_t seed = fresh_seed();
    auto first = run_gemm_case(*resolver, *l, c, seed);
    for (int run = 0; run < 3; ++run) {
      auto again = run_gemm_case(*resolver, *l, c, seed);
      CHECK(first.output == again.output);
    }
    c.layout = Layout::masked;
    c.epilogue = Epilogue::silu_and_mul;
    c.out = DType::bf16;
    auto masked = run_gemm_case(*resolver, *l, c, seed);
    CHECK(masked.output == run_gemm_case(*resolver, *l, c, seed).output);
  }
}

TEST_CASE("GPU grouped GEMM W4A8: formats x scale granularities x layouts x epilogues, edge codes, E8M0 bytes, split-K") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  if (arch_info(l->arch()).sm < 89) {
    MESSAGE("skipped: e4m3 activations need sm_89 or newer; this GPU is " << to_string(l->arch()));
    return;
  }
  std::vector<GemmCase> cases;
  for (const GemmFormat& f : {GemmFormat{WeightFormat::mxfp4, DType::e8m0, 32}, GemmFormat{WeightFormat::int4_sym, DType::bf16, 128},
                              GemmFormat{WeightFormat::int4_asym, DType::f16, 64}}) {
    for (const GemmCase& c : act8_matrix(f)) cases.push_back(c);
    GemmCase edge = cases.back();
    edge.a_edge_bytes = true;  // NaN rows, +-448, subnormal codes
    edge.layout = Layout::contiguous;
    edge.epilogue = Epilogue::none;
    edge.a_per_pair = false;
    edge.out = DType::f32;
    cases.push_back(edge);
  }
  for (GemmCase c : edge_scale_cases()) {
    c.act = DType::e4m3;
    c.act_scale = ActScale::token;
    cases.push_back(c);
  }
  run_cases(*l, cases);

  // Split-K with boundaries inside 128-k activation blocks, bitwise reproducible.
  TempDir dir;
  auto resolver = device_resolver(dir);
  for (WeightFormat w : {WeightFormat::mxfp4, WeightFormat::int4_asym}) {
    GemmCase c;
    c.weight = w;
    c.scale = w == WeightFormat::mxfp4 ? DType::e8m0 : DType::bf16;
    c.group = w == WeightFormat::mxfp4 ? 32 : 128;
    c.act = DType::e4m3;
    c.act_scale = ActScale::block128;
    c.k = 1280;
    c.split_k = 4;
    c.out = DType::f32;
    c.tokens = 9;
    const std::uint32_t seed = fresh_seed();
    auto first = run_gemm_case(*resolver, *l, c, seed);
    CHECK(first.output == run_gemm_case(*resolver, *l, c, seed).output);
  }
}

TEST_CASE("GPU grouped GEMM W4A4 (sm_120a / sm_121a): layouts x epilogues, E8M0 edge bytes on both sides, split-K") {
  // The hardware check of the kind::mxf4 lane and scale mapping the host twin follows.
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  if (!has_block_scale_mma(l->arch())) {
    MESSAGE("skipped: e2m1 activations need the block-scaled mma of sm_120a or sm_121a; this GPU is "
            << to_string(l->arch()));
    return;
  }
  std::vector<GemmCase> cases = act4_matrix();
  GemmCase edge = cases.front();
  edge.a_edge_bytes = true;  // NaN, 2^-127, 2^-126, 2^113 blocks in the activations
  edge.layout = Layout::contiguous;
  edge.out = DType::f32;
  edge.tokens = 37;
  cases.push_back(edge);
  for (GemmCase c : edge_scale_lane_cases()) {
    c.act = DType::e2m1;
    c.act_scale = ActScale::block32;
    cases.push_back(c);
  }
  run_cases(*l, cases);
  TempDir dir;
  auto resolver = device_resolver(dir);
  GemmCase c;
  c.act = DType::e2m1;
  c.act_scale = ActScale::block32;
  c.k = 1280;
  c.split_k = 4;
  c.out = DType::f32;
  c.tokens = 9;
  const std::uint32_t seed = fresh_seed();
  auto first = run_gemm_case(*resolver, *l, c, seed);
  CHECK(first.output == run_gemm_case(*resolver, *l, c, seed).output);
}

}  // TEST_SUITE
