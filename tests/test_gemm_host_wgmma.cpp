// The grouped GEMM's sm_90a warpgroup-MMA tiles (templates/gemm/grouped_gemm_wgmma.cuh), run on
// the host backend (whose wgmma twin runs each MMA when its wait completes it, and fails reads
// or writes of accumulators, or of the shared-memory operand, while one is in flight) against
// the fp64 reference: the three tile heights, 64 and 128 k per stage (the A tile's 64-k blocks),
// bf16 and f16 activations, every layout and epilogue, stage counts below, at and past the
// pipeline's slots, N not a multiple of the tile, experts that fall back to the mma.sync path
// inside the same kernel (which reads the same A tile), and INT4 weights, whose scale groups
// are summed apart (groups of half a stage, one stage, two stages, and per channel), with
// 16-bit activations or e4m3 ones scaled per token or per 128 k.

#include <doctest/doctest.h>

#include "gemm_case.hpp"
#include "host_test_support.hpp"
#include "kernels/grouped_gemm.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

GemmCase wgmma_case(std::uint16_t bm, std::uint8_t stages, DType act, std::uint16_t bk = 64) {
  GemmCase c;
  c.tile = dispatch::TileConfig{bm, 128, bk, stages, 8};
  c.act = act;
  return c;
}

// INT4 weights on a wgmma tile; e4m3 activations scaled per token unless `act_scale` says.
GemmCase int4_wgmma_case(WeightFormat weight, DType scale, std::uint32_t group, std::uint16_t bm, std::uint8_t stages,
                         DType act, std::uint16_t bk, ActScale act_scale = ActScale::token) {
  GemmCase c = wgmma_case(bm, stages, act, bk);
  c.weight = weight;
  c.scale = scale;
  c.group = group;
  if (act == DType::e4m3) c.act_scale = act_scale;
  return c;
}

void run_on_wgmma(KernelResolver& resolver, const GemmCase& c) {
  HostLauncher host(Arch::sm_90a);
  const KernelSpec spec = gemm_case_spec(c, Backend::host, Arch::sm_90a);
  REQUIRE_MESSAGE(gemm_uses_wgmma(spec), describe(c));
  run_gemm_case(resolver, host, c, fresh_seed());
}

}  // namespace

TEST_CASE("host grouped GEMM, wgmma tiles: layouts, epilogues, heights, k per stage, activations, stage counts") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  SUBCASE("128 rows, bf16, indexed, silu_and_mul with bias, N 160, 3 k stages (a pair and the odd one)") {
    GemmCase c = wgmma_case(128, 3, DType::bf16);
    c.epilogue = Epilogue::silu_and_mul;
    c.bias = true;
    c.n = 160;
    c.k = 192;
    c.tokens = 70;
    c.topk = 4;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("64 rows, f16, contiguous, swiglu_oai, f32 out, 4 k stages") {
    GemmCase c = wgmma_case(64, 4, DType::f16);
    c.epilogue = Epilogue::swiglu_oai;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.n = 256;
    c.k = 256;
    c.tokens = 150;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("128 rows, bf16, masked, no epilogue, 5 k stages") {
    GemmCase c = wgmma_case(128, 3, DType::bf16);
    c.layout = Layout::masked;
    c.k = 320;
    c.tokens = 140;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("64 rows, f16, indexed, topk_weight, N 96, 2 k stages, one A row per pair") {
    GemmCase c = wgmma_case(64, 5, DType::f16);
    c.epilogue = Epilogue::topk_weight;
    c.n = 96;
    c.k = 128;
    c.tokens = 45;
    c.a_per_pair = true;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("128 rows, bf16, indexed, one k stage (the odd one alone), one token, blocks dropped") {
    GemmCase c = wgmma_case(128, 4, DType::bf16);
    c.k = 64;
    c.tokens = 1;
    c.drop_blocks = true;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("32 rows, bf16, indexed, silu_and_mul with bias, N 160, 128 k, 5 k stages") {
    GemmCase c = wgmma_case(32, 3, DType::bf16, 128);
    c.epilogue = Epilogue::silu_and_mul;
    c.bias = true;
    c.n = 160;
    c.k = 640;
    c.tokens = 40;
    c.topk = 4;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("32 rows, f16, indexed, topk_weight, 64 k, 4 k stages, one A row per pair") {
    GemmCase c = wgmma_case(32, 4, DType::f16);
    c.epilogue = Epilogue::topk_weight;
    c.k = 256;
    c.tokens = 30;
    c.a_per_pair = true;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("64 rows, bf16, contiguous, swiglu_oai, f32 out, 128 k, 2 k stages") {
    GemmCase c = wgmma_case(64, 4, DType::bf16, 128);
    c.epilogue = Epilogue::swiglu_oai;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.k = 256;
    c.tokens = 150;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("128 rows, f16, masked, no epilogue, 128 k, 3 k stages, N 96") {
    GemmCase c = wgmma_case(128, 3, DType::f16, 128);
    c.layout = Layout::masked;
    c.n = 96;
    c.k = 384;
    c.tokens = 140;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("64 rows, f16, indexed, 128 k, one k stage, one token, blocks dropped") {
    GemmCase c = wgmma_case(64, 4, DType::f16, 128);
    c.k = 128;
    c.tokens = 1;
    c.drop_blocks = true;
    run_on_wgmma(*resolver, c);
  }
}

TEST_CASE("host grouped GEMM, wgmma tiles: experts whose scales cannot be folded take the mma.sync path of the same kernel") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (DType act : {DType::bf16, DType::f16}) {
    CAPTURE(to_string(act));
    for (GemmCase c : edge_scale_lane_cases()) {  // some experts with an edge byte, the others not
      for (const auto& tile : {wgmma_case(128, 3, act).tile, wgmma_case(32, 3, act, 128).tile}) {
        c.tile = tile;
        c.act = act;
        CAPTURE(describe(c));
        run_on_wgmma(*resolver, c);
      }
    }
    {
      // Odd experts span 2^-40 .. 2^40 (more binades than either fragment path folds), even
      // ones keep their quantized scales: both paths in one launch, through silu_and_mul.
      GemmCase c = wgmma_case(128, 3, act);
      c.epilogue = Epilogue::silu_and_mul;
      c.layout = Layout::contiguous;
      c.tokens = 300;
      c.edit = [](quant::QuantizedWeights& q) {
        for (std::uint32_t e = 1; e < q.experts; e += 2) {
          q.scales[q.group_index(e, e % q.n, 0)] = 127 + 40;
          q.scales[q.group_index(e, (e + 7) % q.n, q.groups() - 1)] = 127 - 40;
        }
      };
      run_on_wgmma(*resolver, c);
    }
    for (GemmCase c : extreme_window_cases()) {  // the fragment path with its extreme offsets
      if (c.act != act) continue;
      c.tile = wgmma_case(64, 3, act).tile;
      run_on_wgmma(*resolver, c);
    }
  }
}

TEST_CASE("host grouped GEMM, wgmma tiles: INT4 weights, scale groups within, equal to and across stages, per channel") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  SUBCASE("128 rows, bf16, symmetric, bf16 scales, g128 = one stage, indexed, silu_and_mul with bias, N 160") {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_sym, DType::bf16, 128, 128, 3, DType::bf16, 128);
    c.epilogue = Epilogue::silu_and_mul;
    c.bias = true;
    c.n = 160;
    c.k = 384;
    c.tokens = 70;
    c.topk = 4;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("64 rows, f16, zero points, f16 scales, g64 = half a stage, contiguous, swiglu_oai, f32 out") {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_asym, DType::f16, 64, 64, 4, DType::f16, 128);
    c.epilogue = Epilogue::swiglu_oai;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.n = 256;
    c.k = 512;
    c.tokens = 150;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("32 rows, bf16, zero points, bf16 scales, g128 = two 64-k stages, masked, 6 k stages") {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_asym, DType::bf16, 128, 32, 3, DType::bf16, 64);
    c.layout = Layout::masked;
    c.k = 384;
    c.tokens = 40;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("32 rows, f16, symmetric, bf16 scales, g128 across two 64-k stages, indexed, topk_weight, one A row per pair") {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_sym, DType::bf16, 128, 32, 4, DType::f16, 64);
    c.epilogue = Epilogue::topk_weight;
    c.k = 512;
    c.tokens = 30;
    c.a_per_pair = true;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("64 rows, bf16, zero points, f16 scales, per channel (group = K, 3 stages), N 96") {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_asym, DType::f16, 384, 64, 3, DType::bf16, 128);
    c.n = 96;
    c.k = 384;
    c.tokens = 45;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("128 rows, f16, symmetric, f16 scales, per channel with 64 k per stage, one token, blocks dropped") {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_sym, DType::f16, 256, 128, 4, DType::f16, 64);
    c.k = 256;
    c.tokens = 1;
    c.drop_blocks = true;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("64 rows, bf16, zero points, bf16 scales, g64 = one stage, 5 stages (past the slots), bias, topk_weight") {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_asym, DType::bf16, 64, 64, 3, DType::bf16, 64);
    c.epilogue = Epilogue::topk_weight;
    c.bias = true;
    c.k = 320;
    c.tokens = 90;
    run_on_wgmma(*resolver, c);
  }
}

namespace {

// The W4A8 cases, with e4m3 activations scaled per token or per 128 k (those stored
// column-major in two of them, as DeepEP's dispatch and DeepGEMM lay them out, in [E][K / 128][m]
// slabs for the masked layout), against fp64 of the quantized inputs.
void run_w4a8_cases(ActScale act_scale) {
  TempDir dir;
  auto resolver = host_resolver(dir);
  const bool block = act_scale == ActScale::block128;
  auto w4a8_case = [&](WeightFormat weight, DType scale, std::uint32_t group, std::uint16_t bm, std::uint8_t stages) {
    return int4_wgmma_case(weight, scale, group, bm, stages, DType::e4m3, 128, act_scale);
  };
  SUBCASE("128 rows, symmetric, bf16 scales, g128 = one stage, indexed, silu_and_mul with bias, N 160") {
    GemmCase c = w4a8_case(WeightFormat::int4_sym, DType::bf16, 128, 128, 3);
    c.epilogue = Epilogue::silu_and_mul;
    c.bias = true;
    c.n = 160;
    c.k = 384;
    c.tokens = 70;
    c.topk = 4;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("64 rows, zero points, f16 scales, g64 = half a stage, contiguous, swiglu_oai, f32 out") {
    GemmCase c = w4a8_case(WeightFormat::int4_asym, DType::f16, 64, 64, 4);
    c.epilogue = Epilogue::swiglu_oai;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.a_scales_column_major = block;
    c.n = 256;
    c.k = 512;
    c.tokens = 150;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("32 rows, zero points, bf16 scales, per channel (group = K), masked, 6 stages (past the slots)") {
    GemmCase c = w4a8_case(WeightFormat::int4_asym, DType::bf16, 768, 32, 3);
    c.layout = Layout::masked;
    c.a_scales_column_major = block;
    c.k = 768;
    c.tokens = 40;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("64 rows, symmetric, f16 scales, g64, indexed, topk_weight, one A row per pair") {
    GemmCase c = w4a8_case(WeightFormat::int4_sym, DType::f16, 64, 64, 4);
    c.epilogue = Epilogue::topk_weight;
    c.k = 256;
    c.tokens = 30;
    c.a_per_pair = true;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("64 rows, symmetric, f16 scales, per channel over 6 stages, indexed, topk_weight") {
    GemmCase c = w4a8_case(WeightFormat::int4_sym, DType::f16, 768, 64, 4);
    c.epilogue = Epilogue::topk_weight;
    c.k = 768;
    c.tokens = 30;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("128 rows, zero points, f16 scales, g128, one token, blocks dropped") {
    GemmCase c = w4a8_case(WeightFormat::int4_asym, DType::f16, 128, 128, 4);
    c.k = 256;
    c.tokens = 1;
    c.drop_blocks = true;
    run_on_wgmma(*resolver, c);
  }
  SUBCASE("64 rows, zero points, bf16 scales, g128: NaN codes make their rows NaN, +-448 and subnormal codes exact") {
    GemmCase c = w4a8_case(WeightFormat::int4_asym, DType::bf16, 128, 64, 3);
    c.a_edge_bytes = true;
    c.layout = Layout::contiguous;
    c.out = DType::f32;
    c.k = 384;
    c.tokens = 77;
    run_on_wgmma(*resolver, c);
  }
  for (int shift : {-120, 100}) {
    // Activation scales near 2^-120 (f32 subnormals) and 2^100.
    CAPTURE(shift);
    GemmCase c = w4a8_case(WeightFormat::int4_sym, DType::bf16, 128, 64, 3);
    c.a_exponent_shift = shift;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.k = 256;
    c.tokens = 70;
    run_on_wgmma(*resolver, c);
  }
}

}  // namespace

TEST_CASE("host grouped GEMM, wgmma tiles: W4A8, INT4 weights x e4m3 activations scaled per token") {
  // One e4m3 wgmma per 32 k; q - z as e4m3 bytes (2^-9 each), each scale group summed apart as
  // for 16-bit activations, and each row's scale (times 2^9) applied in the epilogue.
  run_w4a8_cases(ActScale::token);
}

TEST_CASE("host grouped GEMM, wgmma tiles: W4A8, INT4 weights x e4m3 activations scaled per 128 k") {
  // Every stage (one 128-k block) summed apart: times its columns' group scales and its rows'
  // scales for the block, which the stage carries (one 4-byte copy per row), and 2^9. Runs that
  // end at a stage's first tile are the previous stage's; scale groups of half a stage end
  // inside one, per-channel scales span all.
  run_w4a8_cases(ActScale::block128);
}
