#pragma once
// The grouped GEMM's sm_90a warpgroup-MMA tile cases (templates/gemm/grouped_gemm_wgmma.cuh),
// one list for both backends: the host suite runs them on the host backend
// (tests/test_gemm_host_wgmma.cpp), the device suite on an sm_90a GPU
// (tests/test_device_gemm.cpp). Each case forces a tile that takes the wgmma path; the runner
// checks that it does before running it.

#include <string>
#include <vector>

#include "gemm_case.hpp"

namespace moejit::test {

struct NamedGemmCase {
  std::string name;
  GemmCase c;
};

inline GemmCase wgmma_case(std::uint16_t bm, std::uint8_t stages, DType act, std::uint16_t bk = 64) {
  GemmCase c;
  c.tile = dispatch::TileConfig{bm, 128, bk, stages, 8};
  c.act = act;
  return c;
}

// INT4 weights on a wgmma tile; e4m3 activations scaled per token unless `act_scale` says.
inline GemmCase int4_wgmma_case(WeightFormat weight, DType scale, std::uint32_t group, std::uint16_t bm,
                                std::uint8_t stages, DType act, std::uint16_t bk, ActScale act_scale = ActScale::token) {
  GemmCase c = wgmma_case(bm, stages, act, bk);
  c.weight = weight;
  c.scale = scale;
  c.group = group;
  if (act == DType::e4m3) c.act_scale = act_scale;
  return c;
}

// MXFP4 x 16-bit activations: the three tile heights, 64 and 128 k per stage (the A tile's 64-k
// blocks), every layout and epilogue, stage counts below, at and past the pipeline's slots, N
// not a multiple of the tile.
inline std::vector<NamedGemmCase> wgmma_tile_cases() {
  std::vector<NamedGemmCase> out;
  {
    GemmCase c = wgmma_case(128, 3, DType::bf16);
    c.epilogue = Epilogue::silu_and_mul;
    c.bias = true;
    c.n = 160;
    c.k = 192;
    c.tokens = 70;
    c.topk = 4;
    out.push_back({"128 rows, bf16, indexed, silu_and_mul with bias, N 160, 3 k stages (a pair and the odd one)", c});
  }
  {
    GemmCase c = wgmma_case(64, 4, DType::f16);
    c.epilogue = Epilogue::swiglu_oai;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.n = 256;
    c.k = 256;
    c.tokens = 150;
    out.push_back({"64 rows, f16, contiguous, swiglu_oai, f32 out, 4 k stages", c});
  }
  {
    GemmCase c = wgmma_case(128, 3, DType::bf16);
    c.layout = Layout::masked;
    c.k = 320;
    c.tokens = 140;
    out.push_back({"128 rows, bf16, masked, no epilogue, 5 k stages", c});
  }
  {
    GemmCase c = wgmma_case(64, 5, DType::f16);
    c.epilogue = Epilogue::topk_weight;
    c.n = 96;
    c.k = 128;
    c.tokens = 45;
    c.a_per_pair = true;
    out.push_back({"64 rows, f16, indexed, topk_weight, N 96, 2 k stages, one A row per pair", c});
  }
  {
    GemmCase c = wgmma_case(128, 4, DType::bf16);
    c.k = 64;
    c.tokens = 1;
    c.drop_blocks = true;
    out.push_back({"128 rows, bf16, indexed, one k stage (the odd one alone), one token, blocks dropped", c});
  }
  {
    GemmCase c = wgmma_case(32, 3, DType::bf16, 128);
    c.epilogue = Epilogue::silu_and_mul;
    c.bias = true;
    c.n = 160;
    c.k = 640;
    c.tokens = 40;
    c.topk = 4;
    out.push_back({"32 rows, bf16, indexed, silu_and_mul with bias, N 160, 128 k, 5 k stages", c});
  }
  {
    GemmCase c = wgmma_case(32, 4, DType::f16);
    c.epilogue = Epilogue::topk_weight;
    c.k = 256;
    c.tokens = 30;
    c.a_per_pair = true;
    out.push_back({"32 rows, f16, indexed, topk_weight, 64 k, 4 k stages, one A row per pair", c});
  }
  {
    GemmCase c = wgmma_case(64, 4, DType::bf16, 128);
    c.epilogue = Epilogue::swiglu_oai;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.k = 256;
    c.tokens = 150;
    out.push_back({"64 rows, bf16, contiguous, swiglu_oai, f32 out, 128 k, 2 k stages", c});
  }
  {
    GemmCase c = wgmma_case(128, 3, DType::f16, 128);
    c.layout = Layout::masked;
    c.n = 96;
    c.k = 384;
    c.tokens = 140;
    out.push_back({"128 rows, f16, masked, no epilogue, 128 k, 3 k stages, N 96", c});
  }
  {
    GemmCase c = wgmma_case(64, 4, DType::f16, 128);
    c.k = 128;
    c.tokens = 1;
    c.drop_blocks = true;
    out.push_back({"64 rows, f16, indexed, 128 k, one k stage, one token, blocks dropped", c});
  }
  return out;
}

// MXFP4 experts whose scales cannot be folded into the B fragment take the mma.sync path inside
// the same kernel (which reads the same A tile): edge bytes in some experts, odd experts spanning
// more binades than either fragment path folds, and the fragment path at its extreme offsets.
inline std::vector<NamedGemmCase> wgmma_fallback_cases() {
  std::vector<NamedGemmCase> out;
  for (DType act : {DType::bf16, DType::f16}) {
    const std::string a(to_string(act));
    for (GemmCase c : edge_scale_lane_cases())  // some experts with an edge byte, the others not
      for (const auto& tile : {wgmma_case(128, 3, act).tile, wgmma_case(32, 3, act, 128).tile}) {
        c.tile = tile;
        c.act = act;
        out.push_back({a + ", edge scale bytes in some experts: " + describe(c), c});
      }
    {
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
      out.push_back({a + ", odd experts spanning 2^-40 .. 2^40, even ones quantized: both paths in one launch", c});
    }
    for (GemmCase c : extreme_window_cases()) {
      if (c.act != act) continue;
      c.tile = wgmma_case(64, 3, act).tile;
      out.push_back({a + ", the fragment path at its extreme offsets: " + describe(c), c});
    }
  }
  return out;
}

// INT4 weights x 16-bit activations, whose scale groups are summed apart: groups of half a
// stage, one stage, two stages, and per channel.
inline std::vector<NamedGemmCase> wgmma_int4_cases() {
  std::vector<NamedGemmCase> out;
  {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_sym, DType::bf16, 128, 128, 3, DType::bf16, 128);
    c.epilogue = Epilogue::silu_and_mul;
    c.bias = true;
    c.n = 160;
    c.k = 384;
    c.tokens = 70;
    c.topk = 4;
    out.push_back({"128 rows, bf16, symmetric, bf16 scales, g128 = one stage, indexed, silu_and_mul with bias, N 160", c});
  }
  {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_asym, DType::f16, 64, 64, 4, DType::f16, 128);
    c.epilogue = Epilogue::swiglu_oai;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.n = 256;
    c.k = 512;
    c.tokens = 150;
    out.push_back({"64 rows, f16, zero points, f16 scales, g64 = half a stage, contiguous, swiglu_oai, f32 out", c});
  }
  {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_asym, DType::bf16, 128, 32, 3, DType::bf16, 64);
    c.layout = Layout::masked;
    c.k = 384;
    c.tokens = 40;
    out.push_back({"32 rows, bf16, zero points, bf16 scales, g128 = two 64-k stages, masked, 6 k stages", c});
  }
  {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_sym, DType::bf16, 128, 32, 4, DType::f16, 64);
    c.epilogue = Epilogue::topk_weight;
    c.k = 512;
    c.tokens = 30;
    c.a_per_pair = true;
    out.push_back({"32 rows, f16, symmetric, bf16 scales, g128 across two 64-k stages, indexed, topk_weight, one A row per pair", c});
  }
  {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_asym, DType::f16, 384, 64, 3, DType::bf16, 128);
    c.n = 96;
    c.k = 384;
    c.tokens = 45;
    out.push_back({"64 rows, bf16, zero points, f16 scales, per channel (group = K, 3 stages), N 96", c});
  }
  {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_sym, DType::f16, 256, 128, 4, DType::f16, 64);
    c.k = 256;
    c.tokens = 1;
    c.drop_blocks = true;
    out.push_back({"128 rows, f16, symmetric, f16 scales, per channel with 64 k per stage, one token, blocks dropped", c});
  }
  {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_asym, DType::bf16, 64, 64, 3, DType::bf16, 64);
    c.epilogue = Epilogue::topk_weight;
    c.bias = true;
    c.k = 320;
    c.tokens = 90;
    out.push_back({"64 rows, bf16, zero points, bf16 scales, g64 = one stage, 5 stages (past the slots), bias, topk_weight", c});
  }
  return out;
}

// W4A8: INT4 weights x e4m3 activations scaled per token or per 128 k (those stored
// column-major in two of the cases, as DeepEP's dispatch and DeepGEMM lay them out, in
// [E][K / 128][m] slabs for the masked layout).
inline std::vector<NamedGemmCase> wgmma_w4a8_cases(ActScale act_scale) {
  std::vector<NamedGemmCase> out;
  const bool block = act_scale == ActScale::block128;
  auto w4a8_case = [&](WeightFormat weight, DType scale, std::uint32_t group, std::uint16_t bm, std::uint8_t stages) {
    return int4_wgmma_case(weight, scale, group, bm, stages, DType::e4m3, 128, act_scale);
  };
  {
    GemmCase c = w4a8_case(WeightFormat::int4_sym, DType::bf16, 128, 128, 3);
    c.epilogue = Epilogue::silu_and_mul;
    c.bias = true;
    c.n = 160;
    c.k = 384;
    c.tokens = 70;
    c.topk = 4;
    out.push_back({"128 rows, symmetric, bf16 scales, g128 = one stage, indexed, silu_and_mul with bias, N 160", c});
  }
  {
    GemmCase c = w4a8_case(WeightFormat::int4_asym, DType::f16, 64, 64, 4);
    c.epilogue = Epilogue::swiglu_oai;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.a_scales_column_major = block;
    c.n = 256;
    c.k = 512;
    c.tokens = 150;
    out.push_back({"64 rows, zero points, f16 scales, g64 = half a stage, contiguous, swiglu_oai, f32 out", c});
  }
  {
    GemmCase c = w4a8_case(WeightFormat::int4_asym, DType::bf16, 768, 32, 3);
    c.layout = Layout::masked;
    c.a_scales_column_major = block;
    c.k = 768;
    c.tokens = 40;
    out.push_back({"32 rows, zero points, bf16 scales, per channel (group = K), masked, 6 stages (past the slots)", c});
  }
  {
    GemmCase c = w4a8_case(WeightFormat::int4_sym, DType::f16, 64, 64, 4);
    c.epilogue = Epilogue::topk_weight;
    c.k = 256;
    c.tokens = 30;
    c.a_per_pair = true;
    out.push_back({"64 rows, symmetric, f16 scales, g64, indexed, topk_weight, one A row per pair", c});
  }
  {
    GemmCase c = w4a8_case(WeightFormat::int4_sym, DType::f16, 768, 64, 4);
    c.epilogue = Epilogue::topk_weight;
    c.k = 768;
    c.tokens = 30;
    out.push_back({"64 rows, symmetric, f16 scales, per channel over 6 stages, indexed, topk_weight", c});
  }
  {
    GemmCase c = w4a8_case(WeightFormat::int4_asym, DType::f16, 128, 128, 4);
    c.k = 256;
    c.tokens = 1;
    c.drop_blocks = true;
    out.push_back({"128 rows, zero points, f16 scales, g128, one token, blocks dropped", c});
  }
  {
    GemmCase c = w4a8_case(WeightFormat::int4_asym, DType::bf16, 128, 64, 3);
    c.a_edge_bytes = true;
    c.layout = Layout::contiguous;
    c.out = DType::f32;
    c.k = 384;
    c.tokens = 77;
    out.push_back({"64 rows, zero points, bf16 scales, g128: NaN codes make their rows NaN, +-448 and subnormal codes exact", c});
  }
  if (!block) {  // 64 k per stage (K not a multiple of 128): the 64-byte swizzle
    GemmCase c = int4_wgmma_case(WeightFormat::int4_asym, DType::bf16, 64, 64, 4, DType::e4m3, 64, act_scale);
    c.epilogue = Epilogue::topk_weight;
    c.k = 320;
    c.tokens = 60;
    out.push_back({"64 rows, zero points, bf16 scales, g64, 64 k per stage, K 320 (5 stages), topk_weight", c});
  }
  for (int shift : {-120, 100}) {
    GemmCase c = w4a8_case(WeightFormat::int4_sym, DType::bf16, 128, 64, 3);
    c.a_exponent_shift = shift;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.k = 256;
    c.tokens = 70;
    out.push_back({"64 rows, activation scales near 2^" + std::to_string(shift), c});
  }
  return out;
}

// W4A8 with MXFP4 weights: each block's E8M0 byte folded into its e4m3 weight bytes (one block
// per 32-k wgmma), for experts whose scale bytes span at most 11 binades; the others take the
// mma.sync path of the same kernel. Every layout and epilogue, the three heights, and the fold's
// edges: spans of 11 (folded) and 12 (not), largest bytes at the plain window's ends (63 and 190
// fold, 62 and 191 do not), bytes near the top of the range, NaN bytes, all-zero blocks with a
// 0x00 scale (which never widen a range), e4m3 edge codes.
inline std::vector<NamedGemmCase> wgmma_mxfp4_w4a8_cases(ActScale act_scale) {
  std::vector<NamedGemmCase> out;
  const bool block = act_scale == ActScale::block128;
  auto mx_case = [&](std::uint16_t bm, std::uint8_t stages, std::uint16_t bk = 128) {
    GemmCase c = wgmma_case(bm, stages, DType::e4m3, bk);
    c.act_scale = act_scale;
    return c;
  };
  // Every block of expert e gets a byte in [low(e), low(e) + span(e)], spread by a fixed LCG.
  auto scale_window = [](auto low_of, auto span_of) {
    return [low_of, span_of](quant::QuantizedWeights& q) {
      std::uint32_t x = 2024;
      for (std::uint32_t e = 0; e < q.experts; ++e)
        for (std::uint32_t col = 0; col < q.n; ++col)
          for (std::uint32_t g = 0; g < q.groups(); ++g) {
            x = x * 1103515245u + 12345u;
            const std::uint32_t span = span_of(e);
            q.scales[q.group_index(e, col, g)] = static_cast<std::uint16_t>(low_of(e) + (x >> 16) % (span + 1));
          }
    };
  };
  {
    GemmCase c = mx_case(128, 3);
    c.epilogue = Epilogue::silu_and_mul;
    c.bias = true;
    c.n = 160;
    c.k = 384;
    c.tokens = 70;
    c.topk = 4;
    out.push_back({"128 rows, indexed, silu_and_mul with bias, N 160, 3 stages", c});
  }
  {
    GemmCase c = mx_case(64, 4);
    c.epilogue = Epilogue::swiglu_oai;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.a_scales_column_major = block;
    c.n = 256;
    c.k = 512;
    c.tokens = 150;
    out.push_back({"64 rows, contiguous, swiglu_oai, f32 out, 4 stages", c});
  }
  {
    GemmCase c = mx_case(32, 3);
    c.layout = Layout::masked;
    c.a_scales_column_major = block;
    c.k = 768;
    c.tokens = 40;
    out.push_back({"32 rows, masked, 6 stages (past the slots)", c});
  }
  {
    GemmCase c = mx_case(64, 4);
    c.epilogue = Epilogue::topk_weight;
    c.k = 256;
    c.tokens = 30;
    c.a_per_pair = true;
    out.push_back({"64 rows, indexed, topk_weight, one A row per pair", c});
  }
  {
    GemmCase c = mx_case(128, 4);
    c.k = 256;
    c.tokens = 1;
    c.drop_blocks = true;
    out.push_back({"128 rows, one token, blocks dropped", c});
  }
  {
    // Odd experts span 11 binades (folded), even ones 12 (the mma.sync path, plain window).
    GemmCase c = mx_case(64, 3);
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.k = 384;
    c.tokens = 90;
    c.edit = scale_window([](std::uint32_t) { return 0x70u; }, [](std::uint32_t e) { return e % 2 ? 11u : 12u; });
    out.push_back({"64 rows, scale bytes spanning 11 binades in odd experts (folded) and 12 in even ones", c});
  }
  for (bool top : {true, false}) {
    // The plain window's edges: odd experts' largest byte 190 (top) or 63 (folded), even ones'
    // 191 or 62 (the mma.sync path), 11 binades each; activations that keep the outputs normal.
    GemmCase c = mx_case(top ? 128 : 32, 3);
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.a_exponent_shift = top ? -60 : 60;
    c.k = 256;
    c.tokens = 100;
    const std::uint32_t odd_low = top ? 190 - 11 : 63 - 11, even_low = top ? 191 - 11 : 62 - 11;
    c.edit = scale_window([odd_low, even_low](std::uint32_t e) { return e % 2 ? odd_low : even_low; },
                          [](std::uint32_t) { return 11u; });
    out.push_back({std::string(top ? "128" : "32") + " rows, largest scale byte " + (top ? "190 / 191" : "63 / 62") +
                       " in odd / even experts (folded / not), activations near 2^" + (top ? "-60" : "60"),
                   c});
  }
  {
    // Bytes near the top of the range (2^113 .. 2^124, the mma.sync path), activations small
    // enough that nothing overflows; expert 3 has a NaN block (its outputs NaN where it is used).
    GemmCase c = mx_case(32, 4);
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.a_exponent_shift = -120;
    c.k = 512;
    c.tokens = 40;
    c.edit = [window = scale_window([](std::uint32_t) { return 0xf0u; }, [](std::uint32_t) { return 11u; })](
                 quant::QuantizedWeights& q) {
      window(q);
      q.scales[q.group_index(3, 5, 2)] = 0xff;
    };
    out.push_back({"32 rows, scale bytes 0xF0 .. 0xFB (not folded), a NaN byte in expert 3, activations near 2^-120", c});
  }
  {
    // Whole blocks of zero codes with a 0x00 scale in every expert: a folded expert all the same.
    GemmCase c = mx_case(64, 3);
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.k = 256;
    c.tokens = 60;
    c.edit = [](quant::QuantizedWeights& q) {
      for (std::uint32_t e = 0; e < q.experts; ++e)
        for (std::uint32_t col = e % 4; col < q.n; col += 9) {
          const std::uint32_t g = (col + e) % q.groups();
          for (std::uint32_t i = 0; i < 32; ++i) q.codes[q.code_index(e, col, 32 * g + i)] = (i % 3 == 0) ? 8 : 0;
          q.scales[q.group_index(e, col, g)] = 0;
        }
    };
    out.push_back({"64 rows, all-zero blocks (+0 and -0 codes) with a 0x00 scale, folded", c});
  }
  {
    GemmCase c = mx_case(64, 3);
    c.a_edge_bytes = true;
    c.layout = Layout::contiguous;
    c.out = DType::f32;
    c.k = 384;
    c.tokens = 77;
    out.push_back({"64 rows: NaN codes make their rows NaN, +-448 and subnormal codes exact", c});
  }
  if (!block) {  // 64 k per stage (K not a multiple of 128): the 64-byte swizzle; per-token scales only
    {
      GemmCase c = mx_case(64, 4, 64);
      c.epilogue = Epilogue::silu_and_mul;
      c.bias = true;
      c.n = 160;
      c.k = 320;
      c.tokens = 70;
      c.topk = 4;
      out.push_back({"64 rows, 64 k per stage, K 320 (5 stages), indexed, silu_and_mul with bias, N 160", c});
    }
    {
      GemmCase c = mx_case(128, 3, 64);
      c.out = DType::f32;
      c.layout = Layout::contiguous;
      c.k = 192;
      c.tokens = 140;
      c.edit = scale_window([](std::uint32_t) { return 0x70u; }, [](std::uint32_t e) { return e % 2 ? 11u : 12u; });
      out.push_back({"128 rows, 64 k per stage, K 192, spans of 11 (folded) and 12 binades (the mma.sync path)", c});
    }
  }
  return out;
}

// Tiles whose rows fit a quarter or half of the tile run wgmma's of that N (run_tile_wgmma):
// experts with 0, BM / 4, BM / 4 + 1, BM / 2, BM / 2 + 1, BM, BM + 1 and 2 BM - 1 rows, so that
// each height takes each N, alone and as an expert's last tile: MXFP4 with 16-bit and e4m3
// activations, INT4 per channel; and routing with padding between the rows of a tile (a
// caller's own align), whose holes are multiplied like rows. The tiles that keep a second set
// of sums (INT4 scale groups summed apart, e4m3 scaled per 128 k) take the same row counts and
// holes.
inline std::vector<NamedGemmCase> wgmma_row_cases() {
  std::vector<NamedGemmCase> out;
  auto rows_of = [](std::uint16_t bm) {
    const std::int32_t b = bm;
    return std::vector<std::int32_t>{0, b / 4, b / 4 + 1, b / 2, b / 2 + 1, b, b + 1, 2 * b - 1};
  };
  for (std::uint16_t bm : {32, 64, 128}) {
    const std::string h = std::to_string(bm) + " rows";
    {
      GemmCase c = wgmma_case(bm, 3, DType::bf16, 128);
      c.layout = Layout::contiguous;
      c.epilogue = Epilogue::silu_and_mul;
      c.expert_rows = rows_of(bm);
      out.push_back({h + ", MXFP4 x bf16, contiguous, silu_and_mul", c});
    }
    {
      GemmCase c = int4_wgmma_case(WeightFormat::int4_asym, DType::f16, 64, bm, 3, DType::f16, 128);
      c.layout = Layout::masked;
      c.tokens = 2 * bm - 1;
      c.expert_rows = rows_of(bm);
      out.push_back({h + ", INT4 zero points g64 x f16, masked", c});
    }
    {
      GemmCase c = int4_wgmma_case(WeightFormat::int4_sym, DType::bf16, 128, bm, 3, DType::e4m3, 128,
                                   bm == 64 ? ActScale::block128 : ActScale::token);
      c.layout = Layout::contiguous;
      c.out = DType::f32;
      c.expert_rows = rows_of(bm);
      out.push_back({h + ", INT4 x e4m3 per " + std::string(bm == 64 ? "128 k" : "token") + ", contiguous", c});
    }
  }
  {
    GemmCase c = int4_wgmma_case(WeightFormat::int4_asym, DType::bf16, 256, 64, 3, DType::bf16, 128);
    c.layout = Layout::contiguous;
    c.epilogue = Epilogue::swiglu_oai;
    c.expert_rows = rows_of(64);
    out.push_back({"64 rows, INT4 zero points per channel x bf16, contiguous, swiglu_oai", c});
  }
  {
    GemmCase c = wgmma_case(64, 3, DType::e4m3, 128);
    c.act_scale = ActScale::token;
    c.layout = Layout::masked;
    c.tokens = 127;
    c.expert_rows = rows_of(64);
    out.push_back({"64 rows, MXFP4 x e4m3 per token (scales folded), masked", c});
  }
  // Padding between a tile's rows: indexed routing, top-4, rows a 64- or 128-row tile's worth.
  auto with_holes = [&](GemmCase c, const std::string& what) {
    const std::uint16_t bm = c.tile.bm;
    c.epilogue = Epilogue::topk_weight;
    c.tokens = bm == 64 ? 40 : 90;
    c.topk = 4;
    c.padding_holes = true;
    out.push_back({std::to_string(bm) + " rows, " + what + ", indexed, padding between a tile's rows", c});
  };
  for (std::uint16_t bm : {64, 128}) with_holes(wgmma_case(bm, 3, DType::bf16, 128), "MXFP4 x bf16");
  with_holes(int4_wgmma_case(WeightFormat::int4_asym, DType::bf16, 64, 64, 3, DType::bf16, 128),
             "INT4 zero points g64 x bf16");
  with_holes(int4_wgmma_case(WeightFormat::int4_sym, DType::bf16, 128, 128, 3, DType::e4m3, 128, ActScale::block128),
             "INT4 g128 x e4m3 per 128 k");
  return out;
}

}  // namespace moejit::test
