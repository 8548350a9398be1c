// The grouped GEMM's parameter checks for the early weight fetch flag (weights_before_dependency):
// what the fused layer sets for its down projection, and what no other caller may set; and its
// launch geometry where a 2-D grid would overflow.

#include <doctest/doctest.h>

#include <vector>

#include "kernels/grouped_gemm.hpp"
#include "dispatch/grouped_gemm_op.hpp"

using namespace moejit;
using namespace moejit::dispatch;

namespace {

struct Fixture {
  std::vector<unsigned char> buffer = std::vector<unsigned char>(1 << 16, 0x5a);
  GroupedGemmRequest request;
  Fixture() {
    request.weights.format = WeightFormat::int4_sym;
    request.weights.scale = DType::bf16;
    request.weights.group_size = 128;
    request.weights.experts = 2;
    request.weights.n = 64;
    request.weights.k = 256;
    request.params.m = 4;
    request.block_size = 16;
    request.params.lda = 256;
    request.params.ldc = 64;
    request.params.a_row_divisor = 1;
    request.weights.qweight = aligned();
    request.weights.scales = aligned();
  }
  unsigned char* aligned() {
    return buffer.data() + (16 - reinterpret_cast<std::uintptr_t>(buffer.data()) % 16) % 16;
  }
  GroupedGemmParams params_for() {
    unsigned char* p = aligned();
    GroupedGemmParams g = request.params;
    g.a = p;
    g.b = p;
    g.b_scales = p;
    g.c = p;
    g.sorted_token_ids = reinterpret_cast<const i32*>(p);
    g.expert_ids = reinterpret_cast<const i32*>(p);
    g.num_tokens_post_pad = reinterpret_cast<const i32*>(p);
    g.expert_offsets = reinterpret_cast<const i32*>(p);
    return g;
  }
};

}  // namespace

TEST_CASE("weights_before_dependency: 0, or 1 with the indexed layout, anything else names the argument") {
  Fixture f;
  auto spec = grouped_gemm_spec(f.request, Arch::sm_90a, Backend::device, 132);
  REQUIRE_MESSAGE(spec.ok(), spec.status().message());
  GroupedGemmParams p = f.params_for();
  CHECK_MESSAGE(check_grouped_gemm_params(*spec, p).ok(), check_grouped_gemm_params(*spec, p).message());
  p.weights_before_dependency = 1;
  CHECK_MESSAGE(check_grouped_gemm_params(*spec, p).ok(), check_grouped_gemm_params(*spec, p).message());
  p.weights_before_dependency = 2;
  Status s = check_grouped_gemm_params(*spec, p);
  CHECK(s.code() == Code::invalid_argument);
  CHECK(s.message().find("weights_before_dependency") != std::string::npos);

  f.request.layout = Layout::contiguous;
  auto contiguous = grouped_gemm_spec(f.request, Arch::sm_90a, Backend::device, 132);
  REQUIRE_MESSAGE(contiguous.ok(), contiguous.status().message());
  p = f.params_for();
  CHECK_MESSAGE(check_grouped_gemm_params(*contiguous, p).ok(), check_grouped_gemm_params(*contiguous, p).message());
  p.weights_before_dependency = 1;
  s = check_grouped_gemm_params(*contiguous, p);
  CHECK(s.code() == Code::invalid_argument);
  CHECK(s.message().find("indexed") != std::string::npos);
}

TEST_CASE("gemm_work tells the planner which indexed GEMMs fetch their weights early") {
  Fixture f;
  f.request.weights.n = 2880;
  f.request.weights.k = 2880;
  f.request.weights.format = WeightFormat::mxfp4;
  f.request.weights.scale = DType::e8m0;
  f.request.weights.group_size = 32;
  f.request.weights.experts = 128;
  f.request.topk_hint = 4;
  f.request.params.m = 4;
  CHECK_FALSE(gemm_work(f.request).first_ramp_hidden);
  f.request.params.weights_before_dependency = 1;
  CHECK(gemm_work(f.request).first_ramp_hidden);
  f.request.layout = Layout::contiguous;
  CHECK_FALSE(gemm_work(f.request).first_ramp_hidden);
}

TEST_CASE("a masked layout with more than 65535 row tiles launches: the tiles are one grid dimension") {
  Fixture f;
  // DeepEP low-latency style: 256 experts, room for 40000 rows each (the largest tile rows,
  // 128, still give 256 x 313 = 80128 row tiles, past a grid's y limit).
  f.request.layout = Layout::masked;
  f.request.weights.experts = 256;
  f.request.params = f.params_for();
  f.request.params.m = 40000;
  f.request.params.expert_counts = reinterpret_cast<const i32*>(f.aligned());
  auto g = prepare_grouped_gemm(f.request, Arch::sm_90a, Backend::device, 132);
  REQUIRE_MESSAGE(g.ok(), g.status().message());
  const GemmTiles tiles = grouped_gemm_tiles(g->spec, 40000);
  CAPTURE(tiles.columns);
  CAPTURE(tiles.rows);
  CHECK(tiles.rows > 65535);
  CHECK(g->grid.x == tiles.columns * tiles.rows);
  CHECK(g->grid.y == 1);
  CHECK(g->grid.z == tiles.splits);
  // Past 2^31 - 1 tiles there is no launch: an error, not a wrapped grid.
  GemmTiles huge = tiles;
  huge.columns = 1u << 16;
  huge.rows = 1u << 16;
  auto grid = grouped_gemm_grid(huge);
  REQUIRE_FALSE(grid.ok());
  CHECK(grid.status().message().find("2^31 - 1") != std::string::npos);
}
