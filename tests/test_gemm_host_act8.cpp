// The grouped GEMM with e4m3 activations (W4A8) on the host backend, against the fp64 reference
// computed from the quantized inputs (e4m3 value times its f32 scale): every weight format x
// activation-scale granularity x MoE layout x epilogue, INT4 group sizes against the 128-k
// activation blocks, every A-row width the tile can have (bk 32, 64, 128: 2, 4 and 8 chunks of
// 16 bytes), split-K, E8M0 edge bytes and edge row counts; and the MXFP4 path of sm_120a and
// sm_121a, whose block-scaled mma's take the scales themselves.

#include <doctest/doctest.h>

#include "gemm_case.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

void run_act8_matrix(const GemmFormat& f) {
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (const GemmCase& c : act8_matrix(f)) run_gemm_case(*resolver, c, fresh_seed());
}

// The three mma paths of e4m3 activations: sm_89 (e4m3 mma), sm_90a (f16 pairs), sm_120a
// (block-scaled mma for MXFP4, e4m3 mma for INT4).
constexpr Arch kAct8MmaPaths[] = {Arch::sm_89, Arch::sm_90a, Arch::sm_120a};

GemmCase act8_case(WeightFormat weight, DType scale, std::uint32_t group, ActScale act_scale) {
  GemmCase c;
  c.weight = weight;
  c.scale = scale;
  c.group = group;
  c.act = DType::e4m3;
  c.act_scale = act_scale;
  return c;
}

}  // namespace

TEST_CASE("host grouped GEMM W4A8: mxfp4 x e4m3 scales x layouts x epilogues") {
  run_act8_matrix({WeightFormat::mxfp4, DType::e8m0, 32});
}

TEST_CASE("host grouped GEMM W4A8: int4 symmetric x e4m3 scales x layouts x epilogues") {
  run_act8_matrix({WeightFormat::int4_sym, DType::bf16, 128});
}

TEST_CASE("host grouped GEMM W4A8: int4 asymmetric x e4m3 scales x layouts x epilogues") {
  run_act8_matrix({WeightFormat::int4_asym, DType::f16, 64});
}

TEST_CASE("host grouped GEMM W4A8: int4 groups 32 and per-channel against 128-k activation blocks, A rows of 2, 4 and 8 chunks") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  // Per-channel scales (group = k = 512) summed in runs of 128 k; groups of 32 inside a run.
  for (std::uint32_t group : {32u, 512u})
    for (ActScale act_scale : {ActScale::token, ActScale::block128}) {
      GemmCase c = act8_case(WeightFormat::int4_asym, DType::bf16, group, act_scale);
      c.k = 512;
      c.layout = Layout::contiguous;
      c.tokens = 21;
      c.out = DType::f32;
      run_gemm_case(*resolver, c, fresh_seed());
    }
  for (const dispatch::TileConfig tile : {dispatch::TileConfig{16, 64, 32, 3, 2}, dispatch::TileConfig{32, 128, 128, 3, 4},
                                          dispatch::TileConfig{64, 128, 64, 3, 8}}) {
    GemmCase c = act8_case(WeightFormat::mxfp4, DType::e8m0, 32, ActScale::block128);
    c.tile = tile;
    c.tokens = static_cast<std::int32_t>(tile.bm) + 3;
    run_gemm_case(*resolver, c, fresh_seed());
  }
}

TEST_CASE("host grouped GEMM W4A8: split-K inside activation blocks is bitwise identical run to run") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  // 16 stages of 64 in 3 splits of 6: boundaries at k 384 and 768, inside the 128-k blocks'
  // runs only where they are not multiples of 128 (384 is, 768 is): the splits still cut runs
  // at whole stages, and the per-split partial sums add up in split order.
  for (WeightFormat w : {WeightFormat::mxfp4, WeightFormat::int4_asym}) {
    GemmCase c = act8_case(w, w == WeightFormat::mxfp4 ? DType::e8m0 : DType::bf16, w == WeightFormat::mxfp4 ? 32 : 1024,
                           ActScale::block128);
    c.k = 1024;
    c.split_k = 3;
    c.out = DType::f32;
    c.tokens = 9;
    const std::uint32_t seed = fresh_seed();
    auto first = run_gemm_case(*resolver, c, seed);
    auto second = run_gemm_case(*resolver, c, seed);
    CHECK(first.output == second.output);
  }
}

TEST_CASE("host grouped GEMM W4A8: E8M0 scale bytes 0x00, 0xFE and 0xFF, and M = 0, 1, 7") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (GemmCase c : edge_scale_cases()) {
    c.act = DType::e4m3;
    c.act_scale = ActScale::token;
    run_gemm_case(*resolver, c, fresh_seed());
  }
  for (std::int32_t rows : {0, 1, 7}) {
    GemmCase c = act8_case(WeightFormat::int4_sym, DType::f16, 64, ActScale::block128);
    c.tokens = rows;
    c.topk = 1;
    run_gemm_case(*resolver, c, fresh_seed());
  }
}

TEST_CASE("host grouped GEMM W4A8: e4m3 NaN codes make their rows NaN, +-448 and subnormal codes are exact, on every mma path") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  int i = 0;
  for (Arch arch : kAct8MmaPaths) {
    CAPTURE(to_string(arch));
    HostLauncher host(arch);
    for (const GemmFormat& f : {GemmFormat{WeightFormat::mxfp4, DType::e8m0, 32}, GemmFormat{WeightFormat::int4_asym, DType::bf16, 128}}) {
      GemmCase c = act8_case(f.weight, f.scale, f.group, i++ % 2 == 0 ? ActScale::token : ActScale::block128);
      c.a_edge_bytes = true;
      c.layout = Layout::contiguous;
      c.tokens = 13;
      c.out = DType::f32;
      c.epilogue = i % 3 == 0 ? Epilogue::silu_and_mul : Epilogue::none;
      run_gemm_case(*resolver, host, c, fresh_seed());
    }
  }
}

TEST_CASE("host grouped GEMM W4A8: MXFP4 experts at the edges of the fragment-scale span and the plain scale window, and past them") {
  // Scale bytes drawn from [low, high] (sm_90a's kernel: f16 mma's). A span of at most 14 with
  // a largest byte of 2..254 puts the scales on the f16 B pairs (one multiply each), whatever
  // the window; one more binade sends the expert to the f32 paths: inside the window [63, 190]
  // the kernel converts with a shift and applies per-token scales at the end; one byte past
  // either edge sends it through the exact path. Every path must match the reference.
  TempDir dir;
  auto resolver = host_resolver(dir);
  const std::pair<std::uint16_t, std::uint16_t> ranges[] = {{63, 190}, {62, 120}, {130, 191}, {100, 140},
                                                            {100, 114}, {100, 115}, {0, 14},    {240, 254}};
  for (auto [low, high] : ranges)
    for (ActScale act_scale : {ActScale::token, ActScale::block128}) {
      GemmCase c = act8_case(WeightFormat::mxfp4, DType::e8m0, 32, act_scale);
      c.out = DType::f32;
      c.layout = Layout::contiguous;
      c.tokens = 24;
      c.edit = [low, high](quant::QuantizedWeights& q) {
        std::uint32_t x = 12345;
        for (auto& sc : q.scales) {
          x = x * 1103515245u + 12345u;
          sc = static_cast<std::uint16_t>(low + (x >> 16) % (high - low + 1));
        }
        // Both edges present in every expert.
        for (std::uint32_t e = 0; e < q.experts; ++e) {
          q.scales[q.group_index(e, 0, 0)] = low;
          q.scales[q.group_index(e, 1, 1)] = high;
        }
      };
      run_gemm_case(*resolver, c, fresh_seed());
    }
}

TEST_CASE("host grouped GEMM W4A8: both mma paths, e4m3 (sm_89, sm_120a kernels) and f16 pairs (sm_90a, sm_100a)") {
  // The suites above run sm_90a's kernel, whose e4m3 fragments go through two f16 mma's; the
  // targets with an e4m3 mma.sync use it directly. Every format on each.
  TempDir dir;
  auto resolver = host_resolver(dir);
  int i = 0;
  for (Arch arch : {Arch::sm_89, Arch::sm_120a, Arch::sm_100a}) {
    HostLauncher host(arch);
    for (const GemmFormat& f : {GemmFormat{WeightFormat::mxfp4, DType::e8m0, 32}, GemmFormat{WeightFormat::int4_sym, DType::bf16, 128},
                                GemmFormat{WeightFormat::int4_asym, DType::f16, 64}}) {
      GemmCase c = act8_case(f.weight, f.scale, f.group, i % 2 == 0 ? ActScale::token : ActScale::block128);
      c.layout = i % 3 == 0 ? Layout::indexed : i % 3 == 1 ? Layout::contiguous : Layout::masked;
      c.epilogue = i % 2 == 0 ? Epilogue::silu_and_mul : Epilogue::none;
      c.out = DType::f32;
      ++i;
      run_gemm_case(*resolver, host, c, fresh_seed());
    }
  }
}

TEST_CASE("host grouped GEMM W4A8: MXFP4 through block-scaled mma's (sm_120a, sm_121a): layouts, epilogues, tiles, "
          "E8M0 edges at every lane, extreme activation scales, split-K") {
  // The weights' E8M0 bytes go to the mma as its B scales (byte w of lane 4g's word: column g of
  // n8 tile w) and each activation scale's exponent as its A scale (lanes 4g, 4g + 1: rows g,
  // g + 8 of every m16 tile); the twin applies them lane by lane as the PTX ISA lays them out.
  TempDir dir;
  auto resolver = host_resolver(dir);
  HostLauncher host(Arch::sm_120a);
  for (const GemmCase& c : act8_matrix({WeightFormat::mxfp4, DType::e8m0, 32}))
    run_gemm_case(*resolver, host, c, fresh_seed());
  // Edge bytes at every column position of a strip, and in every k block.
  std::vector<GemmCase> edges = edge_scale_lane_cases();
  for (GemmCase c : edge_scale_cases()) edges.push_back(c);
  int i = 0;
  for (GemmCase c : edges) {
    c.act = DType::e4m3;
    c.act_scale = i++ % 2 == 0 ? ActScale::token : ActScale::block128;
    run_gemm_case(*resolver, host, c, fresh_seed());
  }
  // sm_121a compiles the same path (its kernel differs only in the target).
  HostLauncher spark(Arch::sm_121a);
  for (ActScale act_scale : {ActScale::token, ActScale::block128}) {
    GemmCase c = act8_case(WeightFormat::mxfp4, DType::e8m0, 32, act_scale);
    c.epilogue = Epilogue::silu_and_mul;
    run_gemm_case(*resolver, spark, c, fresh_seed());
  }
  // Several m16 tiles per warp (rows past 16 take their scales from the same lanes, next tile),
  // several strips per warp, two and eight A chunks per row.
  for (const dispatch::TileConfig tile : {dispatch::TileConfig{64, 128, 64, 3, 4}, dispatch::TileConfig{32, 64, 128, 3, 2},
                                          dispatch::TileConfig{16, 64, 32, 3, 1}})
    for (ActScale act_scale : {ActScale::token, ActScale::block128}) {
      GemmCase c = act8_case(WeightFormat::mxfp4, DType::e8m0, 32, act_scale);
      c.tile = tile;
      c.tokens = static_cast<std::int32_t>(tile.bm) + 5;
      c.out = DType::f32;
      run_gemm_case(*resolver, host, c, fresh_seed());
    }
  // Activation scales that are f32 subnormals (rows near 2^-120: the A scale byte is 0, 2^-127,
  // and the remainder carries the rest) and near 2^100.
  for (int shift : {-120, 100})
    for (ActScale act_scale : {ActScale::token, ActScale::block128}) {
      CAPTURE(shift);
      GemmCase c = act8_case(WeightFormat::mxfp4, DType::e8m0, 32, act_scale);
      c.a_exponent_shift = shift;
      c.out = DType::f32;
      c.layout = Layout::contiguous;
      run_gemm_case(*resolver, host, c, fresh_seed());
    }
  // Split-K: 4 splits of 5 stages of 64 k, boundaries at k 320 and 960 inside 128-k blocks;
  // run twice.
  for (ActScale act_scale : {ActScale::token, ActScale::block128}) {
    GemmCase c = act8_case(WeightFormat::mxfp4, DType::e8m0, 32, act_scale);
    c.k = 1280;
    c.split_k = 4;
    c.out = DType::f32;
    c.tokens = 9;
    const std::uint32_t seed = fresh_seed();
    auto first = run_gemm_case(*resolver, host, c, seed);
    auto second = run_gemm_case(*resolver, host, c, seed);
    CHECK(first.output == second.output);
  }
  for (std::int32_t rows : {0, 1, 7}) {
    GemmCase c = act8_case(WeightFormat::mxfp4, DType::e8m0, 32, ActScale::token);
    c.tokens = rows;
    c.topk = 1;
    run_gemm_case(*resolver, host, c, fresh_seed());
  }
}

TEST_CASE("host grouped GEMM W4A8: block128 scales given column-major and as masked expert slabs read in place, "
          "bit for bit as row-major") {
  // DeepEP's dispatch and DeepGEMM lay per-128 scales out [K / 128][rows] (low-latency
  // dispatch: one [K / 128][m] slab per expert, the masked layout); the kernel reads them
  // where they are (a_scale_k_stride, a_scale_expert_skew). Gaps of NaN between columns and
  // slabs catch a read from the wrong place; each case also runs with row-major scales on the
  // same data, and the outputs must be identical.
  TempDir dir;
  auto resolver = host_resolver(dir);
  int i = 0;
  for (Arch arch : kAct8MmaPaths) {
    CAPTURE(to_string(arch));
    HostLauncher host(arch);
    for (Layout layout : {Layout::indexed, Layout::contiguous, Layout::masked}) {
      const bool mx = i++ % 2 == 0;
      GemmCase c = act8_case(mx ? WeightFormat::mxfp4 : WeightFormat::int4_asym, mx ? DType::e8m0 : DType::bf16,
                             mx ? 32 : 128, ActScale::block128);
      c.layout = layout;
      c.k = 512;
      c.tokens = layout == Layout::masked ? 11 : 19;
      c.out = DType::f32;
      c.epilogue = layout == Layout::indexed ? Epilogue::silu_and_mul : Epilogue::none;
      CAPTURE(to_string(layout));
      const std::uint32_t seed = fresh_seed();
      const GemmOutcome row_major = run_gemm_case(*resolver, host, c, seed);
      c.a_scales_column_major = true;
      const GemmOutcome column_major = run_gemm_case(*resolver, host, c, seed);
      CHECK(column_major.written_rows > 0);
      CHECK(column_major.output == row_major.output);
    }
  }
}
