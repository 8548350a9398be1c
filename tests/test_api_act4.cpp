// The C ABI with e2m1 activations (W4A4: MXFP4 x MXFP4) on a host context that runs the sm_120a
// kernels (options.host_arch): weights packed for E2M1 from vLLM's MXFP4 layout, the grouped GEMM
// on E2M1 rows with E8M0 scales per 32 against the fp64 reference of the quantized inputs, the
// fused layer on bf16 hidden states it quantizes and on the caller's e2m1 ones (same bytes out),
// warm-up for sm_120a and sm_121a; and the errors of a mix-up (INT4 weights, other scales,
// a target without the mma, a short scale stride).

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>

#include "common/numeric.cuh"
#include "moejit/moejit.h"
#include "reference/compare.hpp"
#include "reference/reference.hpp"
#include "c_api_helpers.hpp"
#include "fp4_reference.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

std::vector<float> random_rows(std::mt19937& rng, std::size_t rows, std::uint32_t k) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(rows * k);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = prim::twin::bf16_to_f32(prim::twin::f32_to_bf16(dist(rng) * std::ldexp(1.0f, static_cast<int>(rng() % 7) - 3)));
  return x;
}

}  // namespace

TEST_CASE("C ABI: grouped GEMM with E2M1 activations on a host context running sm_120a kernels") {
  TempDir dir;
  Context c(dir, MOEJIT_BACKEND_HOST, nullptr, 0, "sm_120a");
  moejit_backend_t backend{};
  const char* arch = nullptr;
  REQUIRE(moejit_context_backend(c.ctx, &backend, &arch) == MOEJIT_OK);
  CHECK(backend == MOEJIT_BACKEND_HOST);
  CHECK(std::string(arch) == "sm_120a");
  std::mt19937 rng(std::random_device{}());
  constexpr std::uint32_t E = 4, N = 96, K = 384;
  const VllmWeights w = vllm_weights(rng, E, N, K);
  moejit_weights_desc_t d = vllm_desc(w, MOEJIT_ROWS_PLAIN, nullptr);
  d.act_dtype = MOEJIT_DTYPE_E2M1;
  auto p = pack(c.ctx, d);
  CHECK(p->w.act_dtype == MOEJIT_DTYPE_E2M1);

  std::vector<i32> offsets = {0, 9, 9, 20, 31};  // expert 1 has no rows
  const std::int32_t M = offsets.back();
  const fp4::Quantized x = fp4::quantize(random_rows(rng, M, K), M, K);
  std::vector<double> values(static_cast<std::size_t>(M) * K);
  for (std::int32_t r = 0; r < M; ++r)
    for (std::uint32_t k = 0; k < K; ++k) values[static_cast<std::size_t>(r) * K + k] = x.value(r, k);
  Buffer a(x.packed.size()), scales(x.scales.size()), out(static_cast<std::size_t>(M) * N * 4);
  std::memcpy(a.data, x.packed.data(), x.packed.size());
  std::memcpy(scales.data, x.scales.data(), x.scales.size());
  std::memset(out.data, 0xff, out.size);
  moejit_grouped_gemm_args_t g = contiguous_args(*p, MOEJIT_DTYPE_E2M1, a.data, K, out.data, N, offsets);
  g.act_scale = MOEJIT_ACT_SCALE_BLOCK32;
  g.a_scales = scales.data;
  g.a_scale_ld = x.scale_ld;
  REQUIRE_MESSAGE(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  const double err = contiguous_error(w.logical, values, offsets, out);
  CAPTURE(err);
  CHECK(err < 1e-5);  // f32 sums of exact products: the kernel adds no error of its own

  // Mix-ups.
  moejit_grouped_gemm_args_t bad = g;
  bad.act_scale = MOEJIT_ACT_SCALE_TOKEN;
  expect_error(moejit_grouped_gemm(c.ctx, &bad, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT,
               {"'args->act_scale' = 1 (token)", "MOEJIT_ACT_SCALE_BLOCK32"});
  bad = g;
  bad.a_scale_ld = K / 32;  // 12: not a multiple of 16
  expect_error(moejit_grouped_gemm(c.ctx, &bad, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT,
               {"'a_scale_ld' = 12", "multiple of 16"});
  bad = g;
  bad.act_dtype = MOEJIT_DTYPE_E4M3;
  bad.act_scale = MOEJIT_ACT_SCALE_TOKEN;
  expect_error(moejit_grouped_gemm(c.ctx, &bad, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT,
               {"'act_dtype' = e4m3", "packed for e2m1"});
  // INT4 weights have no e2m1 x e2m1 mma.
  moejit_weights_desc_t int4;
  moejit_weights_desc_init(&int4);
  int4.format = MOEJIT_WEIGHT_INT4_SYM;
  int4.group_size = 128;
  int4.scale_dtype = MOEJIT_DTYPE_BF16;
  int4.experts = 2;
  int4.n = 64;
  int4.k = 256;
  int4.act_dtype = MOEJIT_DTYPE_E2M1;
  moejit_packed_sizes_t sizes;
  std::vector<u8> codes(2 * 64 * 256, 1);
  std::vector<u16> int4_scales(2 * 64 * 2, 0x3f80);
  int4.qweight = codes.data();
  int4.scales = int4_scales.data();
  const moejit_status_t sized = moejit_packed_weights_size(c.ctx, &int4, &sizes);
  const moejit_status_t packed = sized == MOEJIT_OK ? [&] {
    Packed q;
    moejit_packed_weights_init(&q.w);
    q.q = std::make_unique<Buffer>(sizes.qweight_bytes);
    q.s = std::make_unique<Buffer>(sizes.scales_bytes);
    q.w.qweight = q.q->data;
    q.w.scales = q.s->data;
    q.w.qweight_bytes = sizes.qweight_bytes;
    q.w.scales_bytes = sizes.scales_bytes;
    return moejit_pack_weights(c.ctx, &int4, &q.w, nullptr);
  }() : sized;
  expect_error(packed, MOEJIT_ERROR_INVALID_ARGUMENT, {"a4", "int4_sym", "expected mxfp4"});

  // The default host context runs sm_90a kernels, which have no block-scaled mma.
  TempDir other;
  Context hopper(other);
  auto p90 = pack(hopper.ctx, d);
  moejit_grouped_gemm_args_t on90 = g;
  on90.weights = &p90->w;
  expect_error(moejit_grouped_gemm(hopper.ctx, &on90, nullptr), MOEJIT_ERROR_UNSUPPORTED,
               {"e2m1 needs the block-scaled mma of sm_120a or sm_121a, not sm_90a"});
  // And a host_arch that names no target.
  moejit_context_options_t o;
  moejit_context_options_init(&o);
  o.backend = MOEJIT_BACKEND_HOST;
  o.host_arch = "sm_75";
  moejit_context_t none = nullptr;
  expect_error(moejit_context_create(&o, &none), MOEJIT_ERROR_INVALID_ARGUMENT,
               {"'options->host_arch' = 'sm_75'", "sm_80 ... sm_121a"});
  CHECK(none == nullptr);
}

TEST_CASE("C ABI: the fused layer runs W4A4 on bf16 hidden states it quantizes, or on the caller's e2m1 ones") {
  TempDir dir;
  Context c(dir, MOEJIT_BACKEND_HOST, nullptr, 0, "sm_121a");
  const unsigned seed = std::random_device{}();
  INFO("seed: " << seed);
  std::mt19937 rng(seed);
  constexpr std::uint32_t E = 4, H = 256, I = 128, topk = 2;
  constexpr std::int32_t T = 5;
  const VllmWeights w13 = vllm_weights(rng, E, 2 * I, H), w2 = vllm_weights(rng, E, H, I);
  auto packed_for_e2m1 = [&](const VllmWeights& w, moejit_row_order_t rows) {
    moejit_weights_desc_t d = vllm_desc(w, rows, nullptr);
    d.act_dtype = MOEJIT_DTYPE_E2M1;
    return pack(c.ctx, d);
  };
  auto p13 = packed_for_e2m1(w13, MOEJIT_ROWS_CONCATENATED), p2 = packed_for_e2m1(w2, MOEJIT_ROWS_PLAIN);

  const std::vector<float> x = random_rows(rng, T, H);
  Buffer hidden(T * H * 2);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const u16 b = prim::twin::f32_to_bf16(x[i]);
    std::memcpy(static_cast<char*>(hidden.data) + 2 * i, &b, 2);
  }
  const fp4::Quantized q = fp4::quantize(x, T, H);
  Buffer hidden4(q.packed.size()), hidden_scales(q.scales.size());
  std::memcpy(hidden4.data, q.packed.data(), q.packed.size());
  std::memcpy(hidden_scales.data, q.scales.data(), q.scales.size());
  const Top2Routing routing = top2_routing(rng, T, E);
  Buffer out16(T * H * 2), out4(T * H * 2);
  moejit_fused_moe_args_t a = fused_args(*p13, *p2, T, routing, hidden.data, out16.data);
  a.act_scale = MOEJIT_ACT_SCALE_BLOCK32;
  std::uint64_t bytes = 0;
  REQUIRE_MESSAGE(moejit_fused_moe_workspace_size(c.ctx, &a, &bytes) == MOEJIT_OK, std::string(moejit_last_error()));
  Buffer workspace(bytes);
  a.workspace = workspace.data;
  a.workspace_bytes = bytes;
  REQUIRE_MESSAGE(moejit_fused_moe(c.ctx, &a, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  moejit_fused_moe_args_t b = a;
  b.act_dtype = MOEJIT_DTYPE_E2M1;
  b.hidden = hidden4.data;
  b.hidden_scales = hidden_scales.data;
  b.hidden_scale_ld = q.scale_ld;
  b.output = out4.data;
  REQUIRE_MESSAGE(moejit_fused_moe(c.ctx, &b, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  CHECK(std::memcmp(out16.data, out4.data, out16.size) == 0);

  // Against fp64 of the unquantized inputs: MXFP4's cost end to end.
  const double err = fused_layer_error(out16, x, w13, w2, routing.ids, routing.weights, topk);
  MESSAGE("W4A4 fused layer through the C ABI: relative error " << err << " end to end");
  CHECK(err < 0.3);

  moejit_fused_moe_args_t f = b;
  f.hidden_scale_ld = H / 32;  // 8: rows of E8M0 bytes are 16-byte aligned
  expect_error(moejit_fused_moe(c.ctx, &f, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT,
               {"'hidden_scale_ld' = 8", "multiple of 16"});
  f = a;
  f.act_scale = MOEJIT_ACT_SCALE_TOKEN;
  expect_error(moejit_fused_moe(c.ctx, &f, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT,
               {"'act_scale' = token", "packed for e2m1", "block32"});

  // Warm-up: E2M1 needs BLOCK32, and a target with the block-scaled mma.
  moejit_model_desc_t m = mxfp4_model(H, I, E, topk, 2);
  m.act_dtype = MOEJIT_DTYPE_E2M1;
  const char* spark = "sm_121a";
  expect_error(moejit_warmup(c.ctx, &m, &spark, 1, nullptr, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT,
               {"'model->act_scale' = 0 (none)", "MOEJIT_ACT_SCALE_BLOCK32"});
  m.act_scale = MOEJIT_ACT_SCALE_BLOCK32;
  const char* hopper = "sm_90a";
  expect_error(moejit_warmup(c.ctx, &m, &hopper, 1, nullptr, nullptr), MOEJIT_ERROR_UNSUPPORTED,
               {"e2m1 for sm_90a", "sm_120a or sm_121a"});
}
