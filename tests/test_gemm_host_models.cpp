// The grouped GEMM on the host backend at the real layer shapes of three models, at small M
// (decode): both projections of Ling-3.0-flash, DeepSeek-V3 and gpt-oss-120b. Only the experts
// the tokens are routed to get weights (the kernel reads no other), so memory stays small.
// DeepSeek-V3's token goes to 2 experts, 4 of its 8 pairs each: its experts are the largest
// (7168 x 4096 and 2048 x 7168), and 8 of them took the host backend two minutes under ASan for
// no shape the 2 lack.

#include <doctest/doctest.h>

#include "gemm_case.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

// Gate/up projection then down projection of one MoE layer for `tokens` tokens, every token's
// top-k pairs on the same `touched` experts (the fewest weights to make).
void run_model(const MoeModel& model, const GemmFormat& format, Epilogue act, std::int32_t tokens,
               std::uint32_t touched) {
  CAPTURE(model.name);
  TempDir dir;
  auto resolver = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(resolver.ok());
  auto [up, down] = model_layer_cases(model, format, act, tokens, touched, Arch::sm_90a);
  run_gemm_case(**resolver, up, std::random_device{}());
  run_gemm_case(**resolver, down, std::random_device{}());
}

}  // namespace

TEST_CASE("host grouped GEMM at Ling-3.0-flash's shapes") {
  run_model(kLingModel, {WeightFormat::int4_sym, DType::bf16, 128}, Epilogue::silu_and_mul, 2, kLingModel.topk);
}

TEST_CASE("host grouped GEMM at DeepSeek-V3's shapes") {
  run_model(kDeepSeekModel, {WeightFormat::mxfp4, DType::e8m0, 32}, Epilogue::silu_and_mul, 1, 2);
}

TEST_CASE("host grouped GEMM at gpt-oss-120b's shapes") {
  run_model(kGptOssModel, {WeightFormat::mxfp4, DType::e8m0, 32}, Epilogue::swiglu_oai, 3, kGptOssModel.topk);
}
