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
#include "dispatch/weight_pack_op.hpp"
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

struct FusedCase {
  std::uint32_t hidden = 128, intermediate = 64, experts = 8, global_experts = 0, topk = 2;
  std::int32_t tokens = 6;
  WeightFormat weight = WeightFormat::mxfp4;
  std::uint32_t group = 32;  // 0: per-channel
  DType scale = DType::e8m0;
  DType act = DType::bf16, out = DType::bf16;
  Epilogue activation = Epilogue::silu_and_mul;
};

inline std::string describe(const FusedCase& c) {
  return fmt::format("H={} I={} E={}/{} topk={} T={} {} g{} {} act={} out={} {}", c.hidden, c.intermediate,
                     c.experts, c.global_experts ? c.global_experts : c.experts, c.topk, c.tokens,
                     to_string(c.weight), c.group, to_string(c.scale), to_string(c.act), to_string(c.out),
                     to_string(c.activation));
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
                                        quant::RowOrder rows) {
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
  auto sizes = dispatch::packed_sizes(d);
  REQUIRE_MESSAGE(sizes.ok(), sizes.status().message());
  dispatch::PackedDestination dest{memory.allocate(sizes->qweight), memory.allocate(sizes->scales),
                                   sizes->zeros ? memory.allocate(sizes->zeros) : nullptr, nullptr};
  const Status packed = dispatch::pack_weights(launcher, d, dest, nullptr);
  REQUIRE_MESSAGE(packed.ok(), packed.message());
  return {q.format, q.group_size, q.scale_dtype, q.experts, q.n, q.k, rows != quant::RowOrder::plain,
          dest.qweight, dest.scales, dest.zeros, nullptr};
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

// Runs the case; returns the relative Frobenius error (checked against 1e-2 here).
inline double run_fused_case(dispatch::OpContext& ops, TestMemory& memory, const FusedCase& c, std::uint32_t seed) {
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
  std::vector<u16> hidden(static_cast<std::size_t>(c.tokens) * H);
  std::vector<double> x(hidden.size());
  std::normal_distribution<float> xd(0.0f, 1.0f);
  for (std::size_t i = 0; i < hidden.size(); ++i) {
    hidden[i] = c.act == DType::bf16 ? prim::twin::f32_to_bf16(xd(rng)) : prim::twin::f32_to_f16(xd(rng));
    x[i] = c.act == DType::bf16 ? prim::twin::bf16_to_f32(hidden[i]) : prim::twin::f16_to_f32(hidden[i]);
  }

  dispatch::FusedMoeRequest r;
  r.w13 = pack(launcher, memory, w13, quant::RowOrder::concatenated);
  r.w2 = pack(launcher, memory, w2, quant::RowOrder::plain);
  r.act = c.act;
  r.out = c.out;
  r.activation = c.activation;
  r.tokens = c.tokens;
  r.topk = c.topk;
  r.global_experts = global;
  r.hidden = upload(launcher, memory, hidden.data(), hidden.size() * 2);
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

  const Status ran = dispatch::run_fused_moe(ops, r, nullptr);
  REQUIRE_MESSAGE(ran.ok(), ran.message());
  std::vector<unsigned char> out(out_bytes);
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
  std::vector<double> want(static_cast<std::size_t>(c.tokens) * H, 0.0), got(want.size());
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
          gate += x[t * H + h] * g13[static_cast<std::size_t>(i) * H + h];
          up += x[t * H + h] * g13[static_cast<std::size_t>(I + i) * H + h];
        }
        act[i] = c.activation == Epilogue::silu_and_mul ? quant::silu_and_mul(gate, up) : quant::swiglu_oai(gate, up);
      }
      for (std::uint32_t h = 0; h < H; ++h) {
        double s = 0;
        for (std::uint32_t i = 0; i < I; ++i) s += act[i] * g2[static_cast<std::size_t>(h) * I + i];
        want[t * H + h] += weights[t * c.topk + k] * s;
      }
    }
  for (std::size_t i = 0; i < got.size(); ++i) got[i] = value_of(c.out, out, i);
  const double err = quant::relative_frobenius_error(got, want);
  CHECK(err < 1e-2);
  return err;
}

}  // namespace moejit::test
