// The grouped GEMM with e2m1 activations (W4A4: MXFP4 x MXFP4, E8M0 scales per 32 on both sides)
// on the host backend, sm_120a / sm_121a kernels: one block-scaled mma.m16n8k64 (kind::mxf4) per
// m16 x n8 tile and 64 k, whose twin applies both operands' scales lane by lane as the PTX ISA
// lays them out. Checked against the fp64 reference of the quantized inputs (e2m1 value times
// 2^(byte - 127)): every layout x epilogue, every tile shape a stage can take (bk 64, 128, 256:
// one, two and four k64 steps, A scales as a u16, a word, two words), E8M0 edge bytes in the
// activations' and in the weights' scales at every lane position, extreme magnitudes, split-K.

#include <doctest/doctest.h>

#include "gemm_case.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

GemmCase act4_case() {
  GemmCase c;
  c.act = DType::e2m1;
  c.act_scale = ActScale::block32;
  return c;
}

}  // namespace

TEST_CASE("host grouped GEMM W4A4: e2m1 activations x layouts x epilogues on sm_120a, and sm_121a") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  HostLauncher host(Arch::sm_120a);
  for (const GemmCase& c : act4_matrix()) run_gemm_case(*resolver, host, c, fresh_seed());
  HostLauncher spark(Arch::sm_121a);
  GemmCase c = act4_case();
  c.epilogue = Epilogue::silu_and_mul;
  run_gemm_case(*resolver, spark, c, fresh_seed());
}

TEST_CASE("host grouped GEMM W4A4: tiles of one, two and four k64 steps, several m16 tiles and strips per warp") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  HostLauncher host(Arch::sm_120a);
  for (const dispatch::TileConfig tile :
       {dispatch::TileConfig{16, 128, 64, 4, 4}, dispatch::TileConfig{16, 256, 128, 4, 4},
        dispatch::TileConfig{16, 128, 256, 3, 4}, dispatch::TileConfig{64, 128, 64, 3, 4},
        dispatch::TileConfig{32, 64, 128, 3, 2}, dispatch::TileConfig{128, 128, 64, 3, 8}}) {
    GemmCase c = act4_case();
    c.tile = tile;
    c.k = 512;
    c.n = tile.bn == 256 ? 256 : 128;
    c.tokens = static_cast<std::int32_t>(tile.bm) + 5;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    run_gemm_case(*resolver, host, c, fresh_seed());
  }
}

TEST_CASE("host grouped GEMM W4A4: E8M0 edge bytes in activation and weight scales, extreme magnitudes") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  HostLauncher host(Arch::sm_120a);
  // Activations: a NaN block (its row NaN), blocks at 2^-127, 2^-126 and 2^113, moving along k
  // (every k-block position of a step and of a stage) and over the rows (every lane pair).
  for (Epilogue epilogue : {Epilogue::none, Epilogue::silu_and_mul}) {
    GemmCase c = act4_case();
    c.a_edge_bytes = true;
    c.epilogue = epilogue;
    c.out = DType::f32;
    c.layout = Layout::contiguous;
    c.tokens = 37;
    run_gemm_case(*resolver, host, c, fresh_seed());
  }
  // Weights: edge bytes at every column position of a strip and in every k block.
  std::vector<GemmCase> edges = edge_scale_lane_cases();
  for (GemmCase c : edge_scale_cases()) edges.push_back(c);
  for (GemmCase c : edges) {
    c.act = DType::e2m1;
    c.act_scale = ActScale::block32;
    run_gemm_case(*resolver, host, c, fresh_seed());
  }
  // Activation magnitudes near the bottom (scale bytes 0 and 1: values below 2^-127 round away)
  // and near 2^100.
  for (int shift : {-125, 100}) {
    CAPTURE(shift);
    GemmCase c = act4_case();
    c.a_exponent_shift = shift;
    c.out = DType::f32;
    c.layout = Layout::masked;
    run_gemm_case(*resolver, host, c, fresh_seed());
  }
}

TEST_CASE("host grouped GEMM W4A4: split-K is bitwise identical run to run, and M = 0, 1, 7") {
  TempDir dir;
  auto resolver = host_resolver(dir);
  HostLauncher host(Arch::sm_120a);
  GemmCase c = act4_case();
  c.k = 1280;  // 20 stages of 64 in 4 splits of 5
  c.split_k = 4;
  c.out = DType::f32;
  c.tokens = 9;
  const std::uint32_t seed = fresh_seed();
  auto first = run_gemm_case(*resolver, host, c, seed);
  auto second = run_gemm_case(*resolver, host, c, seed);
  CHECK(first.output == second.output);
  for (std::int32_t rows : {0, 1, 7}) {
    GemmCase m = act4_case();
    m.tokens = rows;
    m.topk = 1;
    run_gemm_case(*resolver, host, m, fresh_seed());
  }
}
