// Expert parallelism through moejit.h alone, as an engine splits a layer: the global experts
// are dealt to R ranks in random order (each rank's local order random too, the highest global
// ids included), every rank runs the layer on the same tokens with its own weights and map, and
// the ranks' outputs summed must equal the whole layer run on one rank. Workspaces hold garbage.
// And moejit_prepare, which an engine calls before capturing those calls into CUDA graphs.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "c_api_helpers.hpp"
#include "quant/quantized_weights.hpp"
#include "reference/compare.hpp"
#include "reference/reference.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

constexpr std::uint32_t H = 128, I = 64;  // small rows; the expert counts and top-k are real

struct Shape {
  const char* name;
  std::uint32_t experts, topk;
};

// The experts `globals` (in that order) of vLLM MXFP4 weights, as the rank holding them loads them.
VllmWeights experts_of(const VllmWeights& all, const std::vector<i32>& globals) {
  const quant::QuantizedWeights& q = all.logical;
  const std::size_t block_bytes = static_cast<std::size_t>(q.n) * q.k / 2, scale_bytes = static_cast<std::size_t>(q.n) * q.k / 32;
  VllmWeights out;
  out.logical = quant::make_quantized_weights(q.format, q.group_size, q.scale_dtype,
                                              static_cast<std::uint32_t>(globals.size()), q.n, q.k);
  const std::size_t codes = static_cast<std::size_t>(q.n) * q.k, groups = codes / q.group_size;
  for (std::size_t l = 0; l < globals.size(); ++l) {
    const auto e = static_cast<std::size_t>(globals[l]);
    out.blocks.insert(out.blocks.end(), all.blocks.begin() + e * block_bytes, all.blocks.begin() + (e + 1) * block_bytes);
    out.scales.insert(out.scales.end(), all.scales.begin() + e * scale_bytes, all.scales.begin() + (e + 1) * scale_bytes);
    std::copy_n(q.codes.begin() + e * codes, codes, out.logical.codes.begin() + l * codes);
    std::copy_n(q.scales.begin() + e * groups, groups, out.logical.scales.begin() + l * groups);
  }
  return out;
}

struct Routing {
  std::uint32_t global = 0, topk = 0;
  std::int32_t tokens = 0;
  std::vector<i32> ids;
  std::vector<float> weights;
  std::vector<u16> hidden;
  std::vector<double> x;
};

// One rank's run of the layer: its experts, map and a workspace of random bytes; f32 output.
std::vector<float> run_rank(moejit_context_t ctx, const VllmWeights& w13, const VllmWeights& w2,
                            const std::vector<i32>* map, const Routing& r, std::mt19937& rng) {
  auto p13 = pack(ctx, vllm_desc(w13, MOEJIT_ROWS_CONCATENATED, nullptr));
  auto p2 = pack(ctx, vllm_desc(w2, MOEJIT_ROWS_PLAIN, nullptr));
  Buffer output(static_cast<std::size_t>(r.tokens) * H * 4);
  moejit_fused_moe_args_t a;
  moejit_fused_moe_args_init(&a);
  a.w13 = &p13->w;
  a.w2 = &p2->w;
  a.out_dtype = MOEJIT_DTYPE_F32;
  a.activation = MOEJIT_EPILOGUE_SILU_AND_MUL;
  a.tokens = r.tokens;
  a.topk = r.topk;
  a.global_experts = r.global;
  a.hidden = r.hidden.data();
  a.topk_ids = r.ids.data();
  a.topk_weights = r.weights.data();
  a.expert_map = map != nullptr ? map->data() : nullptr;
  a.output = output.data;
  std::uint64_t bytes = 0;
  REQUIRE_MESSAGE(moejit_fused_moe_workspace_size(ctx, &a, &bytes) == MOEJIT_OK, std::string(moejit_last_error()));
  Buffer workspace(bytes);
  for (std::size_t i = 0; i < bytes; ++i) static_cast<unsigned char*>(workspace.data)[i] = static_cast<unsigned char>(rng());
  a.workspace = workspace.data;
  a.workspace_bytes = bytes;
  REQUIRE_MESSAGE(moejit_fused_moe(ctx, &a, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  const float* out = static_cast<const float*>(output.data);
  return {out, out + static_cast<std::size_t>(r.tokens) * H};
}

// fp64 reference of the whole layer.
std::vector<double> reference(const VllmWeights& w13, const VllmWeights& w2, const Routing& r) {
  std::vector<double> want(static_cast<std::size_t>(r.tokens) * H, 0.0);
  for (std::int32_t t = 0; t < r.tokens; ++t)
    for (std::uint32_t k = 0; k < r.topk; ++k) {
      const i32 e = r.ids[t * r.topk + k];
      std::vector<double> act(I);
      for (std::uint32_t i = 0; i < I; ++i) {
        double gate = 0, up = 0;
        for (std::uint32_t h = 0; h < H; ++h) {
          gate += r.x[t * H + h] * w13.logical.dequantized(e, i, h);
          up += r.x[t * H + h] * w13.logical.dequantized(e, I + i, h);
        }
        act[i] = quant::silu_and_mul(gate, up);
      }
      for (std::uint32_t h = 0; h < H; ++h) {
        double sum = 0;
        for (std::uint32_t i = 0; i < I; ++i) sum += act[i] * w2.logical.dequantized(e, h, i);
        want[t * H + h] += r.weights[t * r.topk + k] * sum;
      }
    }
  return want;
}

}  // namespace

TEST_CASE("C ABI: expert parallelism over 2, 4 and 8 ranks with random expert placement sums to the whole layer") {
  TempDir dir;
  Context c(dir);
  const unsigned seed = std::random_device{}();
  CAPTURE(seed);
  std::mt19937 rng(seed);
  const Shape shapes[] = {{"16 experts top-4", 16, 4}, {"OLMoE", 64, 8}, {"GLM-4.5-Air", 128, 8}, {"Kimi-K2", 384, 8}};
  for (const Shape& shape : shapes) {
    CAPTURE(shape.name);
    const std::uint32_t G = shape.experts;
    const VllmWeights w13 = vllm_weights(rng, G, 2 * I, H), w2 = vllm_weights(rng, G, H, I);
    // A batch whose pairs crowd a few experts' rows past one tile; and, on the first shape, one
    // token alone (at 8 ranks most ranks then hold none of its experts).
    for (const std::int32_t tokens : {9, 1}) {
      if (tokens == 1 && &shape != &shapes[0]) continue;
      CAPTURE(tokens);
      Routing r;
      r.global = G;
      r.topk = shape.topk;
      r.tokens = tokens;
      r.hidden.resize(static_cast<std::size_t>(tokens) * H);
      r.x = random_activations(r.hidden.data(), r.hidden.size(), DType::bf16, rng);
      std::vector<i32> order(G);
      std::iota(order.begin(), order.end(), 0);
      std::uniform_real_distribution<float> wdist(0.1f, 1.0f);
      for (std::int32_t t = 0; t < tokens; ++t) {
        // Half the tokens pick from the first few experts, so some experts get many rows.
        std::shuffle(order.begin(), order.begin() + (t % 2 ? G : std::min<std::uint32_t>(G, 2 * shape.topk)), rng);
        for (std::uint32_t k = 0; k < shape.topk; ++k) {
          r.ids.push_back(order[k]);
          r.weights.push_back(wdist(rng));
        }
      }
      const std::vector<double> want = reference(w13, w2, r);
      const std::vector<float> whole = run_rank(c.ctx, w13, w2, nullptr, r, rng);
      const std::vector<double> whole64(whole.begin(), whole.end());
      const double whole_err = quant::relative_frobenius_error(whole64, want);
      CAPTURE(whole_err);
      CHECK(whole_err < 1e-2);

      for (const std::uint32_t ranks : {2u, 4u, 8u}) {
        CAPTURE(ranks);
        std::vector<i32> placement(G);
        std::iota(placement.begin(), placement.end(), 0);
        std::shuffle(placement.begin(), placement.end(), rng);
        std::vector<double> sum(whole.size(), 0.0);
        for (std::uint32_t rank = 0; rank < ranks; ++rank) {
          CAPTURE(rank);
          // This rank's global experts in its own (random) local order.
          const std::vector<i32> globals(placement.begin() + rank * (G / ranks),
                                         placement.begin() + (rank + 1) * (G / ranks));
          std::vector<i32> map(G, -1);
          for (std::size_t l = 0; l < globals.size(); ++l) map[static_cast<std::size_t>(globals[l])] = static_cast<i32>(l);
          const std::vector<float> part =
              run_rank(c.ctx, experts_of(w13, globals), experts_of(w2, globals), &map, r, rng);
          for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
        }
        // The pairs are the same products as in the whole layer; only their f32 summation and
        // the tile (which may change the bf16 rounding of a pair's row) may differ.
        const double vs_whole = quant::relative_frobenius_error(sum, whole64);
        const double vs_fp64 = quant::relative_frobenius_error(sum, want);
        MESSAGE(std::string(shape.name) << " T=" << tokens << " over " << ranks << " ranks: error vs one rank " << vs_whole
                           << ", vs fp64 " << vs_fp64);
        CHECK(vs_whole < 1e-3);
        CHECK(vs_fp64 < 1e-2);
      }
    }
  }
}

TEST_CASE("C ABI: moejit_prepare finds every kernel a model's layer uses at any T up to max_tokens") {
  TempDir dir;
  Context c(dir);
  std::mt19937 rng(std::random_device{}());
  constexpr std::uint32_t E = 8, K = 2;
  constexpr std::int32_t kMaxTokens = 48;
  moejit_model_desc_t m = mxfp4_model(H, I, E, K, kMaxTokens);
  m.out_dtype = MOEJIT_DTYPE_F32;
  std::uint32_t calls = 0, total = 0;
  const moejit_progress_fn progress = [](void* user, uint32_t, uint32_t of, const char*) {
    auto* counts = static_cast<std::uint32_t*>(user);
    ++counts[0];
    counts[1] = of;
  };
  std::uint32_t counts[2] = {0, 0};
  REQUIRE_MESSAGE(moejit_prepare(c.ctx, &m, progress, counts) == MOEJIT_OK, std::string(moejit_last_error()));
  calls = counts[0];
  total = counts[1];
  CHECK(calls == total);
  CHECK(total >= 4);
  moejit_stats_t stats;
  moejit_stats_init(&stats);
  REQUIRE(moejit_get_stats(c.ctx, &stats) == MOEJIT_OK);
  const std::uint64_t prepared = stats.compiles;
  CHECK(prepared == total);

  // The layer at batch sizes across the tile choices: nothing left to compile.
  const VllmWeights w13 = vllm_weights(rng, E, 2 * I, H), w2 = vllm_weights(rng, E, H, I);
  for (const std::int32_t tokens : {1, 7, 30, kMaxTokens}) {
    CAPTURE(tokens);
    Routing r;
    r.global = E;
    r.topk = K;
    r.tokens = tokens;
    r.hidden.resize(static_cast<std::size_t>(tokens) * H);
    r.x = random_activations(r.hidden.data(), r.hidden.size(), DType::bf16, rng);
    for (std::int32_t t = 0; t < tokens * static_cast<std::int32_t>(K); ++t) {
      r.ids.push_back(static_cast<i32>(rng() % E));
      r.weights.push_back(0.5f);
    }
    for (std::int32_t t = 0; t < tokens; ++t)
      if (r.ids[t * K] == r.ids[t * K + 1]) r.ids[t * K + 1] = (r.ids[t * K] + 1) % static_cast<i32>(E);
    const std::vector<float> out = run_rank(c.ctx, w13, w2, nullptr, r, rng);
    CHECK(quant::relative_frobenius_error(std::vector<double>(out.begin(), out.end()), reference(w13, w2, r)) < 1e-2);
  }
  REQUIRE(moejit_get_stats(c.ctx, &stats) == MOEJIT_OK);
  CHECK(stats.compiles == prepared);

  // A device context with no GPU cannot load anything: an error that says so.
  Context device(dir, MOEJIT_BACKEND_DEVICE);
  moejit_backend_t backend;
  const char* arch = nullptr;
  REQUIRE(moejit_context_backend(device.ctx, &backend, &arch) == MOEJIT_OK);
  if (moejit_prepare(device.ctx, &m, nullptr, nullptr) != MOEJIT_OK) {
    CHECK(std::string(moejit_last_error()).find("driver") != std::string::npos);
  } else {
    MESSAGE("a GPU is usable here: moejit_prepare loaded the layer's kernels on it (" << arch << ")");
  }
}
