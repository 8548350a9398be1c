// The grouped GEMM on the host backend at the real layer shapes of three models, at small M
// (decode): both projections of Ling-3.0-flash, DeepSeek-V3 and gpt-oss-120b. Only the experts
// the tokens are routed to get weights (the kernel reads no other), so memory stays small.

#include <doctest/doctest.h>

#include "gemm_case.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

struct Model {
  const char* name;
  std::uint32_t hidden, intermediate, experts, topk;
};

constexpr Model kLing{"Ling-3.0-flash", 2560, 768, 512, 8};
constexpr Model kDeepSeek{"DeepSeek-V3", 7168, 2048, 256, 8};
constexpr Model kGptOss{"gpt-oss-120b", 2880, 2880, 128, 4};

// Gate/up projection then down projection of one MoE layer for `tokens` tokens.
void run_model(const Model& model, WeightFormat weight, DType scale, std::uint32_t group, Epilogue act,
               std::int32_t tokens) {
  CAPTURE(model.name);
  TempDir dir;
  auto resolver = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(resolver.ok());
  GemmCase up;
  up.weight = weight;
  up.scale = scale;
  up.group = group;
  up.act = DType::bf16;
  up.out = DType::bf16;
  up.layout = Layout::indexed;
  up.epilogue = act;
  up.n = 2 * model.intermediate;
  up.k = model.hidden;
  up.experts = model.experts;
  up.touched_experts = model.topk;  // every token picks the same set: the fewest weights to make
  up.tokens = tokens;
  up.topk = model.topk;
  up.tile = dispatch::pick_gemm_tile(Arch::sm_90a, static_cast<std::uint32_t>(tokens));
  up.bias = weight == WeightFormat::mxfp4 && act == Epilogue::swiglu_oai;  // gpt-oss has biases
  run_gemm_case(**resolver, up, std::random_device{}());

  GemmCase down = up;
  down.epilogue = Epilogue::topk_weight;
  down.n = model.hidden;
  down.k = model.intermediate;
  down.a_per_pair = true;
  run_gemm_case(**resolver, down, std::random_device{}());
}

}  // namespace

TEST_CASE("host grouped GEMM at Ling-3.0-flash's shapes") {
  run_model(kLing, WeightFormat::int4_sym, DType::bf16, 128, Epilogue::silu_and_mul, 2);
}

TEST_CASE("host grouped GEMM at DeepSeek-V3's shapes") {
  run_model(kDeepSeek, WeightFormat::mxfp4, DType::e8m0, 32, Epilogue::silu_and_mul, 1);
}

TEST_CASE("host grouped GEMM at gpt-oss-120b's shapes") {
  run_model(kGptOss, WeightFormat::mxfp4, DType::e8m0, 32, Epilogue::swiglu_oai, 3);
}
