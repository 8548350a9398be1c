// The C ABI with e4m3 activations (W4A8) on the host backend: weights packed for E4M3 from
// vLLM's MXFP4 layout, the grouped GEMM with per-token and per-128-k scales against the fp64
// reference of the quantized inputs; the errors a mix-up gives (weights packed for the other
// activation width, missing scales, a short scale stride); a caller compiled against the
// header before these fields were added still works.

#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/numeric.cuh"
#include "moejit/moejit.h"
#include "quant/pack.hpp"
#include "reference/compare.hpp"
#include "reference/reference.hpp"
#include "c_api_helpers.hpp"
#include "fp8_reference.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

// e4m3 activations with f32 scales (amax / 448 per token or per 128 k) and their values.
struct Act8 {
  std::vector<u8> codes;
  std::vector<float> scales;
  std::vector<double> values;  // code value * scale: what the reference reads
  std::int64_t scale_ld = 0;
};

Act8 quantize_rows(std::mt19937& rng, std::int64_t rows, std::uint32_t k, std::uint32_t block) {
  Act8 a;
  a.codes.resize(static_cast<std::size_t>(rows) * k);
  a.values.resize(a.codes.size());
  a.scale_ld = k / block;
  a.scales.resize(static_cast<std::size_t>(rows) * a.scale_ld);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::uint32_t b = 0; b < k / block; ++b) {
      std::vector<float> x(block);
      float amax = 0.0f;
      const float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 7) - 3);
      for (auto& v : x) amax = std::max(amax, std::fabs(v = dist(rng) * magnitude));
      const float scale = amax / 448.0f;
      a.scales[r * a.scale_ld + b] = scale;
      for (std::uint32_t i = 0; i < block; ++i) {
        const std::size_t at = static_cast<std::size_t>(r) * k + b * block + i;
        a.codes[at] = prim::twin::f32_to_e4m3(x[i] / scale);
        a.values[at] = static_cast<double>(prim::twin::e4m3_to_f32(a.codes[at])) * scale;
      }
    }
  return a;
}

}  // namespace

TEST_CASE("C ABI: grouped GEMM with E4M3 activations (per token and per 128 k) and MXFP4 weights packed for them") {
  TempDir dir;
  Context c(dir);
  std::mt19937 rng(std::random_device{}());
  constexpr std::uint32_t E = 4, N = 96, K = 384;
  const VllmWeights w = vllm_weights(rng, E, N, K);
  moejit_weights_desc_t d = vllm_desc(w, MOEJIT_ROWS_PLAIN, nullptr);
  d.act_dtype = MOEJIT_DTYPE_E4M3;
  auto p = pack(c.ctx, d);
  CHECK(p->w.act_dtype == MOEJIT_DTYPE_E4M3);

  std::vector<i32> offsets = {0, 7, 7, 20, 33};  // expert 1 has no rows
  const std::int32_t M = offsets.back();
  for (moejit_act_scale_t granularity : {MOEJIT_ACT_SCALE_TOKEN, MOEJIT_ACT_SCALE_BLOCK128}) {
    CAPTURE(static_cast<int>(granularity));
    const Act8 x = quantize_rows(rng, M, K, granularity == MOEJIT_ACT_SCALE_TOKEN ? K : 128);
    Buffer a(x.codes.size()), scales(x.scales.size() * 4), out(static_cast<std::size_t>(M) * N * 4);
    std::memcpy(a.data, x.codes.data(), x.codes.size());
    std::memcpy(scales.data, x.scales.data(), x.scales.size() * 4);
    std::memset(out.data, 0xff, static_cast<std::size_t>(M) * N * 4);
    moejit_grouped_gemm_args_t g = contiguous_args(*p, MOEJIT_DTYPE_E4M3, a.data, K, out.data, N, offsets);
    g.act_scale = granularity;
    g.a_scales = static_cast<const float*>(scales.data);
    g.a_scale_ld = x.scale_ld;
    REQUIRE_MESSAGE(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
    const double err = contiguous_error(w.logical, x.values, offsets, out);
    CAPTURE(err);
    CHECK(err < 1e-5);  // f32 sums of exact products: the kernel adds no error of its own
  }
}

TEST_CASE("C ABI: E4M3 mix-ups are errors that name the argument") {
  TempDir dir;
  Context c(dir);
  std::mt19937 rng(std::random_device{}());
  constexpr std::uint32_t E = 2, N = 64, K = 256;
  const VllmWeights w = vllm_weights(rng, E, N, K);
  moejit_weights_desc_t d16 = vllm_desc(w, MOEJIT_ROWS_PLAIN, nullptr);
  moejit_weights_desc_t d8 = d16;
  d8.act_dtype = MOEJIT_DTYPE_E4M3;
  auto p16 = pack(c.ctx, d16);
  auto p8 = pack(c.ctx, d8);
  CHECK(p16->w.act_dtype == MOEJIT_DTYPE_BF16);
  // The two packings hold the same codes in different places, the same scales and ranges, and
  // each its own packing mark (bits 16..31 of the range words).
  CHECK(std::memcmp(p16->q->data, p8->q->data, p16->w.qweight_bytes) != 0);
  const u64 ranges_at = mxfp4_scale_range_offset(E, N, K);
  CHECK(std::memcmp(p16->s->data, p8->s->data, ranges_at) == 0);
  for (std::uint32_t e = 0; e < E; ++e) {
    u32 r16, r8;
    std::memcpy(&r16, static_cast<const u8*>(p16->s->data) + ranges_at + 4 * e, 4);
    std::memcpy(&r8, static_cast<const u8*>(p8->s->data) + ranges_at + 4 * e, 4);
    CHECK((r16 & 0xffffu) == (r8 & 0xffffu));
    CHECK((r16 & 0xffff0000u) == packed_order_mark(PackedOrder::a16));
    CHECK((r8 & 0xffff0000u) == packed_order_mark(PackedOrder::a8));
  }

  std::vector<i32> offsets = {0, 3, 5};
  Buffer a(5 * K * 2), out(5 * N * 2);
  std::vector<float> scales(5, 0.01f);
  auto args = [&](const Packed& p, moejit_dtype_t act) {
    moejit_grouped_gemm_args_t g;
    moejit_grouped_gemm_args_init(&g);
    g.weights = &p.w;
    g.act_dtype = act;
    g.layout = MOEJIT_LAYOUT_CONTIGUOUS;
    g.m = 5;
    g.a = a.data;
    g.lda = K;
    g.c = out.data;
    g.ldc = N;
    g.expert_offsets = offsets.data();
    if (act == MOEJIT_DTYPE_E4M3) {
      g.act_scale = MOEJIT_ACT_SCALE_TOKEN;
      g.a_scales = scales.data();
    }
    return g;
  };
  auto fails = [&](const moejit_grouped_gemm_args_t& g, moejit_status_t code, std::initializer_list<const char*> words) {
    expect_error(moejit_grouped_gemm(c.ctx, &g, nullptr), code, words);
  };
  fails(args(*p16, MOEJIT_DTYPE_E4M3), MOEJIT_ERROR_INVALID_ARGUMENT, {"'act_dtype' = e4m3", "packed for bf16"});
  fails(args(*p8, MOEJIT_DTYPE_BF16), MOEJIT_ERROR_INVALID_ARGUMENT, {"'act_dtype' = bf16", "packed for e4m3"});
  moejit_grouped_gemm_args_t g = args(*p8, MOEJIT_DTYPE_E4M3);
  g.act_scale = MOEJIT_ACT_SCALE_NONE;
  fails(g, MOEJIT_ERROR_INVALID_ARGUMENT, {"'args->act_scale' = 0", "MOEJIT_ACT_SCALE_TOKEN"});
  g = args(*p8, MOEJIT_DTYPE_E4M3);
  g.a_scales = nullptr;
  fails(g, MOEJIT_ERROR_INVALID_ARGUMENT, {"'a_scales' is null"});
  g = args(*p8, MOEJIT_DTYPE_E4M3);
  g.act_scale = MOEJIT_ACT_SCALE_BLOCK128;
  g.a_scale_ld = 1;
  fails(g, MOEJIT_ERROR_INVALID_ARGUMENT, {"'a_scale_ld' = 1", "k / 128 = 2"});
  g = args(*p16, MOEJIT_DTYPE_BF16);
  g.act_scale = MOEJIT_ACT_SCALE_TOKEN;
  fails(g, MOEJIT_ERROR_INVALID_ARGUMENT, {"'args->act_scale' = 1", "NONE"});
  // An FP8 act_dtype in the weights description that is not a dtype the packing knows.
  moejit_weights_desc_t bad = d16;
  bad.act_dtype = MOEJIT_DTYPE_F32;
  moejit_packed_sizes_t sizes;
  CHECK(moejit_packed_weights_size(c.ctx, &bad, &sizes) == MOEJIT_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(moejit_last_error()).find("'desc->act_dtype' = f32") != std::string::npos);
}

TEST_CASE("C ABI: callers built before the E4M3 fields keep working with 16-bit activations") {
  TempDir dir;
  Context c(dir);
  std::mt19937 rng(std::random_device{}());
  constexpr std::uint32_t E = 2, N = 64, K = 128;
  const VllmWeights w = vllm_weights(rng, E, N, K);
  moejit_weights_desc_t d = vllm_desc(w, MOEJIT_ROWS_PLAIN, nullptr);
  d.struct_size = offsetof(moejit_weights_desc_t, act_dtype);  // the 0.1 struct's sizeof
  d.reserved0 = 0xa5a5a5a5u;                                     // its tail padding: garbage, never read
  d.act_dtype = MOEJIT_DTYPE_E4M3;                               // past its end: never read
  auto p = pack(c.ctx, d);
  p->w.struct_size = offsetof(moejit_packed_weights_t, act_dtype);
  p->w.act_dtype = MOEJIT_DTYPE_E4M3;  // past its end: never read

  std::vector<i32> offsets = {0, 4, 9};
  const std::int32_t M = offsets.back();
  Buffer a(M * K * 2), out(M * N * 4);
  const std::vector<double> x = random_activations(a.data, M * K, DType::bf16, rng);
  moejit_grouped_gemm_args_t g = contiguous_args(*p, MOEJIT_DTYPE_BF16, a.data, K, out.data, N, offsets);
  g.struct_size = offsetof(moejit_grouped_gemm_args_t, act_scale);
  g.act_scale = MOEJIT_ACT_SCALE_BLOCK128;  // past its end: never read
  REQUIRE_MESSAGE(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  CHECK(contiguous_error(w.logical, x, offsets, out) < 5e-3);
  // One byte short of the 0.1 struct is still refused.
  g.struct_size = offsetof(moejit_grouped_gemm_args_t, act_scale) - 1;
  CHECK(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("C ABI: the fused layer runs W4A8 on bf16 hidden states it quantizes, or on the caller's e4m3 ones") {
  TempDir dir;
  Context c(dir);
  const unsigned seed = std::random_device{}();
  INFO("seed: " << seed);
  std::mt19937 rng(seed);
  constexpr std::uint32_t E = 4, H = 256, I = 128, topk = 2;
  constexpr std::int32_t T = 5;
  const VllmWeights w13 = vllm_weights(rng, E, 2 * I, H), w2 = vllm_weights(rng, E, H, I);
  auto packed_for_e4m3 = [&](const VllmWeights& w, moejit_row_order_t rows) {
    moejit_weights_desc_t d = vllm_desc(w, rows, nullptr);
    d.act_dtype = MOEJIT_DTYPE_E4M3;
    return pack(c.ctx, d);
  };
  auto p13 = packed_for_e4m3(w13, MOEJIT_ROWS_CONCATENATED), p2 = packed_for_e4m3(w2, MOEJIT_ROWS_PLAIN);
  CHECK(p13->w.act_dtype == MOEJIT_DTYPE_E4M3);

  // bf16 hidden states, and the same values quantized per 128 columns with the documented recipe.
  std::vector<float> x(T * H);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  Buffer hidden(T * H * 2);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const u16 b = prim::twin::f32_to_bf16(dist(rng) * (1 + static_cast<float>(i / H)));
    std::memcpy(static_cast<char*>(hidden.data) + 2 * i, &b, 2);
    x[i] = prim::twin::bf16_to_f32(b);
  }
  const fp8::Quantized q = fp8::quantize(x, T, H, true);
  Buffer hidden8(T * H);
  std::memcpy(hidden8.data, q.codes.data(), q.codes.size());
  const Top2Routing routing = top2_routing(rng, T, E);
  Buffer out16(T * H * 2), out8(T * H * 2);
  moejit_fused_moe_args_t a = fused_args(*p13, *p2, T, routing, hidden.data, out16.data);
  a.act_scale = MOEJIT_ACT_SCALE_BLOCK128;
  std::uint64_t bytes = 0;
  REQUIRE_MESSAGE(moejit_fused_moe_workspace_size(c.ctx, &a, &bytes) == MOEJIT_OK, std::string(moejit_last_error()));
  Buffer workspace(bytes);
  a.workspace = workspace.data;
  a.workspace_bytes = bytes;
  REQUIRE_MESSAGE(moejit_fused_moe(c.ctx, &a, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));

  moejit_fused_moe_args_t b = a;  // the caller's e4m3 hidden states and scales
  b.act_dtype = MOEJIT_DTYPE_E4M3;
  b.hidden = hidden8.data;
  b.hidden_scales = q.scales.data();
  b.hidden_scale_ld = H / 128;
  b.output = out8.data;
  REQUIRE_MESSAGE(moejit_fused_moe(c.ctx, &b, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  CHECK(std::memcmp(out16.data, out8.data, out16.size) == 0);

  // The same scales column-major, [H / 128][T + 3] with NaN in the gap (as DeepEP's normal
  // dispatch and DeepGEMM give them): read in place, the same output bit for bit.
  std::vector<float> columns((H / 128) * (T + 3), std::nanf(""));
  for (std::int32_t t = 0; t < T; ++t)
    for (std::uint32_t blk = 0; blk < H / 128; ++blk) columns[blk * (T + 3) + t] = q.scales[t * (H / 128) + blk];
  Buffer out_columns(T * H * 2);
  moejit_fused_moe_args_t cm = b;
  cm.hidden_scales = columns.data();
  cm.hidden_scale_ld = 1;
  cm.hidden_scale_k_stride = T + 3;
  cm.output = out_columns.data;
  REQUIRE_MESSAGE(moejit_fused_moe(c.ctx, &cm, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  CHECK(std::memcmp(out8.data, out_columns.data, out8.size) == 0);

  // The output is the layer: against fp64 of the unquantized inputs, FP8's few percent.
  const double err = fused_layer_error(out16, x, w13, w2, routing.ids, routing.weights, topk);
  MESSAGE("W4A8 fused layer through the C ABI, block128 scales: relative error " << err << " end to end");
  CHECK(err < 0.1);

  // Mix-ups name the argument.
  auto fails = [&](const moejit_fused_moe_args_t& f, std::initializer_list<const char*> words) {
    expect_error(moejit_fused_moe(c.ctx, &f, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, words);
  };
  moejit_fused_moe_args_t f = a;
  f.act_scale = MOEJIT_ACT_SCALE_NONE;
  fails(f, {"'act_scale' = none", "packed for e4m3", "token or block128"});
  f = a;
  f.struct_size = offsetof(moejit_fused_moe_args_t, act_scale);  // a 0.1 caller cannot run W4A8 weights
  f.reserved0 = 0xa5a5a5a5u;  // the 0.1 struct's tail padding, inside its sizeof: never read
  fails(f, {"'act_scale' = none"});
  f = b;
  f.hidden_scales = nullptr;
  fails(f, {"'hidden_scales'", "f32 scales of the e4m3 hidden states"});
  f = b;
  f.act_scale = static_cast<moejit_act_scale_t>(7);
  fails(f, {"'args->act_scale' = 7", "moejit_act_scale_t"});
  f = a;  // bf16 hidden states: the layer quantizes them, their scales are its own
  f.hidden_scale_k_stride = T + 3;
  fails(f, {"'hidden_scale_k_stride' = 8", "only e4m3 hidden states with block128 scales"});
  f = cm;
  f.hidden_scale_ld = 0;
  fails(f, {"'hidden_scale_ld' = 0 with hidden_scale_k_stride = 8", ">= 1"});
  f = cm;
  f.hidden_scale_k_stride = -2;
  fails(f, {"'hidden_scale_k_stride' = -2"});
  // Strides whose products pass 64 bits would send the kernel's scale loads anywhere.
  f = b;
  f.hidden_scale_ld = INT64_MAX / 2;
  fails(f, {"'hidden_scale_ld' = 4611686018427387903", "tokens", "2^60"});
  f = cm;
  f.hidden_scale_k_stride = std::int64_t{1} << 62;
  fails(f, {"'hidden_scale_k_stride' = 4611686018427387904", "128-column blocks", "2^60"});

  // Warm-up's model description: E4M3 needs a scale granularity.
  moejit_model_desc_t m = mxfp4_model(H, I, E, topk, 4);
  m.act_dtype = MOEJIT_DTYPE_E4M3;
  const char* arch = "sm_90a";
  CHECK(moejit_warmup(c.ctx, &m, &arch, 1, nullptr, nullptr) == MOEJIT_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(moejit_last_error()).find("'model->act_scale' = 0 (none): expected MOEJIT_ACT_SCALE_TOKEN or "
                                              "MOEJIT_ACT_SCALE_BLOCK128 with e4m3") != std::string::npos);
  m.act_dtype = MOEJIT_DTYPE_BF16;
  m.act_scale = MOEJIT_ACT_SCALE_TOKEN;
  CHECK(moejit_warmup(c.ctx, &m, &arch, 1, nullptr, nullptr) == MOEJIT_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(moejit_last_error()).find("'model->act_scale' = 1 (token): expected MOEJIT_ACT_SCALE_NONE") !=
        std::string::npos);
}

TEST_CASE("C ABI: masked grouped GEMM reads DeepEP low-latency scale slabs [E][K / 128][m] in place") {
  // DeepEP's low-latency dispatch gives each local expert m rows of e4m3 activations and their
  // per-128 scales as one column-major [K / 128][m] slab per expert; with a_scale_ld 1,
  // a_scale_k_stride m (here m + 2) and a_scale_expert_stride the slab size (here plus 3, gaps of
  // NaN) the GEMM reads them where they are, and gives what row-major scales give, bit for bit.
  TempDir dir;
  Context c(dir);
  const unsigned seed = std::random_device{}();
  INFO("seed: " << seed);
  std::mt19937 rng(seed);
  constexpr std::uint32_t E = 3, N = 64, K = 512, B = K / 128;
  constexpr std::int32_t m = 9;
  const VllmWeights w = vllm_weights(rng, E, N, K);
  moejit_weights_desc_t d = vllm_desc(w, MOEJIT_ROWS_PLAIN, nullptr);
  d.act_dtype = MOEJIT_DTYPE_E4M3;
  auto p = pack(c.ctx, d);
  const Act8 x = quantize_rows(rng, E * m, K, 128);
  std::vector<i32> counts = {m, 0, 5};  // an empty expert and a partial one
  Buffer a(x.codes.size());
  std::memcpy(a.data, x.codes.data(), x.codes.size());
  constexpr std::int64_t k_stride = m + 2, expert_stride = B * k_stride + 3;
  std::vector<float> slabs(E * expert_stride, std::nanf(""));
  for (std::uint32_t e = 0; e < E; ++e)
    for (std::int32_t t = 0; t < m; ++t)
      for (std::uint32_t blk = 0; blk < B; ++blk)
        slabs[e * expert_stride + blk * k_stride + t] = x.scales[(e * m + t) * B + blk];

  auto run = [&](const float* scales, std::int64_t ld, std::int64_t ks, std::int64_t es, Buffer& out) {
    std::memset(out.data, 0xff, out.size);
    moejit_grouped_gemm_args_t g = masked_args(*p, MOEJIT_DTYPE_E4M3, a.data, K, out.data, N, m, counts);
    g.act_scale = MOEJIT_ACT_SCALE_BLOCK128;
    g.a_scales = scales;
    g.a_scale_ld = ld;
    g.a_scale_k_stride = ks;
    g.a_scale_expert_stride = es;
    return g;
  };
  Buffer row_major(E * m * N * 4), in_place(E * m * N * 4);
  moejit_grouped_gemm_args_t g = run(x.scales.data(), B, 0, 0, row_major);
  REQUIRE_MESSAGE(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  g = run(slabs.data(), 1, k_stride, expert_stride, in_place);
  REQUIRE_MESSAGE(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  CHECK(std::memcmp(row_major.data, in_place.data, row_major.size) == 0);
  // The written rows are finite and right (those of expert 1 and past expert 2's count stay
  // poison in both).
  std::size_t finite = 0;
  for (std::size_t i = 0; i < static_cast<std::size_t>(E * m * N); ++i) finite += std::isfinite(static_cast<const float*>(in_place.data)[i]);
  CHECK(finite == static_cast<std::size_t>((m + 5) * N));

  auto fails = [&](const moejit_grouped_gemm_args_t& bad, std::initializer_list<const char*> words) {
    expect_error(moejit_grouped_gemm(c.ctx, &bad, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, words);
  };
  moejit_grouped_gemm_args_t bad = run(slabs.data(), 1, k_stride, -1, in_place);
  fails(bad, {"'args->a_scale_expert_stride' = -1", ">= 0"});
  bad = run(slabs.data(), 1, -4, expert_stride, in_place);
  fails(bad, {"'args->a_scale_k_stride' = -4"});
  bad = run(slabs.data(), 0, k_stride, expert_stride, in_place);
  fails(bad, {"'a_scale_ld' = 0 with a_scale_k_stride = 11", ">= 1"});
  bad = run(slabs.data(), 1, k_stride, expert_stride, in_place);
  bad.act_scale = MOEJIT_ACT_SCALE_TOKEN;
  fails(bad, {"'args->a_scale_expert_stride' = 47 with act_scale token", "only BLOCK128 scales"});
  bad.a_scale_expert_stride = 0;
  fails(bad, {"'args->a_scale_k_stride' = 11 with act_scale token", "expected 0 or 1"});
  bad = run(slabs.data(), 1, k_stride, expert_stride, in_place);
  bad.layout = MOEJIT_LAYOUT_CONTIGUOUS;
  fails(bad, {"'args->a_scale_expert_stride' = 47", "MOEJIT_LAYOUT_MASKED"});
}

TEST_CASE("C ABI: a fused layer with MXFP4 weights marked for other activations gives NaN tokens, 16-bit and W4A8") {
  // The packing mark (templates/README.md) through the whole layer: a refused gate/up GEMM's NaN
  // must survive the activation, W4A8's re-quantization of the gate/up output and the top-k
  // sum; a refused down GEMM's the sum. Nothing finite comes out of a mislabelled layer.
  TempDir dir;
  Context c(dir);
  std::mt19937 rng(std::random_device{}());
  constexpr std::uint32_t E = 4, H = 256, I = 128;
  constexpr std::int32_t T = 5;
  const VllmWeights w13 = vllm_weights(rng, E, 2 * I, H), w2 = vllm_weights(rng, E, H, I);
  Buffer hidden(T * H * 2), out(T * H * 2);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (std::size_t i = 0; i < T * H; ++i) {
    const u16 b = prim::twin::f32_to_bf16(dist(rng));
    std::memcpy(static_cast<char*>(hidden.data) + 2 * i, &b, 2);
  }
  const Top2Routing routing = top2_routing(rng, T, E);
  for (const moejit_dtype_t packed_for : {MOEJIT_DTYPE_BF16, MOEJIT_DTYPE_E4M3}) {
    CAPTURE(packed_for);
    auto packed = [&](const VllmWeights& w, moejit_row_order_t rows) {
      moejit_weights_desc_t d = vllm_desc(w, rows, nullptr);
      d.act_dtype = packed_for;
      return pack(c.ctx, d);
    };
    auto p13 = packed(w13, MOEJIT_ROWS_CONCATENATED), p2 = packed(w2, MOEJIT_ROWS_PLAIN);
    const PackedOrder own = packed_for == MOEJIT_DTYPE_BF16 ? PackedOrder::a16 : PackedOrder::a8;
    const PackedOrder other = packed_for == MOEJIT_DTYPE_BF16 ? PackedOrder::a8 : PackedOrder::a16;
    moejit_fused_moe_args_t a = fused_args(*p13, *p2, T, routing, hidden.data, out.data);
    if (packed_for == MOEJIT_DTYPE_E4M3) a.act_scale = MOEJIT_ACT_SCALE_TOKEN;
    std::uint64_t bytes = 0;
    REQUIRE_MESSAGE(moejit_fused_moe_workspace_size(c.ctx, &a, &bytes) == MOEJIT_OK, std::string(moejit_last_error()));
    Buffer workspace(bytes);
    a.workspace = workspace.data;
    a.workspace_bytes = bytes;
    // (finite outputs expected, which mark is where): as packed; w13 refused; w2 refused.
    for (const auto& [expect_finite, mark13, mark2] :
         {std::tuple{true, own, own}, std::tuple{false, other, own}, std::tuple{false, own, other}}) {
      CAPTURE(expect_finite);
      set_packing_marks(*p13, packed_order_mark(mark13) >> 16);
      set_packing_marks(*p2, packed_order_mark(mark2) >> 16);
      std::memset(out.data, 0xff, out.size);
      std::memset(workspace.data, 0x5a, workspace.size);  // garbage, as a reused workspace holds
      REQUIRE_MESSAGE(moejit_fused_moe(c.ctx, &a, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
      std::size_t finite = 0, poison = 0;
      for (std::size_t i = 0; i < T * H; ++i) {
        u16 h;
        std::memcpy(&h, static_cast<const char*>(out.data) + 2 * i, 2);
        finite += (h & 0x7f80) != 0x7f80;
        poison += h == 0xffff;
      }
      CHECK(poison == 0);
      CHECK(finite == (expect_finite ? std::size_t{T * H} : 0));
    }
  }
}

// The workspace query sizes a layer from shapes alone, so it must refuse what no kernel runs
// instead of promising a size for a layer every call then refuses.
TEST_CASE("C ABI: the fused workspace query refuses layers no kernel runs, naming the argument") {
  auto packed = [](std::uint32_t experts, std::uint32_t n, std::uint32_t k, bool gate_up, moejit_dtype_t act) {
    moejit_packed_weights_t w;
    moejit_packed_weights_init(&w);  // shapes only: the query reads no buffer
    w.format = MOEJIT_WEIGHT_MXFP4;
    w.group_size = 32;
    w.scale_dtype = MOEJIT_DTYPE_E8M0;
    w.experts = experts;
    w.n = n;
    w.k = k;
    w.act_and_mul = gate_up;
    w.act_dtype = act;
    return w;
  };
  struct Case {
    const char* name;
    const char* arch;
    std::uint32_t experts, hidden, inter;
    moejit_dtype_t packed_for;
    moejit_status_t code;
    std::vector<const char*> words;
  };
  const std::vector<Case> cases = {
      {"W4A8 before sm_89", "sm_80", 4, 256, 128, MOEJIT_DTYPE_E4M3, MOEJIT_ERROR_UNSUPPORTED,
       {"'w13'", "e4m3", "sm_89 or newer", "sm_80"}},
      {"W4A8 on sm_86", "sm_86", 4, 256, 128, MOEJIT_DTYPE_E4M3, MOEJIT_ERROR_UNSUPPORTED, {"sm_86"}},
      {"more local experts than one launch serves", "sm_90a", 5000, 256, 128, MOEJIT_DTYPE_BF16,
       MOEJIT_ERROR_INVALID_ARGUMENT, {"w13->experts' = 5000", "1 to 4096"}},
      {"hidden rows longer than moejit quantizes", "sm_90a", 2, 65536 + 128, 128, MOEJIT_DTYPE_E4M3,
       MOEJIT_ERROR_INVALID_ARGUMENT, {"hidden = 65664", "at most 65536"}},
      {"intermediate rows longer than moejit quantizes", "sm_90a", 2, 128, 65536 + 128, MOEJIT_DTYPE_E4M3,
       MOEJIT_ERROR_INVALID_ARGUMENT, {"intermediate = 65664", "at most 65536"}},
      {"within every bound: sized", "sm_89", 4096, 256, 128, MOEJIT_DTYPE_E4M3, MOEJIT_OK, {}},
  };
  for (const Case& c : cases) {
    INFO(std::string(c.name));
    TempDir dir;
    Context ctx(dir, MOEJIT_BACKEND_HOST, nullptr, 0, c.arch);
    moejit_packed_weights_t w13 = packed(c.experts, 2 * c.inter, c.hidden, true, c.packed_for);
    moejit_packed_weights_t w2 = packed(c.experts, c.hidden, c.inter, false, c.packed_for);
    moejit_fused_moe_args_t a;
    moejit_fused_moe_args_init(&a);
    a.w13 = &w13;
    a.w2 = &w2;
    a.tokens = 4;
    a.topk = 2;
    if (c.packed_for == MOEJIT_DTYPE_E4M3) a.act_scale = MOEJIT_ACT_SCALE_TOKEN;
    constexpr std::uint64_t kUnset = 0x5a5a5a5a;
    std::uint64_t bytes = kUnset;
    CHECK(moejit_fused_moe_workspace_size(ctx.ctx, &a, &bytes) == c.code);
    const std::string message = c.code == MOEJIT_OK ? "" : moejit_last_error();
    for (const char* word : c.words) CHECK_MESSAGE(message.find(word) != std::string::npos, word << " in: " << message);
    if (c.code == MOEJIT_OK)
      CHECK((bytes != kUnset && bytes > 0));
    else
      CHECK(bytes == kUnset);  // a refused query stores nothing
  }
}
