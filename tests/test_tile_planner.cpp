// The tile planner's routing arithmetic (dispatch/tile_configs.hpp) on numbers worked by hand,
// the mma facts it plans with, and where it picks sm_90a's wgmma tiles. The time model's own arithmetic is tested with the
// performance model (bench/perf_model/tests).

#include <doctest/doctest.h>

#include <cmath>
#include <optional>
#include <utility>
#include <tuple>

#include "dispatch/tile_configs.hpp"
#include "kernels/grouped_gemm.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"

using namespace moejit;
using namespace moejit::dispatch;

TEST_CASE("expected tiles with work: the binomial spread of routed rows") {
  // One token, top-8 of 256: 8 experts get one row each, one tile each.
  CHECK(expected_row_tiles(8, 256, 256, 8, 16) == doctest::Approx(8));
  // Two tokens top-1 of 2 experts: rows 0, 1, 2 with 1/4, 1/2, 1/4. Tiles of 1 row: 2 * 1 = 2;
  // of 2 rows: 2 * 3/4 = 1.5.
  CHECK(expected_row_tiles(2, 2, 2, 1, 1) == doctest::Approx(2));
  CHECK(expected_row_tiles(2, 2, 2, 1, 2) == doctest::Approx(1.5));
  // Every token on every expert (top-4 of 4): 10 rows in tiles of 4 are 3 per expert.
  CHECK(expected_row_tiles(40, 4, 4, 4, 4) == doctest::Approx(12));
  // Tiles taller than any expert's rows: one per busy expert, as expected_busy_experts counts
  // them (T = 100, top-8 of 512: 512 (1 - (63/64)^100) = 405.99472).
  CHECK(expected_row_tiles(800, 512, 512, 8, 128) == doctest::Approx(405.99471745).epsilon(1e-8));
  CHECK(expected_busy_experts(800, 512, 512, 8) == doctest::Approx(405.99471745).epsilon(1e-8));
  // Expert parallelism: 32 local experts of 256 see the same spread per expert, 1/8 the tiles.
  CHECK(expected_row_tiles(8192, 32, 256, 8, 32) ==
        doctest::Approx(expected_row_tiles(8192, 256, 256, 8, 32) / 8).epsilon(1e-12));
  // topk 0: 3 pairs landing independently on 3 experts, tiles of 2 rows. Rows ~ Binomial(3,
  // 1/3): P(1) = 12/27 and P(2) = 6/27 take one tile, P(3) = 1/27 two: 3 * 20/27 = 2.2222.
  CHECK(expected_row_tiles(3, 3, 3, 0, 2) == doctest::Approx(60.0 / 27));
  // Nothing routed, or no experts: no tiles.
  CHECK(expected_row_tiles(0, 256, 256, 8, 16) == 0);
  CHECK(expected_row_tiles(8, 0, 256, 8, 16) == 0);
}

TEST_CASE("expected tiles with work: tiles that just cover the mean leave many experts a second") {
  // T = 1024, top-8 of 256: rows ~ Binomial(1024, 1/32), mean 32. With tiles of 32 rows the
  // experts with more than 32 (P = 0.453165..., the binomial's upper tail summed exactly in
  // Python's integers) take a second: 1.4531656 tiles per expert, against 1.0 for tiles of 64.
  const double per_expert_32 = expected_row_tiles(8192, 256, 256, 8, 32) / 256;
  const double per_expert_64 = expected_row_tiles(8192, 256, 256, 8, 64) / 256;
  CHECK(per_expert_32 == doctest::Approx(1.4531656144).epsilon(1e-9));
  CHECK(per_expert_64 == doctest::Approx(1.0).epsilon(1e-6));
  // The mma work that follows: 46.5 rows per expert in 32-row tiles, 64 in 64-row ones.
  CHECK(per_expert_32 * 32 < 0.75 * per_expert_64 * 64);
  // Large T: the sum runs over the binomial's mass alone and stays exact (T = 65536, mean 2048
  // rows per expert of 32 in tiles of 128: 16 + the tail above 2048, about 16.5 tiles).
  const double large = expected_row_tiles(65536.0 * 8, 256, 256, 8, 128) / 256;
  CHECK(large > 16);
  CHECK(large < 17);
}

TEST_CASE("e4m3 mma.sync is native on sm_89 and sm_120/121 only") {
  CHECK(has_e4m3_mma(Arch::sm_89));
  CHECK(has_e4m3_mma(Arch::sm_120a));
  CHECK(has_e4m3_mma(Arch::sm_121a));
  CHECK_FALSE(has_e4m3_mma(Arch::sm_80));
  CHECK_FALSE(has_e4m3_mma(Arch::sm_90a));
  CHECK_FALSE(has_e4m3_mma(Arch::sm_100a));
  CHECK_FALSE(has_e4m3_mma(Arch::none));
}

namespace {

// DeepSeek-V3's gate/up projection at 100 rows per busy expert, every expert busy.
GemmWork prefill_work(WeightFormat weight, DType scale, std::uint32_t group, DType act) {
  GemmWork w;
  w.n = 4096;
  w.k = 7168;
  w.group_size = group;
  w.weight = weight;
  w.scale = scale;
  w.act = act;
  w.busy_experts = 256;
  w.rows_per_expert = 100;
  return w;
}

}  // namespace

TEST_CASE("sm_90a's MXFP4 and INT4 x bf16/f16 prefill tiles are the wgmma ones, and only there") {
  struct Weights {
    WeightFormat weight;
    DType scale;
    std::uint32_t group;
  };
  // MXFP4; INT4 with groups of 128 and 64 k and per-channel scales (group = K).
  for (const Weights f : {Weights{WeightFormat::mxfp4, DType::e8m0, 32}, Weights{WeightFormat::int4_sym, DType::bf16, 128},
                          Weights{WeightFormat::int4_asym, DType::f16, 64}, Weights{WeightFormat::int4_sym, DType::bf16, 7168}}) {
    GemmWork w = prefill_work(f.weight, f.scale, f.group, DType::bf16);
    CAPTURE(to_string(f.weight));
    CAPTURE(f.group);
    for (DType act : {DType::bf16, DType::f16}) {
      w.act = act;
      for (std::uint16_t bm : {32, 64, 128}) {
        CAPTURE(bm);
        // 100 rows per expert: a 32-row tile lies below them (the fused layer's shorter tiles),
        // and takes the wgmma shape alone.
        const TileConfig t = plan_gemm(w, bm, Arch::sm_90a, 132).tile;
        CHECK(t.bm == bm);
        CHECK(t.bn == 128);
        CHECK(t.bk == 128);
        CHECK(t.warps == 8);
        // 32 rows: the decode tiles' in-flight target; 64 rows: 4 (2 CTAs per SM); 128 rows (1
        // CTA per SM): as many as fit, 5 stages of about 41 KB in sm_90a's 227 KB.
        CHECK(t.stages == (bm == 32 ? 6 : bm == 64 ? 4 : 5));
        CHECK(gemm_uses_wgmma(Arch::sm_90a, w.weight, act, ActScale::none, w.group_size, t.bm, t.bn, t.bk, t.warps, t.stages, 1));
        // The plain sm_90 target, B200 and the RTX PRO 6000: the mma.sync tiles (4 warps for
        // 64 rows).
        for (Arch other : {Arch::sm_90, Arch::sm_100a, Arch::sm_120a}) {
          CAPTURE(to_string(other));
          const TileConfig o = plan_gemm(w, bm, other, 132).tile;
          CHECK(o.warps == (bm == 128 ? 8 : 4));
          CHECK_FALSE(gemm_uses_wgmma(other, w.weight, act, ActScale::none, w.group_size, o.bm, o.bn, o.bk, o.warps, o.stages, 1));
        }
      }
      // A K not a multiple of 128 (gpt-oss-120b's 2880): 64 k per stage.
      if (f.group <= 64) {
        GemmWork odd_k = w;
        odd_k.k = 2880;
        const TileConfig t = plan_gemm(odd_k, 64, Arch::sm_90a, 132).tile;
        CHECK(t.bk == 64);
        CHECK(gemm_uses_wgmma(Arch::sm_90a, w.weight, act, ActScale::none, w.group_size, t.bm, t.bn, t.bk, t.warps, t.stages, 1));
      }
      // 16-row tiles stay on mma.sync; at one token (decode) a 32-row tile that covers its rows
      // splits K on mma.sync, which the wgmma tiles do not.
      const TileConfig decode = plan_gemm(w, 16, Arch::sm_90a, 132).tile;
      CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, w.weight, act, ActScale::none, w.group_size, decode.bm, decode.bn, decode.bk,
                                  decode.warps, decode.stages, 1));
      GemmWork one_token = w;
      one_token.n = 1024;
      one_token.busy_experts = 8;
      one_token.rows_per_expert = 20;
      const GemmPlan small = plan_gemm(one_token, 32, Arch::sm_90a, 132);
      CHECK(small.split_k > 1);
      CHECK(small.tile.warps == 4);
    }
  }
  // INT4 with groups of 32 k (each group's sums would wait for its wgmma's): the mma.sync
  // prefill tiles.
  for (const auto& [weight, act, act_scale, group] :
       {std::tuple{WeightFormat::int4_sym, DType::bf16, ActScale::none, 32u},
        std::tuple{WeightFormat::int4_asym, DType::f16, ActScale::none, 32u},
        std::tuple{WeightFormat::int4_asym, DType::e4m3, ActScale::token, 32u},
        std::tuple{WeightFormat::int4_sym, DType::e4m3, ActScale::block128, 32u}}) {
    GemmWork w = prefill_work(weight, weight == WeightFormat::mxfp4 ? DType::e8m0 : DType::bf16, group, act);
    w.act_scale = act_scale;
    const TileConfig t = plan_gemm(w, 64, Arch::sm_90a, 132).tile;
    CHECK(t.warps == 4);
    CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, weight, act, act_scale, group, t.bm, t.bn, t.bk, t.warps, t.stages, 1));
  }
  // The rule itself: split-K, other shapes, fewer than three stages and INT4 groups of 32 k are
  // not wgmma tiles.
  CHECK(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::mxfp4, DType::bf16, ActScale::none, 32, 128, 128, 64, 8, 3, 1));
  CHECK(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::mxfp4, DType::bf16, ActScale::none, 32, 32, 128, 128, 8, 6, 1));
  CHECK(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::int4_asym, DType::f16, ActScale::none, 64, 128, 128, 64, 8, 4, 1));
  CHECK(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::int4_sym, DType::bf16, ActScale::none, 4096, 64, 128, 128, 8, 4, 1));
  CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::mxfp4, DType::bf16, ActScale::none, 32, 128, 128, 64, 8, 3, 2));
  CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::mxfp4, DType::bf16, ActScale::none, 32, 128, 128, 64, 8, 2, 1));
  CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::mxfp4, DType::bf16, ActScale::none, 32, 16, 128, 64, 8, 4, 1));
  CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::mxfp4, DType::bf16, ActScale::none, 32, 64, 128, 256, 8, 4, 1));
  CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::mxfp4, DType::bf16, ActScale::none, 32, 64, 256, 64, 8, 4, 1));
  CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::mxfp4, DType::bf16, ActScale::none, 32, 64, 128, 64, 4, 4, 1));
  CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::int4_asym, DType::f16, ActScale::none, 32, 128, 128, 64, 8, 4, 1));
  CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::int4_sym, DType::e4m3, ActScale::none, 128, 128, 128, 64, 8, 4, 1));
  // e4m3: INT4 (groups of 64 k or more) and MXFP4, with per-token scales at 128 or 64 k per
  // stage, with per-128-k ones at 128 k.
  CHECK(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::int4_sym, DType::e4m3, ActScale::token, 128, 128, 128, 128, 8, 4, 1));
  CHECK(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::int4_asym, DType::e4m3, ActScale::token, 64, 32, 128, 128, 8, 6, 1));
  CHECK(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::int4_sym, DType::e4m3, ActScale::block128, 128, 128, 128, 128, 8, 4, 1));
  CHECK(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::int4_asym, DType::e4m3, ActScale::block128, 4096, 64, 128, 128, 8, 4, 1));
  CHECK(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::int4_sym, DType::e4m3, ActScale::token, 128, 128, 128, 64, 8, 4, 1));
  CHECK(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::mxfp4, DType::e4m3, ActScale::token, 32, 128, 128, 128, 8, 4, 1));
  CHECK(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::mxfp4, DType::e4m3, ActScale::block128, 32, 64, 128, 128, 8, 4, 1));
  CHECK(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::mxfp4, DType::e4m3, ActScale::token, 32, 64, 128, 64, 8, 4, 1));
  CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::int4_sym, DType::e4m3, ActScale::block128, 128, 128, 128, 64, 8, 4, 1));
  CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::mxfp4, DType::e4m3, ActScale::block128, 32, 128, 128, 64, 8, 4, 1));
  CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::int4_sym, DType::e4m3, ActScale::block128, 32, 128, 128, 128, 8, 4, 1));
  CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::mxfp4, DType::e4m3, ActScale::token, 32, 128, 128, 256, 8, 4, 1));
  CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90a, WeightFormat::int4_sym, DType::e4m3, ActScale::token, 32, 128, 128, 128, 8, 4, 1));
  CHECK_FALSE(gemm_uses_wgmma(Arch::sm_90, WeightFormat::int4_sym, DType::bf16, ActScale::none, 128, 128, 128, 64, 8, 4, 1));
}

TEST_CASE("sm_90a's W4A8 prefill tiles (INT4 and MXFP4, activation scales per token or per 128 k) are the e4m3 wgmma ones") {
  for (const auto& [weight, scale, group] : {std::tuple{WeightFormat::int4_sym, DType::bf16, 128u},
                                             std::tuple{WeightFormat::int4_asym, DType::f16, 64u},
                                             std::tuple{WeightFormat::int4_sym, DType::bf16, 7168u},
                                             std::tuple{WeightFormat::mxfp4, DType::e8m0, 32u}}) {
    CAPTURE(to_string(weight));
    CAPTURE(group);
    GemmWork w = prefill_work(weight, scale, group, DType::e4m3);
    w.act_scale = ActScale::token;
    // (MXFP4's 32-row mma.sync tile issues fewer instructions per weight than the e4m3 wgmma one
    // and keeps those rows.)
    for (std::uint16_t bm : weight == WeightFormat::mxfp4 ? std::vector<std::uint16_t>{64, 128}
                                                          : std::vector<std::uint16_t>{32, 64, 128}) {
      CAPTURE(bm);
      const TileConfig t = plan_gemm(w, bm, Arch::sm_90a, 132).tile;
      CHECK(t.bm == bm);
      CHECK(t.bn == 128);
      CHECK(t.bk == 128);
      CHECK(t.warps == 8);
      CHECK(gemm_uses_wgmma(Arch::sm_90a, weight, DType::e4m3, ActScale::token, group, t.bm, t.bn, t.bk, t.warps,
                            t.stages, 1));
      // The same with per-128-k scales (each stage carries its rows' scales: more shared
      // memory, the same tile); on the other targets, mma.sync.
      GemmWork block = w;
      block.act_scale = ActScale::block128;
      const TileConfig b = plan_gemm(block, bm, Arch::sm_90a, 132).tile;
      CHECK(b.bm == bm);
      CHECK(b.bk == 128);
      CHECK(gemm_uses_wgmma(Arch::sm_90a, weight, DType::e4m3, ActScale::block128, group, b.bm, b.bn, b.bk, b.warps,
                            b.stages, 1));
      for (Arch other : {Arch::sm_89, Arch::sm_100a, Arch::sm_120a})
        for (const GemmWork& work : {w, block}) {
          const TileConfig o = plan_gemm(work, bm, other, 132).tile;
          CHECK_FALSE(gemm_uses_wgmma(other, weight, DType::e4m3, work.act_scale, group, o.bm, o.bn, o.bk, o.warps,
                                      o.stages, 1));
        }
    }
    // A K that is no multiple of 128 (gpt-oss-120b's 2880) takes 64 k per stage, a row of the
    // 64-byte swizzle, at 128 rows (per-token scales; per 128 k, K must be a multiple of 128).
    GemmWork odd_k = w;
    odd_k.k = 2880;
    odd_k.group_size = group == 7168 ? 2880 : group == 128 ? 64 : group;
    const TileConfig t = plan_gemm(odd_k, 128, Arch::sm_90a, 132).tile;
    CHECK(t.bk == 64);
    CHECK(gemm_uses_wgmma(Arch::sm_90a, weight, DType::e4m3, ActScale::token, odd_k.group_size, t.bm, t.bn, t.bk,
                          t.warps, t.stages, 1));
  }
}

TEST_CASE("the planner sizes a tile's stages by its A elements' width: e4m3 and e2m1 rows take half and a quarter of a 16-bit one") {
  // sm_120a opts a block into 99 KB: the 32 x 128 x 128 MXFP4 tile holds 5 stages with 16-bit
  // activations and 6 (the most the planner gives) with e4m3 or e2m1 ones, whose A rows are
  // smaller. Every planned tile fits with the bytes the kernel really takes.
  const std::uint32_t limit = arch_info(Arch::sm_120a).max_shared_per_block;
  auto tile_of = [](DType act, ActScale act_scale) -> std::optional<TileConfig> {
    for (const TileConfig& t :
         gemm_tile_configs(Arch::sm_120a, 2560, WeightFormat::mxfp4, DType::e8m0, 32, act, act_scale))
      if (t.bm == 32 && t.bn == 128 && t.bk == 128) return t;
    return std::nullopt;
  };
  auto shared = [](const TileConfig& t, std::uint32_t stages, std::uint32_t bits) {
    return gemm_shared_bytes(t.bm, t.bn, t.bk, stages, 32, 1, false, bits, false, false);
  };
  const auto bf16 = tile_of(DType::bf16, ActScale::none);
  const auto e4m3 = tile_of(DType::e4m3, ActScale::token);
  const auto e2m1 = tile_of(DType::e2m1, ActScale::block32);
  REQUIRE(bf16);
  REQUIRE(e4m3);
  REQUIRE(e2m1);
  CHECK(bf16->stages == 5);
  CHECK(shared(*bf16, 6, 16) > limit);
  CHECK(e4m3->stages == 6);
  CHECK(e2m1->stages == 6);
  CHECK(shared(*e4m3, 6, gemm_act_bits(DType::e4m3)) <= limit);
  CHECK(gemm_act_bits(DType::e4m3) == 8);
  CHECK(gemm_act_bits(DType::e2m1) == 4);
  CHECK(gemm_act_bits(DType::f16) == 16);
  for (Arch arch : {Arch::sm_89, Arch::sm_90a, Arch::sm_100a, Arch::sm_120a})
    for (const auto& [act, act_scale] : {std::pair{DType::e4m3, ActScale::token}, std::pair{DType::e4m3, ActScale::block128},
                                         std::pair{DType::bf16, ActScale::none}})
      for (const TileConfig& t : gemm_tile_configs(arch, 2048, WeightFormat::int4_sym, DType::bf16, 128, act, act_scale)) {
        const bool wgmma = gemm_uses_wgmma(arch, WeightFormat::int4_sym, act, act_scale, 128, t.bm, t.bn, t.bk, t.warps,
                                           t.stages, 1);
        CHECK(gemm_shared_bytes(t.bm, t.bn, t.bk, t.stages, t.bk <= 128 ? t.bk : 128, 2, false, gemm_act_bits(act), wgmma,
                                gemm_stages_row_scales(wgmma, act, act_scale)) <= arch_info(arch).max_shared_per_block);
      }
}
