#pragma once
// Runs one fused MoE layer through the dispatch op on any launcher (host or device) and checks
// it against an fp64 reference (header-only, shared by the host and device suites). Weights are
// quantized from fresh random values, packed from the plain-codes layout through the library's
// packing op, and the output is poisoned before the run.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "common/numeric.cuh"
#include "dispatch/fused_moe_op.hpp"
#include "dispatch/spec_observer.hpp"
#include "dispatch/weight_pack_op.hpp"
#include "fp4_reference.hpp"
#include "fp8_reference.hpp"
#include "reference/compare.hpp"
#include "reference/quantize.hpp"
#include "reference/reference.hpp"
#include "spec/spec_fields.hpp"
#include "test_support.hpp"

namespace moejit::test {

// Memory in a launcher's address space, freed with the object.
class TestMemory {
 public:
  virtual ~TestMemory() = default;
  virtual void* allocate(std::size_t bytes) = 0;
};

class HostTestMemory final : public TestMemory {
 public:
  void* allocate(std::size_t bytes) override {
    blocks_.emplace_back(std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256), std::free);
    return blocks_.back().get();
  }

 private:
  std::vector<std::unique_ptr<void, decltype(&std::free)>> blocks_;
};

// A kernel resolver over a temporary store and the op context that runs on `launcher`,
// counting its launches.
class FusedOps {
 public:
  explicit FusedOps(Launcher& launcher) : resolver_(create_resolver(dir_)), ops{*resolver_, launcher, observer_, launches} {}
  std::atomic<std::uint64_t> launches{0};

 private:
  static std::unique_ptr<KernelResolver> create_resolver(const TempDir& dir) {
    auto r = KernelResolver::create(resolver_options_in(dir));
    REQUIRE_MESSAGE(r.ok(), r.status().message());
    return std::move(r).value();
  }
  TempDir dir_;
  std::unique_ptr<KernelResolver> resolver_;
  dispatch::SpecObserver observer_{"", false};

 public:
  dispatch::OpContext ops;
};

struct FusedCase {
  std::uint32_t hidden = 128, intermediate = 64, experts = 8, global_experts = 0, topk = 2;
  std::int32_t tokens = 6;
  WeightFormat weight = WeightFormat::mxfp4;
  std::uint32_t group = 32;  // 0: per-channel
  DType scale = DType::e8m0;
  DType act = DType::bf16, out = DType::bf16;
  Epilogue activation = Epilogue::silu_and_mul;
  // token / block128: W4A8 (weights packed for e4m3). The hidden states are then bf16 or f16
  // (the layer quantizes them) or e4m3 (quantized here, from the same bf16 values, with the
  // recipe written from the e4m3 definition: the same seed gives the same output either way).
  // block32: W4A4 (MXFP4 weights packed for e2m1; hidden states bf16, f16 or e2m1 likewise).
  ActScale act_scale = ActScale::none;
};

inline std::string describe(const FusedCase& c) {
  return fmt::format("H={} I={} E={}/{} topk={} T={} {} g{} {} act={} act_scale={} out={} {}", c.hidden,
                     c.intermediate, c.experts, c.global_experts ? c.global_experts : c.experts, c.topk, c.tokens,
                     to_string(c.weight), c.group, to_string(c.scale), to_string(c.act), to_string(c.act_scale),
                     to_string(c.out), to_string(c.activation));
}

namespace fused_detail {

// Uploads `bytes` from host memory into a new allocation of `memory`.
inline void* upload(Launcher& launcher, TestMemory& memory, const void* src, std::size_t bytes) {
  void* dst = memory.allocate(bytes);
  REQUIRE(launcher.copy_to_backend(dst, src, bytes, nullptr).ok());
  return dst;
}

inline quant::QuantizedWeights random_weights(std::mt19937& rng, const FusedCase& c, std::uint32_t n, std::uint32_t k) {
  std::normal_distribution<float> dist(0.0f, 1.0f / std::sqrt(static_cast<float>(k)));
  std::vector<float> w(static_cast<std::size_t>(c.experts) * n * k);
  for (auto& v : w) v = dist(rng);
  auto q = quant::quantize(w, c.experts, n, k, {c.weight, c.group ? c.group : k, c.scale});
  REQUIRE_MESSAGE(q.ok(), q.status().message());
  return std::move(q).value();
}

// Packs logical weights through the library's op (plain-codes source) into `memory`.
inline dispatch::PackedWeightsView pack(Launcher& launcher, TestMemory& memory, const quant::QuantizedWeights& q,
                                        quant::RowOrder rows, PackedOrder order = PackedOrder::a16) {
  std::vector<u8> scales;
  if (q.scale_dtype == DType::e8m0) {
    for (u16 s : q.scales) scales.push_back(static_cast<u8>(s));
  } else {
    scales.resize(q.scales.size() * 2);
    std::memcpy(scales.data(), q.scales.data(), scales.size());
  }
  dispatch::WeightSourceDesc d;
  d.format = q.format;
  d.group_size = q.group_size;
  d.scale = q.scale_dtype;
  d.experts = q.experts;
  d.n = q.n;
  d.k = q.k;
  d.source = dispatch::WeightSource::plain_codes;
  d.rows = rows;
  d.qweight = q.codes.data();
  d.scales = scales.data();
  d.zeros = q.zeros.empty() ? nullptr : q.zeros.data();
  d.order = order;
  auto sizes = dispatch::packed_sizes(d);
  REQUIRE_MESSAGE(sizes.ok(), sizes.status().message());
  dispatch::PackedDestination dest{memory.allocate(sizes->qweight), memory.allocate(sizes->scales),
                                   sizes->zeros ? memory.allocate(sizes->zeros) : nullptr, nullptr};
  const Status packed = dispatch::pack_weights(launcher, d, dest, nullptr);
  REQUIRE_MESSAGE(packed.ok(), packed.message());
  return {q.format, q.group_size, q.scale_dtype, q.experts, q.n, q.k, rows != quant::RowOrder::plain,
          dest.qweight, dest.scales, dest.zeros, nullptr, order};
}

inline double value_of(DType d, const std::vector<unsigned char>& bytes, std::size_t i) {
  if (d == DType::f32) {
    float f;
    std::memcpy(&f, bytes.data() + 4 * i, 4);
    return f;
  }
  u16 h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return d == DType::bf16 ? prim::twin::bf16_to_f32(h) : prim::twin::f16_to_f32(h);
}

}  // namespace fused_detail

struct FusedResult {
  // Relative Frobenius error against fp64 from the same inputs; for W4A8 the reference takes the
  // quantized activations (as the recipe gives them), so this is the kernels' own error.
  double error = 0;
  // W4A8: against fp64 from the unquantized bf16/f16 hidden states and gate/up output, i.e. what
  // FP8 activations cost end to end.
  double end_to_end_error = 0;
  std::vector<unsigned char> output;
};

// Runs the case; checks the error against 1e-2.
inline FusedResult run_fused_case(dispatch::OpContext& ops, TestMemory& memory, const FusedCase& c,
                                  std::uint32_t seed) {
  using namespace fused_detail;
  CAPTURE(describe(c));
  CAPTURE(seed);
  Launcher& launcher = ops.launcher;
  std::mt19937 rng(seed);
  const std::uint32_t H = c.hidden, I = c.intermediate, global = c.global_experts ? c.global_experts : c.experts;
  const quant::QuantizedWeights w13 = random_weights(rng, c, 2 * I, H), w2 = random_weights(rng, c, H, I);

  // Expert parallelism: E of the global experts live here, at random global ids (the highest
  // among them) in a random local order; the others elsewhere.
  std::vector<i32> map(global, -1), placement(global);
  std::iota(placement.begin(), placement.end(), 0);
  if (global > c.experts) {
    std::shuffle(placement.begin(), placement.end(), rng);
    std::swap(*std::find(placement.begin(), placement.end(), static_cast<i32>(global - 1)), placement[rng() % c.experts]);
  }
  for (std::uint32_t e = 0; e < c.experts; ++e) map[placement[e]] = static_cast<i32>(e);
  std::vector<i32> ids(static_cast<std::size_t>(c.tokens) * c.topk);
  std::vector<float> weights(ids.size());
  std::vector<i32> order(global);
  std::iota(order.begin(), order.end(), 0);
  std::uniform_real_distribution<float> wd(0.1f, 1.0f);
  for (std::int32_t t = 0; t < c.tokens; ++t) {
    std::shuffle(order.begin(), order.end(), rng);
    for (std::uint32_t k = 0; k < c.topk; ++k) {
      ids[t * c.topk + k] = order[k];
      weights[t * c.topk + k] = wd(rng);
    }
  }
  const bool fp4 = c.act_scale == ActScale::block32;
  const bool fp8 = c.act_scale != ActScale::none && !fp4, block = c.act_scale == ActScale::block128;
  const bool quantized = fp8 || fp4;
  const DType source = c.act == DType::f16 ? DType::f16 : DType::bf16;  // e4m3 / e2m1 hidden: from bf16 values
  std::vector<u16> hidden(static_cast<std::size_t>(c.tokens) * H);
  std::vector<float> x_source(hidden.size());
  std::normal_distribution<float> xd(0.0f, 1.0f);
  for (std::size_t i = 0; i < hidden.size(); ++i) {
    hidden[i] = source == DType::bf16 ? prim::twin::f32_to_bf16(xd(rng)) : prim::twin::f32_to_f16(xd(rng));
    x_source[i] = source == DType::bf16 ? prim::twin::bf16_to_f32(hidden[i]) : prim::twin::f16_to_f32(hidden[i]);
  }
  // What the GEMM multiplies: the hidden states, or for W4A8 / W4A4 their quantized values.
  std::vector<double> x(x_source.begin(), x_source.end());
  fp8::Quantized hidden_q;
  fp4::Quantized hidden_q4;
  if (fp8) {
    hidden_q = fp8::quantize(x_source, static_cast<std::size_t>(c.tokens), H, block);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = hidden_q.value(i / H, static_cast<std::uint32_t>(i % H), H);
  } else if (fp4) {
    hidden_q4 = fp4::quantize(x_source, static_cast<std::size_t>(c.tokens), H);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = hidden_q4.value(i / H, static_cast<std::uint32_t>(i % H));
  }

  dispatch::FusedMoeRequest r;
  const PackedOrder packed_for = fp4 ? PackedOrder::a4 : fp8 ? PackedOrder::a8 : quant::packed_order_for(c.act, c.weight);
  r.w13 = pack(launcher, memory, w13, quant::RowOrder::concatenated, packed_for);
  r.w2 = pack(launcher, memory, w2, quant::RowOrder::plain, packed_for);
  r.act = c.act;
  r.act_scale = c.act_scale;
  r.out = c.out;
  r.activation = c.activation;
  r.tokens = c.tokens;
  r.topk = c.topk;
  r.global_experts = global;
  if (c.act == DType::e4m3) {
    r.hidden = upload(launcher, memory, hidden_q.codes.data(), hidden_q.codes.size());
    r.hidden_scales = upload(launcher, memory, hidden_q.scales.data(), hidden_q.scales.size() * sizeof(float));
    r.hidden_scale_ld = block ? H / 128 : 0;
  } else if (c.act == DType::e2m1) {
    r.hidden = upload(launcher, memory, hidden_q4.packed.data(), hidden_q4.packed.size());
    r.hidden_scales = upload(launcher, memory, hidden_q4.scales.data(), hidden_q4.scales.size());
    r.hidden_scale_ld = hidden_q4.scale_ld;
  } else {
    r.hidden = upload(launcher, memory, hidden.data(), hidden.size() * 2);
  }
  r.topk_ids = static_cast<const i32*>(upload(launcher, memory, ids.data(), ids.size() * 4));
  r.topk_weights = static_cast<const float*>(upload(launcher, memory, weights.data(), weights.size() * 4));
  if (global > c.experts) r.expert_map = static_cast<const i32*>(upload(launcher, memory, map.data(), map.size() * 4));
  const std::size_t out_bytes = static_cast<std::size_t>(c.tokens) * H * (c.out == DType::f32 ? 4 : 2);
  std::vector<unsigned char> poison(out_bytes, 0xff);
  r.output = upload(launcher, memory, poison.data(), out_bytes);
  auto workspace = dispatch::fused_moe_workspace(r, launcher.arch(), launcher.sm_count());
  REQUIRE_MESSAGE(workspace.ok(), workspace.status().message());
  r.workspace_bytes = *workspace;
  r.workspace = memory.allocate(*workspace);
  REQUIRE(launcher.synchronize(nullptr).ok());

  // The workspace holds garbage (any contents are allowed).
  std::vector<unsigned char> garbage(*workspace);
  for (auto& b : garbage) b = static_cast<unsigned char>(rng());
  REQUIRE(launcher.copy_to_backend(r.workspace, garbage.data(), garbage.size(), nullptr).ok());

  const Status ran = dispatch::run_fused_moe(ops, r, nullptr);
  REQUIRE_MESSAGE(ran.ok(), ran.message());
  FusedResult result;
  std::vector<unsigned char>& out = result.output;
  out.resize(out_bytes);
  REQUIRE(launcher.copy_from_backend(out.data(), r.output, out_bytes, nullptr).ok());
  REQUIRE(launcher.synchronize(nullptr).ok());

  // Each used expert's weights dequantized once (real layer shapes have millions of them).
  std::vector<std::vector<double>> d13(c.experts), d2(c.experts);
  auto dequantized = [](const quant::QuantizedWeights& q, std::vector<double>& cache, i32 e) -> const double* {
    if (cache.empty()) {
      cache.resize(static_cast<std::size_t>(q.n) * q.k);
      for (std::uint32_t n = 0; n < q.n; ++n)
        for (std::uint32_t k = 0; k < q.k; ++k) cache[static_cast<std::size_t>(n) * q.k + k] = q.dequantized(e, n, k);
    }
    return cache.data();
  };
  // The layer in fp64 from hidden states `in`; with `quantize_intermediate` the gate/up output
  // goes through what the kernels do to it (bf16, then the recipe) before the down projection.
  auto reference = [&](const std::vector<double>& in, bool quantize_intermediate) {
    std::vector<double> want(static_cast<std::size_t>(c.tokens) * H, 0.0);
    for (std::int32_t t = 0; t < c.tokens; ++t)
      for (std::uint32_t k = 0; k < c.topk; ++k) {
        const i32 e = map[ids[t * c.topk + k]];
        if (e < 0) continue;  // another rank's expert: contributes nothing here
        const double* g13 = dequantized(w13, d13[e], e);
        const double* g2 = dequantized(w2, d2[e], e);
        std::vector<double> act(I);
        for (std::uint32_t i = 0; i < I; ++i) {
          double gate = 0, up = 0;
          for (std::uint32_t h = 0; h < H; ++h) {
            gate += in[t * H + h] * g13[static_cast<std::size_t>(i) * H + h];
            up += in[t * H + h] * g13[static_cast<std::size_t>(I + i) * H + h];
          }
          act[i] = c.activation == Epilogue::silu_and_mul ? quant::silu_and_mul(gate, up) : quant::swiglu_oai(gate, up);
        }
        if (quantize_intermediate) {
          std::vector<float> row(I);
          for (std::uint32_t i = 0; i < I; ++i)
            row[i] = prim::twin::bf16_to_f32(prim::twin::f32_to_bf16(static_cast<float>(act[i])));
          if (fp4) {
            const fp4::Quantized q = fp4::quantize(row, 1, I);
            for (std::uint32_t i = 0; i < I; ++i) act[i] = q.value(0, i);
          } else {
            const fp8::Quantized q = fp8::quantize(row, 1, I, block);
            for (std::uint32_t i = 0; i < I; ++i) act[i] = q.value(0, i, I);
          }
        }
        for (std::uint32_t h = 0; h < H; ++h) {
          double s = 0;
          for (std::uint32_t i = 0; i < I; ++i) s += act[i] * g2[static_cast<std::size_t>(h) * I + i];
          want[t * H + h] += weights[t * c.topk + k] * s;
        }
      }
    return want;
  };
  std::vector<double> got(static_cast<std::size_t>(c.tokens) * H);
  for (std::size_t i = 0; i < got.size(); ++i) got[i] = value_of(c.out, out, i);
  result.error = quant::relative_frobenius_error(got, reference(x, quantized));
  CHECK(result.error < 1e-2);
  if (quantized) {
    result.end_to_end_error =
        quant::relative_frobenius_error(got, reference(std::vector<double>(x_source.begin(), x_source.end()), false));
    MESSAGE(describe(c) << ": " << (fp4 ? "W4A4" : "W4A8") << " error " << result.error
                        << " against fp64 of the quantized activations, " << result.end_to_end_error
                        << " end to end (against the unquantized layer)");
  }
  return result;
}

}  // namespace moejit::test
