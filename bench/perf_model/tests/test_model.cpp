// The model's arithmetic on numbers worked out by hand (in the comments).

#include <doctest/doctest.h>

#include "bench/perf_model/model.hpp"

using namespace moejit;
using namespace moejit::perf;

namespace {

// An H200-like device written out here, so that edits to the profile table do not move these
// numbers: 132 SMs, 1.98 GHz, 4.8 TB/s, 228 KB shared, 64 K registers, 2048 threads and 32
// blocks per SM, 700 ns loaded latency.
DeviceProfile test_device() {
  return DeviceProfile{"test", Arch::sm_90a, 132, 1.98, 4.8e12, 228 * 1024, 65536, 2048, 32, 50ull << 20, 700, 0.5,
                       "test", "test"};
}

BoundInputs decode_inputs() {
  BoundInputs in;
  in.sms = 132;
  in.clock_ghz = 1.98;
  in.bandwidth = 4.8e12;
  in.latency_ns = 700;
  in.bytes_per_warp_instruction = 1.0;
  in.stage_bytes = 4352;  // 16x128x64 mxfp4 stage: 4096 weight + 256 scale bytes
  in.stages = 4;
  in.stages_per_cta = 32;  // K 2048 / bk 64: 32 x 4352 = 139264 bytes per CTA
  in.warps_per_cta = 4;
  in.ctas_per_sm = 7;
  in.ctas = 256;
  return in;
}

}  // namespace

TEST_CASE("occupancy: registers, shared memory, threads and blocks per SM") {
  const DeviceProfile d = test_device();

  // 66 registers -> 72 per thread (multiple of 8) -> 2304 per warp; 65536 / 2304 = 28 warps = 7
  // CTAs of 4 warps. Shared: 25856 + 1024 reserved = 26880; 233472 / 26880 = 8. Threads: 16.
  Occupancy o = occupancy({66, 128, 25856}, d);
  CHECK(o.registers_per_warp == 2304);
  CHECK(o.by_registers == 7);
  CHECK(o.shared_per_block == 26880);
  CHECK(o.by_shared == 8);
  CHECK(o.by_threads == 16);
  CHECK(o.by_blocks == 32);
  CHECK(o.ctas_per_sm == 7);
  CHECK(o.limiter == "registers");

  // 96 registers -> 3072 per warp -> 21 warps -> 5 CTAs of 4 warps.
  CHECK(occupancy({96, 128, 26368}, d).ctas_per_sm == 5);

  // 32 registers, 8 warps: 1024 per warp -> 64 warps -> 8 CTAs; shared 100000 + 1024 -> 2 CTAs.
  o = occupancy({32, 256, 100000}, d);
  CHECK(o.by_registers == 8);
  CHECK(o.by_shared == 2);
  CHECK(o.ctas_per_sm == 2);
  CHECK(o.limiter == "shared");

  // 16 registers, 1024 threads: 512 per warp -> 128 warps -> 4 CTAs; threads: 2048 / 1024 = 2.
  o = occupancy({16, 1024, 0}, d);
  CHECK(o.ctas_per_sm == 2);
  CHECK(o.limiter == "threads");

  // A tiny kernel: 32 blocks per SM is the limit.
  o = occupancy({8, 32, 0}, d);
  CHECK(o.ctas_per_sm == 32);
  CHECK(o.limiter == "blocks");

  // Shared memory that does not fit: no CTA.
  CHECK(occupancy({32, 128, 240 * 1024}, d).ctas_per_sm == 0);
}

TEST_CASE("expected active tiles from the binomial routing") {
  // T = 1, top-8 of 256 experts: each expert gets the token with p = 1/32; one row is one tile:
  // 256 * 1/32 = 8 tiles.
  CHECK(expected_active_tiles(1, 8, 256, 16) == doctest::Approx(8));
  // T = 2, top-1 of 2: rows ~ Binomial(2, 1/2) = 0, 1, 2 with 1/4, 1/2, 1/4.
  // bm 1: E[rows] = 1 -> 2 experts * 1 = 2 tiles. bm 2: P(rows >= 1) = 3/4 -> 1.5 tiles.
  CHECK(expected_active_tiles(2, 1, 2, 1) == doctest::Approx(2));
  CHECK(expected_active_tiles(2, 1, 2, 2) == doctest::Approx(1.5));
  // Every token on the one expert: 3 rows in tiles of 2 = 2 tiles.
  CHECK(expected_active_tiles(3, 1, 1, 2) == doctest::Approx(2));
  // Tiles much taller than the rows an expert gets: tiles = active experts,
  // 512 * (1 - (63/64)^100) = 405.99472 for T = 100, top-8 of 512.
  CHECK(expected_active_tiles(100, 8, 512, 16) == doctest::Approx(405.99471745).epsilon(1e-8));
  CHECK(expected_active_experts(100, 8, 512) == doctest::Approx(405.99471745).epsilon(1e-8));
  // T = 4096, top-8 of 128, bm 128: rows ~ Binomial(4096, 1/16), mean 256; E[ceil(rows / 128)]
  // = 2 + P(rows > 256) + ... = 2.48338; times 128 = 317.87226 (exact rational arithmetic).
  CHECK(expected_active_tiles(4096, 8, 128, 128) == doctest::Approx(317.87226194).epsilon(1e-8));
  CHECK(expected_active_tiles(0, 8, 128, 16) == 0);
}

TEST_CASE("expected rows the wgmma tiles multiply: each expert's last tile in quarters, halves or whole") {
  // T = 2, top-1 of 2, bm 4: rows 0, 1, 2 with 1/4, 1/2, 1/4; one row takes a quarter (1), two a
  // half (2): 2 experts * (1/2 + 1/2) = 2 rows, where the tiles hold 1.5 * 4 = 6.
  CHECK(expected_wgmma_rows(2, 1, 2, 4) == doctest::Approx(2));
  // Every token on the one expert: 3 rows of bm 8 take half the tile (4); 5 rows of bm 4 a whole
  // tile and a quarter (5); 7 of bm 8 the whole tile.
  CHECK(expected_wgmma_rows(3, 1, 1, 8) == doctest::Approx(4));
  CHECK(expected_wgmma_rows(5, 1, 1, 4) == doctest::Approx(5));
  CHECK(expected_wgmma_rows(7, 1, 1, 8) == doctest::Approx(8));
  // T = 4096, top-8 of 128, bm 128: rows ~ Binomial(4096, 1/16), each expert's whole tiles plus
  // its last one's 32, 64 or 128 rows: 34827.25254 (exact rational arithmetic), against
  // 317.87226 tiles * 128 = 40687.65 rows in its tiles.
  CHECK(expected_wgmma_rows(4096, 8, 128, 128) == doctest::Approx(34827.2525359).epsilon(1e-8));
  CHECK(expected_wgmma_rows(0, 8, 128, 128) == 0);
}

TEST_CASE("expected active experts") {
  CHECK(expected_active_experts(1, 8, 256) == doctest::Approx(8));       // one token: its top-k
  CHECK(expected_active_experts(2, 1, 2) == doctest::Approx(1.5));       // 2 * (1 - 1/4)
  CHECK(expected_active_experts(1000, 8, 128) == doctest::Approx(128));  // all of them
}

TEST_CASE("HBM bytes of a stage and of an expert") {
  // 128 columns x 64 k: 4096 weight bytes. MXFP4: 2 e8m0 rows of 128 bytes.
  StageBytes b = stage_hbm_bytes(128, 64, {32, 1, false});
  CHECK(b.weight == 4096);
  CHECK(b.scale == 256);
  CHECK(b.zero == 0);
  CHECK(b.total() == 4352);
  // INT4 g128, bf16 scales: half a row of 256 bytes per stage (two stages share it).
  b = stage_hbm_bytes(128, 64, {128, 2, false});
  CHECK(b.scale == 128);
  // INT4 asymmetric g32: 2 rows of bf16 scales (512 bytes) and 2 rows of zero points (256).
  b = stage_hbm_bytes(128, 64, {32, 2, true});
  CHECK(b.scale == 512);
  CHECK(b.zero == 256);
  // DeepSeek-V3 gate/up, MXFP4: 4096 x 7168 / 2 = 14680064 weight bytes, 4096 x 224 scales.
  b = expert_hbm_bytes(4096, 7168, {32, 1, false});
  CHECK(b.weight == 14680064);
  CHECK(b.scale == 917504);
}

// In every case below a CTA streams 139264 bytes; the fill rate is 40 B/clk x 1.98 GHz = 7.92e10 B/s
// per SM, and one CTA keeps 3 x 4352 = 13056 bytes in flight: 1.86514e10 B/s at 700 ns.

TEST_CASE("bounds: the issue bound binds a decode kernel with 1 byte per warp-instruction") {
  // 256 CTAs on 132 SMs: the busiest SM runs 2 (one round; 7 fit). floor = 256 x 139264 / 4.8e12
  // = 7.42741 us.
  // issue: 1 B x min(4, 8 warps) x 1.98e9 = 7.92e9 B/s; 2 x 139264 / 7.92e9 = 35.168 us: 0.2112.
  // latency: 2 x 13056 / 700 ns = 3.7303e10 B/s; 0.7 + 278528 / 3.7303e10 = 8.1667 us: 0.90948.
  // fill: 278528 / 7.92e10 = 3.517 us: 1.
  // together: 0.7 + 35.168 us: 0.20708.
  const Bounds b = predict_bounds(decode_inputs());
  CHECK(b.ctas_on_busiest_sm == 2);
  CHECK(b.resident_ctas == 2);
  CHECK(b.resident_warps == 8);
  CHECK(b.inflight_bytes_per_sm == 26112);
  CHECK(b.needed_inflight_bytes == doctest::Approx(3360000));
  CHECK(b.busy_sms == 132);
  CHECK(b.waves == doctest::Approx(256.0 / 924));
  CHECK(b.issue == doctest::Approx(0.2112));
  CHECK(b.latency == doctest::Approx(0.90948).epsilon(1e-4));
  CHECK(b.fill == 1);
  CHECK(b.fraction == doctest::Approx(0.20708).epsilon(1e-4));
  CHECK(b.mma == 1);  // no mma figures: no tensor-core bound
  CHECK(b.binding == Bound::issue);
}

TEST_CASE("bounds against another floor keep the busiest SM's times") {
  // The first case (floor 7.42741 us; busiest SM 35.168 us of issue, 0.7 + 35.168 = 35.868 us
  // in all) against half that floor, as when each expert's weights come from DRAM once for two
  // row tiles: issue 3.71371 / 35.168 = 0.105599, latency 0.90948 / 2 = 0.45474, fill 3.71371
  // / 3.517 capped at 1, fraction 3.71371 / 35.868 = 0.103538; the time stays 35.868 us.
  const Bounds b = predict_bounds(decode_inputs());
  CHECK(b.issue_seconds == doctest::Approx(35.168e-6).epsilon(1e-4));
  CHECK(b.busiest_seconds == doctest::Approx(35.868e-6).epsilon(1e-4));
  const Bounds half = dispatch::with_floor(b, b.floor_seconds / 2);
  CHECK(half.floor_seconds == doctest::Approx(3.71371e-6).epsilon(1e-5));
  CHECK(half.issue == doctest::Approx(0.105599).epsilon(1e-4));
  CHECK(half.latency == doctest::Approx(0.45474).epsilon(1e-4));
  CHECK(half.fill == 1);
  CHECK(half.fraction == doctest::Approx(0.103538).epsilon(1e-4));
  CHECK(half.seconds == doctest::Approx(b.seconds));
  CHECK(half.binding == Bound::issue);
  // Nothing to run stays nothing.
  BoundInputs none = decode_inputs();
  none.ctas = 0;
  CHECK(dispatch::with_floor(predict_bounds(none), 1e-6).fraction == 0);
}

TEST_CASE("bounds: the tensor cores bind a tile whose rows outnumber the tokens") {
  // The 256 CTAs above at 10 B/instr (issue: 2 x 139264 / 7.92e10 = 3.5168 us: 1), each a 64 x
  // 128 tile over K 2048: 64 x 128 x 2048 / 2048 = 8192 m16n8k16 mma's. At 0.5 per clock the
  // tensor rate is 139264 x 0.5 x 1.98e9 / 8192 = 1.683e10 B/s; the busiest SM's 2 CTAs take
  // 278528 / 1.683e10 = 16.5495 us: 7.42741 / 16.5495 = 0.448800. Latency as above: 0.90948.
  // Together: 0.7 + 16.5495 us: 0.430587.
  BoundInputs in = decode_inputs();
  in.bytes_per_warp_instruction = 10;
  in.mma_per_cta = 8192;
  in.mma_per_clock = 0.5;
  const Bounds b = predict_bounds(in);
  CHECK(b.issue == 1);
  CHECK(b.latency == doctest::Approx(0.90948).epsilon(1e-4));
  CHECK(b.mma == doctest::Approx(0.448800).epsilon(1e-5));
  CHECK(b.fraction == doctest::Approx(0.430587).epsilon(1e-5));
  CHECK(b.binding == Bound::mma);
  CHECK(to_string(b.binding) == "mma");
  // Twice the rate: 8.27475 us, 0.897601, still below the latency bound. Four times: 4.13738
  // us, under the floor (1); latency binds.
  in.mma_per_clock = 1;
  CHECK(predict_bounds(in).mma == doctest::Approx(0.897601).epsilon(1e-5));
  CHECK(predict_bounds(in).binding == Bound::mma);
  in.mma_per_clock = 2;
  const Bounds faster = predict_bounds(in);
  CHECK(faster.mma == 1);
  CHECK(faster.binding == Bound::latency);
}

TEST_CASE("bounds: too few bytes in flight bind a small grid") {
  // 96 CTAs (Ling-3.0-flash gate/up at T=1), one per busy SM, 5 B/instr. floor = 96 x 139264 /
  // 4.8e12 = 2.78528 us.
  // issue: 5 x 4 x 1.98e9 = 3.96e10 B/s; 139264 / 3.96e10 = 3.5168 us: 0.792.
  // latency: 0.7 + 139264 / 1.86514e10 = 8.16667 us: 0.34105.
  // fill: 139264 / 7.92e10 = 1.758 us: 1. Together: the latency rate is the smallest: 0.34105.
  BoundInputs in = decode_inputs();
  in.bytes_per_warp_instruction = 5;
  in.ctas = 96;
  const Bounds b = predict_bounds(in);
  CHECK(b.busy_sms == 96);
  CHECK(b.resident_ctas == 1);
  CHECK(b.issue == doctest::Approx(0.792));
  CHECK(b.latency == doctest::Approx(0.34105).epsilon(1e-4));
  CHECK(b.fill == 1);
  CHECK(b.binding == Bound::latency);
  CHECK(b.fraction == doctest::Approx(b.latency));
}

TEST_CASE("bounds: a first round fetched under the kernel ahead pays no latency ramp") {
  // The small grid above, its one round without the 0.7 us ramp: 139264 / 1.86514e10 = 7.46667
  // us; 2.78528 / 7.46667 = 0.37303 (latency bound and fraction alike).
  BoundInputs in = decode_inputs();
  in.bytes_per_warp_instruction = 5;
  in.ctas = 96;
  in.first_ramp_hidden = true;
  const Bounds b = predict_bounds(in);
  CHECK(b.latency == doctest::Approx(0.37303).epsilon(1e-4));
  CHECK(b.fraction == doctest::Approx(0.37303).epsilon(1e-4));
  // Two rounds (1000 CTAs, 7 per SM, fill at 10 B/clk as below): only the first loses its ramp,
  // 58.1 - 0.7 = 57.4 us: 29.0133 / 57.4 = 0.50546.
  in = decode_inputs();
  in.bytes_per_warp_instruction = 10;
  in.ctas = 1000;
  in.sm_fill_bytes_per_clock = 10;
  in.first_ramp_hidden = true;
  CHECK(predict_bounds(in).fraction == doctest::Approx(0.50546).epsilon(1e-4));
}

TEST_CASE("bounds: a split K adds one reduction, and the partial tiles past the second at the fill rate") {
  // The small grid above (8.16667 us, 2.78528 us of floor) with split-K and 16 x 128 f32 partial
  // tiles (8192 bytes; 40 B/clk x 1.98 GHz = 7.92e10 B/s into the summing SM: 0.103434 us each).
  // The bounds themselves do not change.
  BoundInputs in = decode_inputs();
  in.bytes_per_warp_instruction = 5;
  in.ctas = 96;
  in.split_partial_bytes = 8192;
  in.split_k = 2;  // 1 us: 2.78528 / 9.16667 = 0.303849
  CHECK(predict_bounds(in).fraction == doctest::Approx(0.303849).epsilon(1e-4));
  in.split_k = 3;  // 1.103434 us: 2.78528 / 9.27010 = 0.300459
  const Bounds b = predict_bounds(in);
  CHECK(b.latency == doctest::Approx(0.34105).epsilon(1e-4));
  CHECK(b.fraction == doctest::Approx(0.300459).epsilon(1e-4));
  CHECK(b.seconds == doctest::Approx(9.27010e-6).epsilon(1e-4));
  in.split_k = 5;  // 1.310303 us: 2.78528 / 9.47697 = 0.293900
  CHECK(predict_bounds(in).fraction == doctest::Approx(0.293900).epsilon(1e-4));
}

TEST_CASE("bounds: the busiest SM's extra round binds when L2 feeds an SM slowly") {
  // 1000 CTAs on 132 SMs: the busiest runs 8, a round of 7 then a round of 1. 10 B/instr.
  // floor = 1000 x 139264 / 4.8e12 = 29.0133 us.
  // issue: 4 warps or more in both rounds, 7.92e10 B/s: 8 x 139264 / 7.92e10 = 14.067 us: 1.
  // latency: 7 x 13056 / 700 ns = 1.3056e11 B/s: 0.7 + 974848 / 1.3056e11 = 8.1667 us, and the
  //   last round the same (one CTA at 1.86514e10): 16.333 us: 1.
  // fill at 10 B/clk = 1.98e10 B/s: 8 x 139264 / 1.98e10 = 56.268 us: 0.515625 (1000 / 1056 of
  //   the SMs' 132 x 1.98e10 = 2.6136e12 B/s, which is 0.5445 of the DRAM bandwidth).
  // together: 0.7 + 974848 / 1.98e10 + 0.7 + 139264 / 1.98e10 = 58.1 us: 0.49936.
  BoundInputs in = decode_inputs();
  in.bytes_per_warp_instruction = 10;
  in.ctas = 1000;
  in.sm_fill_bytes_per_clock = 10;
  const Bounds b = predict_bounds(in);
  CHECK(b.ctas_on_busiest_sm == 8);
  CHECK(b.resident_ctas == 7);
  CHECK(b.issue == 1);
  CHECK(b.latency == 1);
  CHECK(b.fill == doctest::Approx(0.515625));
  CHECK(b.fraction == doctest::Approx(0.49936).epsilon(1e-4));
  CHECK(b.binding == Bound::fill);
}

TEST_CASE("bounds: fewer than 4 resident warps scale the issue rate") {
  // Ten one-warp CTAs, one per busy SM, 10 B/instr: one scheduler of 4 has work. floor = 10 x
  // 139264 / 4.8e12 = 0.290133 us.
  // issue: 10 x 1 x 1.98e9 = 1.98e10 B/s: 7.0335 us: 0.04125. latency: 8.16667 us: 0.035527.
  // fill: 1.758 us: 0.165. Together: the latency rate (1.86514e10) is the smallest: 0.035527.
  BoundInputs in = decode_inputs();
  in.bytes_per_warp_instruction = 10;
  in.warps_per_cta = 1;
  in.ctas = 10;
  const Bounds b = predict_bounds(in);
  CHECK(b.resident_warps == 1);
  CHECK(b.issue == doctest::Approx(0.04125));
  CHECK(b.latency == doctest::Approx(0.035527).epsilon(1e-4));
  CHECK(b.fill == doctest::Approx(0.165));
  CHECK(b.binding == Bound::latency);
  CHECK(b.fraction == doctest::Approx(b.latency));
}

TEST_CASE("bounds: nothing to run predicts nothing") {
  BoundInputs in = decode_inputs();
  in.ctas = 0;
  CHECK(predict_bounds(in).fraction == 0);
  in = decode_inputs();
  in.ctas_per_sm = 0;  // one CTA does not fit
  CHECK(predict_bounds(in).fraction == 0);
}

TEST_CASE("model_assumptions says what the model assumes") {
  CHECK(model_assumptions().size() >= 8);
  for (auto a : model_assumptions()) CHECK_FALSE(a.empty());
}
