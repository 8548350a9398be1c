// The C ABI with 16-bit activations and the packing each type needs: MXFP4 weights packed for
// F16 record it and run f16 activations against the fp64 reference; the bf16 and f16 packings
// of the same checkpoint differ in their tile bytes and packing marks only; a mix-up is an error
// that names the argument, and one the API cannot see (a buffer labelled F16 that was packed for
// BF16, or before the mark) gives NaN; INT4 weights have one packing for both types.

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>

#include "moejit/moejit.h"
#include "quant/pack.hpp"
#include "c_api_helpers.hpp"
#include "spec/spec_fields.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;

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
  // Same codes in other bit places; the scales are shared, and so are the range words but for
  // the packing marks in their upper halves.
  CHECK(std::memcmp(p_bf16->q->data, p_f16->q->data, p_f16->w.qweight_bytes) != 0);
  const u64 ranges_at = mxfp4_scale_range_offset(E, N, K);
  CHECK(std::memcmp(p_bf16->s->data, p_f16->s->data, ranges_at) == 0);
  for (std::uint32_t e = 0; e < E; ++e) {
    const u32 r_bf16 = range_word(*p_bf16, e), r_f16 = range_word(*p_f16, e);
    CHECK((r_bf16 & 0xffffu) == (r_f16 & 0xffffu));
    CHECK((r_bf16 & 0xffff0000u) == packed_order_mark(PackedOrder::a16));
    CHECK((r_f16 & 0xffff0000u) == packed_order_mark(PackedOrder::a16f16));
  }

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

    const char* want = act == DType::bf16 ? "packed with act_dtype bf16 (" : "packed with act_dtype f16 (";
    const char* have = act == DType::bf16 ? "packed for f16 activations" : "packed for bf16 activations";
    const moejit_grouped_gemm_args_t bad = contiguous_args(wrong, act_c, a.data, K, out.data, N, offsets);
    expect_error(moejit_grouped_gemm(c.ctx, &bad, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, {"'act_dtype'", have, want});
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

TEST_CASE("C ABI: MXFP4 buffers packed for BF16, or before the packing mark, give NaN when described as F16") {
  // What a caller who kept MXFP4 buffers from before the F16 packing, and now labels them F16,
  // gets: the kernel finds no F16 mark and writes NaN, where it would write plausible wrong numbers.
  TempDir dir;
  Context c(dir);
  std::mt19937 rng(std::random_device{}());
  constexpr std::uint32_t E = 2, N = 64, K = 128;
  const VllmWeights w = vllm_weights(rng, E, N, K);
  auto p = pack(c.ctx, vllm_desc(w, MOEJIT_ROWS_PLAIN, nullptr));
  moejit_packed_weights_t labelled_f16 = p->w;
  labelled_f16.act_dtype = MOEJIT_DTYPE_F16;

  const std::vector<i32> offsets = {0, 6, 11};
  const std::int32_t M = offsets.back();
  Buffer a(static_cast<std::size_t>(M) * K * 2), out(static_cast<std::size_t>(M) * N * 4);
  for (const bool unmarked : {false, true}) {
    CAPTURE(unmarked);
    if (unmarked) set_packing_marks(*p, 0);  // as packed before the mark

    // As packed, with bf16 activations: right.
    std::vector<double> x = random_activations(a.data, static_cast<std::size_t>(M) * K, DType::bf16, rng);
    std::memset(out.data, 0xff, out.size);
    moejit_grouped_gemm_args_t g = contiguous_args(*p, MOEJIT_DTYPE_BF16, a.data, K, out.data, N, offsets);
    REQUIRE_MESSAGE(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
    CHECK(contiguous_error(w.logical, x, offsets, out) < 1e-5);

    // Labelled F16, with f16 activations: accepted by the API (the label is all it sees), NaN
    // in every output, each written by the kernel (not the poison's all-ones bits).
    x = random_activations(a.data, static_cast<std::size_t>(M) * K, DType::f16, rng);
    std::memset(out.data, 0xff, out.size);
    g = contiguous_args(*p, MOEJIT_DTYPE_F16, a.data, K, out.data, N, offsets);
    g.weights = &labelled_f16;
    REQUIRE_MESSAGE(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
    std::size_t numbers = 0, unwritten = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(M) * N; ++i) {
      float v;
      u32 bits;
      std::memcpy(&v, static_cast<const u8*>(out.data) + 4 * i, 4);
      std::memcpy(&bits, &v, 4);
      numbers += !std::isnan(v);
      unwritten += bits == 0xffffffffu;
    }
    CHECK(numbers == 0);
    CHECK(unwritten == 0);
  }
}
