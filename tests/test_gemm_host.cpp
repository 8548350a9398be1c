// The grouped GEMM kernel, run on the host backend, against the fp64 reference: every weight
// format x activation dtype x MoE layout x epilogue, the group sizes, every tile configuration,
// edge shapes, split-K determinism and edge scale bytes.

#include <doctest/doctest.h>

#include "gemm_case.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

std::unique_ptr<KernelResolver> host_resolver(const TempDir& dir) {
  auto r = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(r.ok());
  return std::move(r).value();
}

std::uint32_t fresh_seed() { return std::random_device{}(); }

void run_format_matrix(const GemmFormat& f) {
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (const GemmCase& c : format_matrix(f)) run_gemm_case(*resolver, c, fresh_seed());
}

}  // namespace

TEST_CASE("host grouped GEMM: mxfp4 x activations x layouts x epilogues") {
  run_format_matrix({WeightFormat::mxfp4, DType::e8m0, 32});
}

TEST_CASE("host grouped GEMM: int4 symmetric x activations x layouts x epilogues") {
  run_format_matrix({WeightFormat::int4_sym, DType::bf16, 128});
}

TEST_CASE("host grouped GEMM: int4 asymmetric x activations x layouts x epilogues") {
  run_format_matrix({WeightFormat::int4_asym, DType::f16, 64});
}

TEST_CASE("host grouped GEMM: int4 group sizes 32 64 128 and per-channel with bf16 and f16 scales") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (WeightFormat w : {WeightFormat::int4_sym, WeightFormat::int4_asym})
    for (DType scale : {DType::bf16, DType::f16})
      for (std::uint32_t group : {32u, 64u, 128u, 256u}) {
        GemmCase c;
        c.weight = w;
        c.scale = scale;
        c.group = group;  // 256 == k: per-channel
        c.act = scale;
        c.layout = Layout::contiguous;
        c.tokens = 40;
        run_gemm_case(*resolver, c, fresh_seed());
      }
}

TEST_CASE("host grouped GEMM: every tile configuration with N and K not multiples of the tile") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (const auto& tile : dispatch::gemm_tile_configs(Arch::sm_90a)) {
    for (auto [n, k] : {std::pair{96u, 96u}, std::pair{160u, 224u}}) {
      GemmCase c;
      c.tile = tile;
      c.n = n;  // 96: three 32-column strips of a 128-column tile
      c.k = k;  // 96, 224: the last 64-deep stage holds one k32 tile
      c.tokens = static_cast<std::int32_t>(tile.bm) + 5;  // crosses a tile boundary
      c.topk = 2;
      run_gemm_case(*resolver, c, fresh_seed());
      c.weight = WeightFormat::int4_asym;
      c.scale = DType::bf16;
      c.group = 32;
      c.layout = Layout::masked;
      c.epilogue = Epilogue::silu_and_mul;
      c.n = n;  // act-and-mul: I = n / 2
      run_gemm_case(*resolver, c, fresh_seed());
    }
  }
}

TEST_CASE("host grouped GEMM: edge rows") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  SUBCASE("M = 0, 1, 7 and not a multiple of BM, on every layout") {
    for (std::int32_t rows : {0, 1, 7, 23})
      for (Layout l : {Layout::indexed, Layout::contiguous, Layout::masked}) {
        GemmCase c;
        c.layout = l;
        c.tokens = rows;
        c.topk = 1;
        run_gemm_case(*resolver, c, fresh_seed());
      }
  }
  SUBCASE("experts with no tokens and blocks of expert -1 (padded sentinel rows untouched)") {
    GemmCase c;
    c.experts = 16;
    c.touched_experts = 5;
    c.tokens = 9;
    c.topk = 3;
    c.drop_blocks = true;
    run_gemm_case(*resolver, c, fresh_seed());
    c.epilogue = Epilogue::topk_weight;
    c.a_per_pair = true;
    c.tile = {32, 128, 64, 4, 4};
    run_gemm_case(*resolver, c, fresh_seed());
  }
  SUBCASE("the smallest legal N and K") {
    GemmCase c;
    c.n = 32;
    c.k = 32;
    c.tile = {16, 32, 32, 2, 1};
    run_gemm_case(*resolver, c, fresh_seed());
    c.weight = WeightFormat::int4_sym;
    c.scale = DType::f16;
    c.act = DType::f16;
    run_gemm_case(*resolver, c, fresh_seed());
  }
  SUBCASE("bias before every epilogue") {
    for (Epilogue e : {Epilogue::none, Epilogue::silu_and_mul, Epilogue::swiglu_oai}) {
      GemmCase c;
      c.epilogue = e;
      c.bias = true;
      run_gemm_case(*resolver, c, fresh_seed());
    }
  }
}

TEST_CASE("host grouped GEMM: split-K over several slices is bitwise identical run to run") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (std::uint16_t splits : {2, 3, 5}) {
    GemmCase c;
    c.k = 512;  // 16 k32 tiles: slices of 8, 6 or 4 (the last one shorter)
    c.split_k = splits;
    c.out = DType::f32;
    c.weight = WeightFormat::int4_asym;
    c.scale = DType::bf16;
    c.group = 128;
    const std::uint32_t seed = fresh_seed();
    auto first = run_gemm_case(*resolver, c, seed);
    auto second = run_gemm_case(*resolver, c, seed);
    CHECK(first.output == second.output);
  }
}

TEST_CASE("host grouped GEMM: E8M0 scale bytes 0x00, 0xFE and 0xFF") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (const GemmCase& c : edge_scale_cases()) run_gemm_case(*resolver, c, fresh_seed());
}
