// The C ABI with 16-bit activations and the packing each type needs: MXFP4 weights packed for
// F16 record it and run f16 activations against the fp64 reference; the bf16 and f16 packings
// of the same checkpoint differ in their tile bytes only; a mix-up is an error that names the
// argument; INT4 weights have one packing for both types.

#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <tuple>

#include "moejit/moejit.h"
#include "c_api_helpers.hpp"
#include "spec/spec_fields.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

void check_fails(moejit_context_t ctx, const moejit_grouped_gemm_args_t& g, std::initializer_list<const char*> words) {
  CHECK(moejit_grouped_gemm(ctx, &g, nullptr) == MOEJIT_ERROR_INVALID_ARGUMENT);
  const std::string message = moejit_last_error();
  CAPTURE(message);
  for (const char* word : words) CHECK(message.find(word) != std::string::npos);
}

}  // namespace

TEST_CASE("C ABI: MXFP4 weights packed for F16 run f16 activations, and each 16-bit packing refuses the other type") {
  TempDir dir;
  Context c(dir);
  std::mt19937 rng(std::random_device{}());
  constexpr std::uint32_t E = 3, N = 96, K = 256;
  const VllmWeights w = vllm_weights(rng, E, N, K);
  moejit_weights_desc_t d_bf16 = vllm_desc(w, MOEJIT_ROWS_PLAIN, nullptr);
  moejit_weights_desc_t d_f16 = d_bf16;
  d_f16.act_dtype = MOEJIT_DTYPE_F16;
  auto p_bf16 = pack(c.ctx, d_bf16);
  auto p_f16 = pack(c.ctx, d_f16);
  CHECK(p_bf16->w.act_dtype == MOEJIT_DTYPE_BF16);
  CHECK(p_f16->w.act_dtype == MOEJIT_DTYPE_F16);
  // Same codes in other bit places; the scales are shared.
  CHECK(std::memcmp(p_bf16->q->data, p_f16->q->data, p_f16->w.qweight_bytes) != 0);
  CHECK(std::memcmp(p_bf16->s->data, p_f16->s->data, p_f16->w.scales_bytes) == 0);

  const std::vector<i32> offsets = {0, 5, 5, 19};  // expert 1 has no rows
  const std::int32_t M = offsets.back();
  for (DType act : {DType::bf16, DType::f16}) {
    CAPTURE(to_string(act));
    const moejit_dtype_t act_c = act == DType::bf16 ? MOEJIT_DTYPE_BF16 : MOEJIT_DTYPE_F16;
    const Packed& right = act == DType::bf16 ? *p_bf16 : *p_f16;
    const Packed& wrong = act == DType::bf16 ? *p_f16 : *p_bf16;
    Buffer a(static_cast<std::size_t>(M) * K * 2), out(static_cast<std::size_t>(M) * N * 4);
    const std::vector<double> x = random_activations(a.data, static_cast<std::size_t>(M) * K, act, rng);
    std::memset(out.data, 0xff, out.size);  // NaN everywhere: every output must be written
    moejit_grouped_gemm_args_t g = contiguous_args(right, act_c, a.data, K, out.data, N, offsets);
    REQUIRE_MESSAGE(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
    const double err = contiguous_error(w.logical, x, offsets, out);
    CAPTURE(err);
    CHECK(err < 1e-5);  // exact dequantized weights, f32 sums

    const char* want = act == DType::bf16 ? "packed with act_dtype BF16 (" : "packed with act_dtype F16 (";
    const char* have = act == DType::bf16 ? "packed for f16 activations" : "packed for bf16 activations";
    check_fails(c.ctx, contiguous_args(wrong, act_c, a.data, K, out.data, N, offsets), {"'act'", have, want});
  }
}

TEST_CASE("C ABI: INT4 weights have one packing for BF16 and F16 activations") {
  TempDir dir;
  Context c(dir);
  std::mt19937 rng(std::random_device{}());
  constexpr std::uint32_t E = 2, N = 64, K = 128;
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> real(E * N * K);
  for (auto& v : real) v = dist(rng);
  auto q = quant::quantize(real, E, N, K, {WeightFormat::int4_sym, 64, DType::f16});
  REQUIRE(q.ok());
  moejit_weights_desc_t d = int4_plain_desc(q->codes, q->scales, MOEJIT_DTYPE_F16, 64, E, N, K);
  auto p_bf16 = pack(c.ctx, d);
  d.act_dtype = MOEJIT_DTYPE_F16;
  auto p_f16 = pack(c.ctx, d);
  CHECK(p_f16->w.act_dtype == MOEJIT_DTYPE_BF16);  // the one 16-bit packing
  CHECK(std::memcmp(p_bf16->q->data, p_f16->q->data, p_f16->w.qweight_bytes) == 0);

  // Either packing runs either type, against the fp64 reference.
  const std::vector<i32> offsets = {0, 3, 7};
  Buffer a(7 * K * 2), out(7 * N * 4);
  for (const auto& [p, act_c, act] : {std::tuple{p_bf16.get(), MOEJIT_DTYPE_F16, DType::f16},
                                      std::tuple{p_f16.get(), MOEJIT_DTYPE_BF16, DType::bf16}}) {
    CAPTURE(to_string(act));
    const std::vector<double> x = random_activations(a.data, 7 * K, act, rng);
    std::memset(out.data, 0xff, out.size);  // NaN everywhere: every output must be written
    moejit_grouped_gemm_args_t g = contiguous_args(*p, act_c, a.data, K, out.data, N, offsets);
    REQUIRE_MESSAGE(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
    const double err = contiguous_error(*q, x, offsets, out);
    CAPTURE(err);
    CHECK(err < 1e-5);  // q - z exact, f32 sums scaled per group in f32
  }
}
