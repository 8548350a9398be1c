// The grouped GEMM kernel, run on the host backend, against the fp64 reference: every weight
// format x activation dtype x MoE layout x epilogue, the group sizes, every tile configuration,
// edge shapes, split-K determinism and edge scale bytes.

#include <doctest/doctest.h>

#include "gemm_case.hpp"
#include "host_test_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

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

TEST_CASE("host grouped GEMM: every tile configuration the planner can pick, N not a multiple of the tile") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  // K 96, 192, 384, 512: the planner's k stages are 32, 64, 128 and (16-row tiles of 128
  // columns) 256 deep (the largest dividing K), which changes how the threads share the copies.
  for (auto [n, k] : {std::pair{96u, 96u}, std::pair{160u, 192u}, std::pair{288u, 384u}, std::pair{96u, 512u}}) {
    for (const auto& tile : dispatch::gemm_tile_configs(Arch::sm_90a, k, WeightFormat::mxfp4, DType::e8m0, 32)) {
      GemmCase c;
      c.tile = tile;
      c.n = n;  // 96: three 32-column strips of a 128-column tile
      c.k = k;
      c.tokens = static_cast<std::int32_t>(tile.bm) + 5;  // crosses a tile boundary
      c.topk = 2;
      run_gemm_case(*resolver, c, fresh_seed());
      c.weight = WeightFormat::int4_asym;
      c.scale = DType::bf16;
      c.group = 32;
      c.layout = Layout::masked;
      c.epilogue = Epilogue::silu_and_mul;
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

namespace {

// A split-K case gives the same bits run to run with every worker, and with one worker in linear
// block order (the last split of each tile finishes last) or reversed (split 0 does, and sums
// the slots itself).
void check_same_bits_whichever_split_finishes_last(KernelResolver& resolver, const GemmCase& c) {
  const std::uint32_t seed = fresh_seed();
  const auto first = run_gemm_case(resolver, c, seed);
  CHECK(run_gemm_case(resolver, c, seed).output == first.output);
  ScopedEnv one("MOEJIT_HOST_THREADS", "1");
  CHECK(run_gemm_case(resolver, c, seed).output == first.output);
  ScopedEnv reverse("MOEJIT_HOST_BLOCK_ORDER", "reverse");
  CHECK(run_gemm_case(resolver, c, seed).output == first.output);
}

}  // namespace

TEST_CASE("host grouped GEMM: split-K is bitwise identical run to run, whichever split finishes last") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (std::uint16_t splits : {2, 3, 5}) {
    CAPTURE(splits);
    GemmCase c;
    c.k = 512;  // 8 stages of 64: slices of 4, 3 or 2 (the last ones shorter or empty)
    c.split_k = splits;
    c.out = DType::f32;
    c.weight = WeightFormat::int4_asym;
    c.scale = DType::bf16;
    c.group = 128;
    check_same_bits_whichever_split_finishes_last(*resolver, c);
  }
}

TEST_CASE("host grouped GEMM: split-K boundaries inside scale groups, odd and empty splits") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  struct Split {
    WeightFormat weight;
    std::uint32_t group, k;
    dispatch::TileConfig tile;
    std::uint16_t splits;
    Layout layout;
  };
  const Split cases[] = {
      // 32 stages of 64 in 5 splits of 7: boundaries at k 448, 896, ... inside 128-wide groups.
      {WeightFormat::int4_asym, 128, 2048, {16, 128, 64, 4, 4}, 5, Layout::indexed},
      // Stages of 128 holding four 32-wide groups each, 3 splits.
      {WeightFormat::int4_asym, 32, 1536, {16, 128, 128, 4, 4}, 3, Layout::contiguous},
      // Per-channel scales (one group spans K): every boundary is inside it; 12 stages in 5
      // splits of 3, the last one empty.
      {WeightFormat::int4_asym, 1536, 1536, {16, 128, 128, 3, 4}, 5, Layout::masked},
      {WeightFormat::int4_sym, 64, 2048, {32, 128, 128, 4, 4}, 7, Layout::indexed},
      // MXFP4, 16 stages of 128 in 7 splits of 3 (6 used, one empty).
      {WeightFormat::mxfp4, 32, 2048, {16, 256, 128, 4, 4}, 7, Layout::indexed},
      // Stages of 256 (two 128-wide zero-point groups each): 6 stages in 3 splits, and MXFP4's
      // eight scale rows per stage in 5 splits of 2 (the last one empty).
      {WeightFormat::int4_asym, 128, 1536, {16, 128, 256, 4, 4}, 3, Layout::indexed},
      {WeightFormat::mxfp4, 32, 2048, {16, 128, 256, 3, 4}, 5, Layout::contiguous},
  };
  for (const Split& sp : cases) {
    GemmCase c;
    c.weight = sp.weight;
    c.scale = sp.weight == WeightFormat::mxfp4 ? DType::e8m0 : DType::bf16;
    c.group = sp.group;
    c.k = sp.k;
    c.n = 160;  // the last 128-column tile holds one 32-column strip
    c.tile = sp.tile;
    c.split_k = sp.splits;
    c.layout = sp.layout;
    c.tokens = 20;
    c.out = DType::f32;
    check_same_bits_whichever_split_finishes_last(*resolver, c);
  }
}

TEST_CASE("host grouped GEMM: E8M0 scale bytes 0x00, 0xFE and 0xFF, bf16 and f16 activations") {
  // Such experts take the accumulator path, whose f16 registers come from the f16 packing.
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (DType act : {DType::bf16, DType::f16})
    for (GemmCase c : edge_scale_cases()) {
      c.act = act;
      run_gemm_case(*resolver, c, fresh_seed());
    }
}

TEST_CASE("host grouped GEMM: a NaN gate or up row stays NaN through silu_and_mul and swiglu_oai") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (const GemmCase& c : nan_act_and_mul_cases()) run_gemm_case(*resolver, c, fresh_seed());
}

TEST_CASE("host grouped GEMM: E8M0 bytes 0x00, 0x01, 0xFE and 0xFF at every column position of a strip") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (DType act : {DType::bf16, DType::f16})
    for (GemmCase c : edge_scale_lane_cases()) {
      c.act = act;
      run_gemm_case(*resolver, c, fresh_seed());
    }
}

TEST_CASE("host grouped GEMM: MXFP4 scale bytes near the top and bottom of the range, bf16 and f16 activations") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (const GemmCase& c : extreme_window_cases()) run_gemm_case(*resolver, c, fresh_seed());
}

TEST_CASE("host grouped GEMM: f16 activations with INT4 scales too large for f16 weights stay finite") {
  // Scales of about 2^14 (the quantizer's ~2^-6 times 2^20): (q - z) * s would overflow f16
  // (max 65504) for |q - z| >= 4, but the outputs, accumulated and scaled in f32, are finite and
  // must match.
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (DType scale : {DType::bf16, DType::f16}) {
    GemmCase c;
    c.weight = WeightFormat::int4_asym;
    c.scale = scale;
    c.group = 64;
    c.act = DType::f16;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.edit = [scale](quant::QuantizedWeights& q) {
      // Multiply every scale by 2^20: add 20 to the exponent field (no scale is zero or tiny).
      for (auto& sc : q.scales) sc = static_cast<std::uint16_t>(sc + (scale == DType::bf16 ? 20u << 7 : 20u << 10));
    };
    run_gemm_case(*resolver, c, fresh_seed());
  }
}
