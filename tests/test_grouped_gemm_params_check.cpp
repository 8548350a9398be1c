// The grouped GEMM's parameter checks for the early weight fetch flag (weights_before_dependency):
// what the fused layer sets for its down projection, and what no other caller may set.

#include <doctest/doctest.h>

#include <vector>

#include "dispatch/grouped_gemm_launch.hpp"
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
