#pragma once
// What the C ABI suites share: a context on a temporary store, owned aligned buffers, packing
// through moejit.h, and MXFP4 weights laid out as vLLM holds them with their logical form for
// the fp64 reference.

#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/numeric.cuh"
#include "gemm/grouped_gemm_params.cuh"
#include "moejit/moejit.h"
#include "reference/compare.hpp"
#include "reference/quantize.hpp"
#include "reference/reference.hpp"
#include "test_support.hpp"

namespace moejit::test {

// `count` standard-normal activations rounded to `dtype` (bf16 or f16) into `data`; their exact
// values, for the reference.
template <typename Rng>
inline std::vector<double> random_activations(void* data, std::size_t count, DType dtype, Rng& rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<double> exact(count);
  for (std::size_t i = 0; i < count; ++i) {
    const u16 h = dtype == DType::bf16 ? prim::twin::f32_to_bf16(dist(rng)) : prim::twin::f32_to_f16(dist(rng));
    static_cast<u16*>(data)[i] = h;
    exact[i] = dtype == DType::bf16 ? prim::twin::bf16_to_f32(h) : prim::twin::f16_to_f32(h);
  }
  return exact;
}

// Owned, 256-byte aligned host memory.
struct Buffer {
  explicit Buffer(std::size_t bytes) : size(bytes), data(std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256)) {
    std::memset(data, 0xff, size);
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  std::size_t size;
  void* data;
};

struct Context {
  explicit Context(const TempDir& dir, moejit_backend_t backend = MOEJIT_BACKEND_HOST, const char* manifest = nullptr,
                   int frozen = 0, const char* host_arch = nullptr) {
    cache = dir / "store";
    moejit_context_options_t o;
    moejit_context_options_init(&o);
    o.backend = backend;
    o.cache_dir = cache.c_str();
    o.usage_manifest = manifest;
    o.frozen = frozen;
    o.host_arch = host_arch;
    REQUIRE_MESSAGE(moejit_context_create(&o, &ctx) == MOEJIT_OK, std::string(moejit_last_error()));
  }
  ~Context() { moejit_context_destroy(ctx); }
  std::string cache;
  moejit_context_t ctx = nullptr;
};

// A C ABI call's status is `code`, and moejit_last_error() holds each of `words`.
inline void expect_error(moejit_status_t got, moejit_status_t code, std::initializer_list<const char*> words) {
  CHECK(got == code);
  const std::string message = moejit_last_error();
  CAPTURE(message);
  for (const char* word : words) CHECK(message.find(word) != std::string::npos);
}

// Packed weights with their buffers.
struct Packed {
  moejit_packed_weights_t w{};
  std::unique_ptr<Buffer> q, s, z, b;
};

inline std::unique_ptr<Packed> pack(moejit_context_t ctx, moejit_weights_desc_t d) {
  moejit_packed_sizes_t sizes;
  REQUIRE_MESSAGE(moejit_packed_weights_size(ctx, &d, &sizes) == MOEJIT_OK, std::string(moejit_last_error()));
  auto p = std::make_unique<Packed>();
  moejit_packed_weights_init(&p->w);
  p->q = std::make_unique<Buffer>(sizes.qweight_bytes);
  p->s = std::make_unique<Buffer>(sizes.scales_bytes);
  p->w.qweight = p->q->data;
  p->w.scales = p->s->data;
  p->w.qweight_bytes = sizes.qweight_bytes;
  p->w.scales_bytes = sizes.scales_bytes;
  if (sizes.zeros_bytes) {
    p->z = std::make_unique<Buffer>(sizes.zeros_bytes);
    p->w.zeros = p->z->data;
    p->w.zeros_bytes = sizes.zeros_bytes;
  }
  if (sizes.bias_bytes) {
    p->b = std::make_unique<Buffer>(sizes.bias_bytes);
    p->w.bias = static_cast<float*>(p->b->data);
    p->w.bias_bytes = sizes.bias_bytes;
  }
  REQUIRE_MESSAGE(moejit_pack_weights(ctx, &d, &p->w, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  return p;
}

// Expert e's range word after an MXFP4 scales buffer (templates/README.md): scale-byte range in
// bits 0..15, packing mark in bits 16..31.
inline u32 range_word(const Packed& p, std::uint32_t e) {
  u32 word;
  std::memcpy(&word, static_cast<const u8*>(p.s->data) + mxfp4_scale_range_offset(p.w.experts, p.w.n, p.w.k) + 4 * e, 4);
  return word;
}
// Every expert's packing mark replaced by `mark` (0: as packed before the mark existed).
inline void set_packing_marks(Packed& p, u32 mark) {
  for (std::uint32_t e = 0; e < p.w.experts; ++e) {
    const u32 word = (range_word(p, e) & 0xffffu) | mark << 16;
    std::memcpy(static_cast<u8*>(p.s->data) + mxfp4_scale_range_offset(p.w.experts, p.w.n, p.w.k) + 4 * e, &word, 4);
  }
}

// MXFP4 weights [E][N][K] as vLLM holds them, with their logical form for the reference.
struct VllmWeights {
  quant::QuantizedWeights logical;
  std::vector<u8> blocks, scales;
};

inline VllmWeights vllm_weights(std::mt19937& rng, std::uint32_t e, std::uint32_t n, std::uint32_t k) {
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> w(static_cast<std::size_t>(e) * n * k);
  for (auto& v : w) v = dist(rng);
  auto q = quant::quantize(w, e, n, k, {WeightFormat::mxfp4, 32, DType::e8m0});
  REQUIRE(q.ok());
  VllmWeights out;
  out.logical = *q;
  out.blocks.resize(w.size() / 2);
  for (std::size_t i = 0; i < out.blocks.size(); ++i)
    out.blocks[i] = static_cast<u8>(q->codes[2 * i] | q->codes[2 * i + 1] << 4);
  out.scales.resize(q->scales.size());
  for (std::size_t i = 0; i < out.scales.size(); ++i) out.scales[i] = static_cast<u8>(q->scales[i]);
  return out;
}

inline moejit_weights_desc_t vllm_desc(const VllmWeights& w, moejit_row_order_t rows, const float* bias) {
  moejit_weights_desc_t d;
  moejit_weights_desc_init(&d);
  d.format = MOEJIT_WEIGHT_MXFP4;
  d.group_size = 32;
  d.scale_dtype = MOEJIT_DTYPE_E8M0;
  d.experts = w.logical.experts;
  d.n = w.logical.n;
  d.k = w.logical.k;
  d.source = MOEJIT_SOURCE_VLLM_MXFP4;
  d.rows = rows;
  d.qweight = w.blocks.data();
  d.scales = w.scales.data();
  d.bias = bias;
  return d;
}

// Symmetric INT4 weights from plain codes (u8 [E][N][K], 0..15) and 16-bit scales ([E][N][K/G]).
inline moejit_weights_desc_t int4_plain_desc(const std::vector<u8>& codes, const std::vector<u16>& scales,
                                             moejit_dtype_t scale_dtype, std::uint32_t group, std::uint32_t e,
                                             std::uint32_t n, std::uint32_t k) {
  moejit_weights_desc_t d;
  moejit_weights_desc_init(&d);
  d.format = MOEJIT_WEIGHT_INT4_SYM;
  d.group_size = group;
  d.scale_dtype = scale_dtype;
  d.experts = e;
  d.n = n;
  d.k = k;
  d.source = MOEJIT_SOURCE_PLAIN_CODES;
  d.qweight = codes.data();
  d.scales = scales.data();
  return d;
}

// A model for warm-up and prepare: MXFP4 weights (group 32, E8M0 scales), the rest defaults.
inline moejit_model_desc_t mxfp4_model(std::uint32_t hidden, std::uint32_t intermediate, std::uint32_t experts,
                                       std::uint32_t topk, std::uint32_t max_tokens) {
  moejit_model_desc_t m;
  moejit_model_desc_init(&m);
  m.hidden = hidden;
  m.intermediate = intermediate;
  m.experts = experts;
  m.topk = topk;
  m.format = MOEJIT_WEIGHT_MXFP4;
  m.group_size = 32;
  m.scale_dtype = MOEJIT_DTYPE_E8M0;
  m.max_tokens = max_tokens;
  return m;
}

// Arguments of a grouped GEMM of `layout` over `m` (contiguous: rows; masked: rows per expert)
// with an f32 output; the caller adds the layout's routing.
inline moejit_grouped_gemm_args_t gemm_args(const Packed& p, moejit_dtype_t act, moejit_layout_t layout, std::int32_t m,
                                            const void* a, std::uint32_t k, void* c, std::uint32_t n) {
  moejit_grouped_gemm_args_t g;
  moejit_grouped_gemm_args_init(&g);
  g.weights = &p.w;
  g.act_dtype = act;
  g.out_dtype = MOEJIT_DTYPE_F32;
  g.layout = layout;
  g.m = m;
  g.a = a;
  g.lda = k;
  g.c = c;
  g.ldc = n;
  return g;
}

// A masked-layout grouped GEMM ([E, m, k] rows, counts[E] valid).
inline moejit_grouped_gemm_args_t masked_args(const Packed& p, moejit_dtype_t act, const void* a, std::uint32_t k,
                                              void* c, std::uint32_t n, std::int32_t m, const std::vector<i32>& counts) {
  moejit_grouped_gemm_args_t g = gemm_args(p, act, MOEJIT_LAYOUT_MASKED, m, a, k, c, n);
  g.expert_counts = counts.data();
  return g;
}

// A contiguous-layout grouped GEMM of offsets.back() rows.
inline moejit_grouped_gemm_args_t contiguous_args(const Packed& p, moejit_dtype_t act, const void* a, std::uint32_t k,
                                                  void* c, std::uint32_t n, const std::vector<i32>& offsets) {
  moejit_grouped_gemm_args_t g = gemm_args(p, act, MOEJIT_LAYOUT_CONTIGUOUS, offsets.back(), a, k, c, n);
  g.expert_offsets = offsets.data();
  return g;
}

// The relative error of that f32 output (rows of weights.n floats from `out`) against the fp64
// reference of `weights` and `a`.
inline double contiguous_error(const quant::QuantizedWeights& weights, const std::vector<double>& a,
                               const std::vector<i32>& offsets, const float* out) {
  quant::ReferenceProblem ref;
  ref.layout = Layout::contiguous;
  ref.weights = &weights;
  ref.a = a;
  ref.m = offsets.back();
  ref.expert_offsets = offsets;
  auto want = quant::reference_grouped_gemm(ref);
  REQUIRE(want.ok());
  std::vector<double> got(static_cast<std::size_t>(offsets.back()) * weights.n);
  for (std::size_t i = 0; i < got.size(); ++i) got[i] = out[i];
  return quant::relative_frobenius_error(got, want->c, weights.n, want->written);
}
inline double contiguous_error(const quant::QuantizedWeights& weights, const std::vector<double>& a,
                               const std::vector<i32>& offsets, const Buffer& out) {
  return contiguous_error(weights, a, offsets, static_cast<const float*>(out.data));
}

// Top-2 routing of `tokens` tokens over `experts` experts: two different experts per token, at
// weights 0.7 and 0.3.
struct Top2Routing {
  std::vector<i32> ids;
  std::vector<float> weights;
};
inline Top2Routing top2_routing(std::mt19937& rng, std::int32_t tokens, std::uint32_t experts) {
  Top2Routing r;
  r.ids.resize(static_cast<std::size_t>(tokens) * 2);
  r.weights.resize(r.ids.size());
  for (std::int32_t t = 0; t < tokens; ++t) {
    r.ids[2 * t] = static_cast<i32>(rng() % experts);
    r.ids[2 * t + 1] = static_cast<i32>((r.ids[2 * t] + 1 + rng() % (experts - 1)) % experts);
    r.weights[2 * t] = 0.7f;
    r.weights[2 * t + 1] = 0.3f;
  }
  return r;
}

// The arguments of a fused layer over packed w13 / w2 on `hidden` (16-bit by default) with that
// routing, writing `output`; no workspace yet.
inline moejit_fused_moe_args_t fused_args(const Packed& w13, const Packed& w2, std::int32_t tokens,
                                          const Top2Routing& routing, const void* hidden, void* output) {
  moejit_fused_moe_args_t a;
  moejit_fused_moe_args_init(&a);
  a.w13 = &w13.w;
  a.w2 = &w2.w;
  a.tokens = tokens;
  a.topk = 2;
  a.hidden = hidden;
  a.topk_ids = routing.ids.data();
  a.topk_weights = routing.weights.data();
  a.output = output;
  return a;
}

// The relative error of a fused SiLU layer's bf16 output against fp64 of its unquantized
// inputs: hidden `x` [T, H], w13 [E, 2I, H] and w2 [E, H, I] (logical), routing ids/weights.
inline double fused_layer_error(const Buffer& out, const std::vector<float>& x, const VllmWeights& w13,
                                const VllmWeights& w2, const std::vector<i32>& ids, const std::vector<float>& weights,
                                std::uint32_t topk) {
  const std::uint32_t H = w13.logical.k, I = w2.logical.k;
  const std::size_t T = x.size() / H;
  std::vector<double> want(T * H, 0.0), got(T * H);
  for (std::size_t t = 0; t < T; ++t)
    for (std::uint32_t k = 0; k < topk; ++k) {
      const i32 e = ids[t * topk + k];
      std::vector<double> act(I);
      for (std::uint32_t i = 0; i < I; ++i) {
        double gate = 0, up = 0;
        for (std::uint32_t h = 0; h < H; ++h) {
          gate += x[t * H + h] * w13.logical.dequantized(e, i, h);
          up += x[t * H + h] * w13.logical.dequantized(e, I + i, h);
        }
        act[i] = quant::silu_and_mul(gate, up);
      }
      for (std::uint32_t h = 0; h < H; ++h) {
        double s = 0;
        for (std::uint32_t i = 0; i < I; ++i) s += act[i] * w2.logical.dequantized(e, h, i);
        want[t * H + h] += weights[t * topk + k] * s;
      }
    }
  for (std::size_t i = 0; i < got.size(); ++i) {
    u16 v;
    std::memcpy(&v, static_cast<const char*>(out.data) + 2 * i, 2);
    got[i] = prim::twin::bf16_to_f32(v);
  }
  return quant::relative_frobenius_error(got, want);
}

}  // namespace moejit::test
