// The grouped GEMM on the GPU at the real layer shapes of the three models of
// tests/test_gemm_host_models.cpp (both projections of Ling-3.0-flash, DeepSeek-V3 and
// gpt-oss-120b, their formats) against the fp64 reference: decode (every token on the same
// top-k experts, the 16-row tile) and a prefill-sized tile (every pair of 16 tokens on one
// expert: 64 or 128 rows, the large tiles; the fp64 reference costs rows x N x K, so rows are
// spent where they exercise a different kernel). Only the experts that get tokens get weights.
// Skips without a GPU.

#include <doctest/doctest.h>

#include "gemm_case.hpp"
#include "test_device_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

// Gate/up then down projection of one MoE layer for `tokens` tokens whose pairs all go to
// `touched` experts (each then sees tokens x topk / touched rows; the tile is picked for that).
void run_model(DeviceLauncher& launcher, const MoeModel& model, const GemmFormat& format, Epilogue act,
               std::int32_t tokens, std::uint32_t touched) {
  CAPTURE(model.name);
  CAPTURE(tokens);
  CAPTURE(touched);
  TempDir dir;
  auto resolver = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(resolver.ok());
  auto [up, down] = model_layer_cases(model, format, act, tokens, touched, launcher.arch());
  auto up_kernel = (*resolver)->resolve_async(gemm_case_spec(up, Backend::device, launcher.arch()));
  auto down_kernel = (*resolver)->resolve_async(gemm_case_spec(down, Backend::device, launcher.arch()));
  REQUIRE(up_kernel.get().ok());
  REQUIRE(down_kernel.get().ok());
  const GemmOutcome u = run_gemm_case(**resolver, launcher, up, std::random_device{}());
  const GemmOutcome d = run_gemm_case(**resolver, launcher, down, std::random_device{}());
  MESSAGE(model.name << " tokens " << tokens << " on " << touched << " experts, tile bm " << up.tile.bm << ": relative error gate/up " << u.error
                     << ", down " << d.error);
}

}  // namespace

TEST_SUITE("device") {

TEST_CASE("GPU grouped GEMM at Ling-3.0-flash's shapes") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  run_model(*l, kLingModel, {WeightFormat::int4_sym, DType::bf16, 128}, Epilogue::silu_and_mul, 1, kLingModel.topk);
  run_model(*l, kLingModel, {WeightFormat::int4_sym, DType::bf16, 128}, Epilogue::silu_and_mul, 16, 1);
}

TEST_CASE("GPU grouped GEMM at DeepSeek-V3's shapes") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  run_model(*l, kDeepSeekModel, {WeightFormat::mxfp4, DType::e8m0, 32}, Epilogue::silu_and_mul, 1, kDeepSeekModel.topk);
  run_model(*l, kDeepSeekModel, {WeightFormat::mxfp4, DType::e8m0, 32}, Epilogue::silu_and_mul, 16, 1);
}

TEST_CASE("GPU grouped GEMM at gpt-oss-120b's shapes") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  run_model(*l, kGptOssModel, {WeightFormat::mxfp4, DType::e8m0, 32}, Epilogue::swiglu_oai, 3, kGptOssModel.topk);
  run_model(*l, kGptOssModel, {WeightFormat::mxfp4, DType::e8m0, 32}, Epilogue::swiglu_oai, 16, 1);
}

}  // TEST_SUITE
