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

struct Model {
  const char* name;
  std::uint32_t hidden, intermediate, experts, topk;
};

constexpr Model kLing{"Ling-3.0-flash", 2560, 768, 512, 8};
constexpr Model kDeepSeek{"DeepSeek-V3", 7168, 2048, 256, 8};
constexpr Model kGptOss{"gpt-oss-120b", 2880, 2880, 128, 4};

// Gate/up then down projection of one MoE layer for `tokens` tokens whose pairs all go to
// `touched` experts (each then sees tokens x topk / touched rows; the tile is picked for that).
void run_model(DeviceLauncher& launcher, const Model& model, WeightFormat weight, DType scale, std::uint32_t group,
               Epilogue act, std::int32_t tokens, std::uint32_t touched) {
  CAPTURE(model.name);
  CAPTURE(tokens);
  CAPTURE(touched);
  const std::uint32_t rows_per_expert = static_cast<std::uint32_t>(tokens) * model.topk / touched;
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
  up.touched_experts = touched;
  up.tokens = tokens;
  up.topk = model.topk;
  up.tile = dispatch::pick_gemm_tile(launcher.arch(), rows_per_expert);
  up.bias = weight == WeightFormat::mxfp4 && act == Epilogue::swiglu_oai;
  GemmCase down = up;
  down.epilogue = Epilogue::topk_weight;
  down.n = model.hidden;
  down.k = model.intermediate;
  down.a_per_pair = true;
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
  run_model(*l, kLing, WeightFormat::int4_sym, DType::bf16, 128, Epilogue::silu_and_mul, 1, kLing.topk);
  run_model(*l, kLing, WeightFormat::int4_sym, DType::bf16, 128, Epilogue::silu_and_mul, 16, 1);
}

TEST_CASE("GPU grouped GEMM at DeepSeek-V3's shapes") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  run_model(*l, kDeepSeek, WeightFormat::mxfp4, DType::e8m0, 32, Epilogue::silu_and_mul, 1, kDeepSeek.topk);
  run_model(*l, kDeepSeek, WeightFormat::mxfp4, DType::e8m0, 32, Epilogue::silu_and_mul, 16, 1);
}

TEST_CASE("GPU grouped GEMM at gpt-oss-120b's shapes") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  run_model(*l, kGptOss, WeightFormat::mxfp4, DType::e8m0, 32, Epilogue::swiglu_oai, 3, kGptOss.topk);
  run_model(*l, kGptOss, WeightFormat::mxfp4, DType::e8m0, 32, Epilogue::swiglu_oai, 16, 1);
}

}  // TEST_SUITE
