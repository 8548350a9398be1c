// The fp64 reference grouped GEMM against a naive loop written here, for every layout and
// epilogue: padding ids, expert -1 blocks, slots past num_tokens_post_pad, empty experts, M = 0,
// unwritten rows. The naive loop finds each C row's expert by scanning the routing tables, and
// reads act-and-mul weights in the interleaved order (gate 2j, up 2j + 1) that the packer
// derives, so it shares no indexing with the reference. Then the comparison helper and the
// reference's argument checks.

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <map>

#include "quant/pack.hpp"
#include "reference/compare.hpp"
#include "reference/quantize.hpp"
#include "reference/reference.hpp"
#include "test_quant_support.hpp"

using namespace moejit;
using namespace moejit::quant;
using namespace moejit::test;

namespace {

constexpr u32 kE = 4, kN = 64, kK = 64;

bool act_and_mul(Epilogue e) { return e == Epilogue::silu_and_mul || e == Epilogue::swiglu_oai; }

// Routing of `tokens` tokens to `topk` distinct experts each, expert 2 never chosen (empty).
std::vector<i32> random_topk_ids(Rng& rng, u32 tokens, u32 topk) {
  std::vector<i32> ids;
  const i32 allowed[3] = {0, 1, 3};
  for (u32 t = 0; t < tokens; ++t) {
    u32 first = rng.uniform_int(0, 2);
    for (u32 j = 0; j < topk; ++j) ids.push_back(allowed[(first + j) % 3]);
  }
  return ids;
}

struct Aligned {
  std::vector<i32> sorted, expert_ids;
  i32 post_pad = 0;
};

// moe_align_block_size: each expert's pair ids in order, padded with the sentinel m to a multiple
// of block_m; experts in `remote` get expert id -1 for their blocks (expert parallelism). Then
// one more block past num_tokens_post_pad of valid-looking ids, which must never be read.
Aligned align(const std::vector<i32>& topk_ids, u32 block_m, i32 remote) {
  Aligned a;
  const i32 m = static_cast<i32>(topk_ids.size());
  for (i32 e = 0; e < static_cast<i32>(kE); ++e) {
    std::vector<i32> mine;
    for (i32 id = 0; id < m; ++id)
      if (topk_ids[id] == e) mine.push_back(id);
    while (mine.size() % block_m != 0) mine.push_back(m);
    for (std::size_t b = 0; b < mine.size() / block_m; ++b) a.expert_ids.push_back(e == remote ? -1 : e);
    a.sorted.insert(a.sorted.end(), mine.begin(), mine.end());
  }
  a.post_pad = static_cast<i32>(a.sorted.size());
  for (u32 s = 0; s < block_m; ++s) a.sorted.push_back(static_cast<i32>(s) % std::max(m, 1));
  a.expert_ids.push_back(0);
  return a;
}

struct Naive {
  std::vector<double> c;
  std::vector<u8> written;
};

// One output row from first principles. `inter` holds act-and-mul weights interleaved.
void naive_row(const QuantizedWeights& w, const QuantizedWeights& inter, Epilogue epi,
               const std::vector<float>& bias, const double* a, u32 e, double topk, double* out) {
  auto dot = [&](const QuantizedWeights& q, u32 row) {
    double s = 0;
    for (u32 k = 0; k < kK; ++k) s += a[k] * q.dequantized(e, row, k);
    return s;
  };
  if (!act_and_mul(epi)) {
    for (u32 n = 0; n < kN; ++n) out[n] = (dot(w, n) + (bias.empty() ? 0.0 : bias[e * kN + n])) * topk;
    return;
  }
  for (u32 j = 0; j < kN / 2; ++j) {
    double gate = dot(inter, 2 * j), up = dot(inter, 2 * j + 1);
    if (!bias.empty()) {
      gate += bias[e * kN + j];
      up += bias[e * kN + kN / 2 + j];
    }
    if (epi == Epilogue::silu_and_mul) {
      out[j] = gate * up / (1.0 + std::exp(-gate));
    } else {
      const double g = std::min(gate, 7.0), u = std::max(-7.0, std::min(up, 7.0));
      out[j] = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
    }
  }
}

struct Fixture {
  Rng rng;
  QuantizedWeights w, inter;
  std::vector<float> bias;

  Fixture(WeightFormat format, bool with_bias) {
    const u32 group = 32;
    const DType dtype = format == WeightFormat::mxfp4 ? DType::e8m0 : DType::bf16;
    std::vector<float> f(kE * kN * kK);
    for (auto& x : f) x = rng.normal_nonzero(0.25f);
    w = *quantize(f, kE, kN, kK, {format, group, dtype});
    inter = *unpack(*pack(w, {RowOrder::concatenated, {}}), RowOrder::interleaved);
    if (with_bias) {
      bias.resize(kE * kN);
      for (auto& b : bias) b = rng.normal_nonzero(1.0f);
    }
  }

  std::vector<double> random_a(u64 rows) {
    std::vector<double> a(rows * kK);
    for (auto& x : a) x = rng.normal_nonzero(1.0f);
    return a;
  }
};

void check_against(const ReferenceOutput& ref, const Naive& naive, u64 rows, u64 cols) {
  REQUIRE(ref.rows == rows);
  REQUIRE(ref.cols == cols);
  CHECK(ref.written == naive.written);
  CHECK(relative_frobenius_error(ref.c, naive.c, cols, naive.written) < 1e-12);
  for (u64 r = 0; r < rows; ++r)
    if (!ref.written[r])
      for (u64 c = 0; c < cols; ++c) CHECK(ref.c[r * cols + c] == 0.0);
}

constexpr Epilogue kAllEpilogues[] = {Epilogue::none, Epilogue::silu_and_mul, Epilogue::swiglu_oai,
                                      Epilogue::topk_weight};

}  // namespace

TEST_CASE("reference, indexed layout: padding, expert -1 blocks, empty experts, every epilogue") {
  for (WeightFormat format : {WeightFormat::mxfp4, WeightFormat::int4_asym}) {
    for (bool with_bias : {false, true}) {
      Fixture fx(format, with_bias);
      MOEJIT_QUANT_SEED(fx.rng);
      for (Epilogue epi : kAllEpilogues) {
        for (u32 tokens : {0u, 1u, 7u, 13u}) {
          for (bool per_token_a : {true, false}) {
            CAPTURE(static_cast<int>(format));
            CAPTURE(static_cast<int>(epi));
            CAPTURE(tokens);
            CAPTURE(per_token_a);
            const u32 topk = 2, block_m = 4;
            const auto topk_ids = random_topk_ids(fx.rng, tokens, topk);
            const i32 m = static_cast<i32>(tokens * topk);
            const Aligned al = align(topk_ids, block_m, /*remote=*/3);
            const i32 divisor = per_token_a ? static_cast<i32>(topk) : 1;
            const auto a = fx.random_a(per_token_a ? tokens : static_cast<u64>(m));
            std::vector<float> topk_weights(static_cast<u64>(m));
            for (auto& t : topk_weights) t = static_cast<float>(fx.rng.uniform(0.1, 1.0));

            ReferenceProblem p;
            p.layout = Layout::indexed;
            p.epilogue = epi;
            p.weights = &fx.w;
            p.bias = fx.bias;
            p.a = a;
            p.m = m;
            p.block_m = block_m;
            p.sorted_token_ids = al.sorted;
            p.expert_ids = al.expert_ids;
            p.num_tokens_post_pad = al.post_pad;
            p.a_row_divisor = divisor;
            p.topk_weights = topk_weights;
            auto ref = reference_grouped_gemm(p);
            REQUIRE(ref.ok());

            const u64 cols = act_and_mul(epi) ? kN / 2 : kN;
            Naive naive{std::vector<double>(static_cast<u64>(m) * cols, 0.0), std::vector<u8>(static_cast<u64>(m), 0)};
            for (i32 id = 0; id < m; ++id) {
              const i32 e = topk_ids[id];
              if (e == 3) continue;  // remote expert: its blocks are -1
              naive.written[id] = 1;
              const double scale = epi == Epilogue::topk_weight ? topk_weights[id] : 1.0;
              naive_row(fx.w, fx.inter, epi, fx.bias, &a[(id / divisor) * kK], static_cast<u32>(e), scale,
                        &naive.c[id * cols]);
            }
            check_against(*ref, naive, static_cast<u64>(m), cols);
          }
        }
      }
    }
  }
}

TEST_CASE("reference, contiguous layout: empty experts, rows past the last offset, M = 0") {
  Fixture fx(WeightFormat::int4_asym, true);
  MOEJIT_QUANT_SEED(fx.rng);
  for (Epilogue epi : {Epilogue::none, Epilogue::silu_and_mul, Epilogue::swiglu_oai}) {
    for (const std::vector<i32>& offsets :
         {std::vector<i32>{0, 3, 3, 9, 11}, std::vector<i32>{0, 0, 0, 0, 0}, std::vector<i32>{2, 2, 5, 5, 5}}) {
      CAPTURE(static_cast<int>(epi));
      const i32 m = offsets.back() == 0 ? 0 : 13;
      const auto a = fx.random_a(static_cast<u64>(m));
      ReferenceProblem p;
      p.layout = Layout::contiguous;
      p.epilogue = epi;
      p.weights = &fx.w;
      p.bias = fx.bias;
      p.a = a;
      p.m = m;
      p.expert_offsets = offsets;
      auto ref = reference_grouped_gemm(p);
      REQUIRE(ref.ok());
      const u64 cols = act_and_mul(epi) ? kN / 2 : kN;
      Naive naive{std::vector<double>(static_cast<u64>(m) * cols, 0.0), std::vector<u8>(static_cast<u64>(m), 0)};
      for (i32 r = 0; r < m; ++r)
        for (u32 e = 0; e < kE; ++e)
          if (offsets[e] <= r && r < offsets[e + 1]) {
            naive.written[r] = 1;
            naive_row(fx.w, fx.inter, epi, fx.bias, &a[r * kK], e, 1.0, &naive.c[r * cols]);
          }
      check_against(*ref, naive, static_cast<u64>(m), cols);
    }
  }
}

TEST_CASE("reference, masked layout: per-expert counts from 0 to max_m, M = 0") {
  Fixture fx(WeightFormat::mxfp4, true);
  MOEJIT_QUANT_SEED(fx.rng);
  for (Epilogue epi : {Epilogue::none, Epilogue::silu_and_mul, Epilogue::swiglu_oai}) {
    for (i32 max_m : {0, 1, 6}) {
      CAPTURE(static_cast<int>(epi));
      CAPTURE(max_m);
      const std::vector<i32> counts = {max_m, 0, max_m / 2, max_m > 0 ? 1 : 0};
      const auto a = fx.random_a(kE * static_cast<u64>(max_m));
      ReferenceProblem p;
      p.layout = Layout::masked;
      p.epilogue = epi;
      p.weights = &fx.w;
      p.bias = fx.bias;
      p.a = a;
      p.m = max_m;
      p.expert_counts = counts;
      auto ref = reference_grouped_gemm(p);
      REQUIRE(ref.ok());
      const u64 cols = act_and_mul(epi) ? kN / 2 : kN, rows = kE * static_cast<u64>(max_m);
      Naive naive{std::vector<double>(rows * cols, 0.0), std::vector<u8>(rows, 0)};
      for (u32 e = 0; e < kE; ++e)
        for (i32 r = 0; r < counts[e]; ++r) {
          const u64 row = e * static_cast<u64>(max_m) + static_cast<u64>(r);
          naive.written[row] = 1;
          naive_row(fx.w, fx.inter, epi, fx.bias, &a[row * kK], e, 1.0, &naive.c[row * cols]);
        }
      check_against(*ref, naive, rows, cols);
    }
  }
}

TEST_CASE("epilogue functions") {
  CHECK(silu_and_mul(0.0, 3.0) == 0.0);
  CHECK(silu_and_mul(2.0, 1.5) == doctest::Approx(2.0 / (1.0 + std::exp(-2.0)) * 1.5).epsilon(1e-15));
  // swiglu_oai clamps gate above at 7 only, up on both sides.
  CHECK(swiglu_oai(10.0, 1.0) == doctest::Approx(7.0 / (1.0 + std::exp(-1.702 * 7.0)) * 2.0).epsilon(1e-15));
  CHECK(swiglu_oai(-10.0, 1.0) == doctest::Approx(-10.0 / (1.0 + std::exp(17.02)) * 2.0).epsilon(1e-15));
  CHECK(swiglu_oai(1.0, 100.0) == doctest::Approx(1.0 / (1.0 + std::exp(-1.702)) * 8.0).epsilon(1e-15));
  CHECK(swiglu_oai(1.0, -100.0) == doctest::Approx(1.0 / (1.0 + std::exp(-1.702)) * -6.0).epsilon(1e-15));
  CHECK(std::isnan(swiglu_oai(std::numeric_limits<double>::quiet_NaN(), 1.0)));
  CHECK(std::isnan(swiglu_oai(1.0, std::numeric_limits<double>::quiet_NaN())));
}

TEST_CASE("NaN scales propagate to the reference output") {
  Fixture fx(WeightFormat::mxfp4, false);
  fx.w.scales[fx.w.group_index(1, 5, 0)] = 0xFF;
  fx.w.scales[fx.w.group_index(1, 6, 0)] = 0x00;
  const auto a = fx.random_a(2);
  const std::vector<i32> offsets = {0, 0, 2, 2, 2};
  ReferenceProblem p;
  p.layout = Layout::contiguous;
  p.weights = &fx.w;
  p.a = a;
  p.m = 2;
  p.expert_offsets = offsets;
  auto ref = reference_grouped_gemm(p);
  REQUIRE(ref.ok());
  CHECK(std::isnan(ref->c[5]));
  CHECK(std::isnan(ref->c[kN + 5]));
  CHECK(std::isfinite(ref->c[6]));
}

TEST_CASE("relative Frobenius error: NaN/Inf mismatches fail, masks skip rows") {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> ref = {1.0, 2.0, nan, inf, 3.0, 4.0};
  std::vector<double> out = ref;
  CHECK(relative_frobenius_error(out, ref, 2) == 0.0);
  out[0] = 1.1;
  CHECK(relative_frobenius_error(out, ref, 2) == doctest::Approx(0.1 / std::sqrt(30.0)));
  out = ref;
  out[1] = nan;
  CHECK(std::isinf(relative_frobenius_error(out, ref, 2)));
  out = ref;
  out[2] = 0.0;
  CHECK(std::isinf(relative_frobenius_error(out, ref, 2)));
  out = ref;
  out[3] = -inf;
  CHECK(std::isinf(relative_frobenius_error(out, ref, 2)));
  // Masking the row with the mismatch ignores it.
  const std::vector<u8> mask = {1, 0, 1};
  out = ref;
  out[2] = 5.0;
  out[3] = 5.0;
  CHECK(relative_frobenius_error(out, ref, 2, mask) == 0.0);
  CHECK(std::isinf(relative_frobenius_error(out, std::vector<double>{1.0}, 1)));
  // An all-zero reference demands an all-zero output.
  const std::vector<double> zeros(4, 0.0), small = {0.0, 0.0, 3.0, 4.0};
  CHECK(relative_frobenius_error(small, zeros) == 5.0);
}

TEST_CASE("the reference rejects malformed problems with the argument named") {
  Fixture fx(WeightFormat::int4_asym, false);
  const auto a = fx.random_a(4);
  const std::vector<i32> sorted = {0, 1, 2, 3}, experts = {0};
  ReferenceProblem base;
  base.layout = Layout::indexed;
  base.weights = &fx.w;
  base.a = a;
  base.m = 4;
  base.block_m = 4;
  base.sorted_token_ids = sorted;
  base.expert_ids = experts;
  base.num_tokens_post_pad = 4;
  REQUIRE(reference_grouped_gemm(base).ok());

  ReferenceProblem p = base;
  const std::vector<i32> bad_expert = {7};
  p.expert_ids = bad_expert;
  check_error(reference_grouped_gemm(p).status(), Code::invalid_argument, {"expert_ids[0] = 7", "-1 or 0..3"});
  p = base;
  const std::vector<i32> dup = {0, 1, 1, 3};
  p.sorted_token_ids = dup;
  check_error(reference_grouped_gemm(p).status(), Code::invalid_argument, {"C row 1 is written twice"});
  p = base;
  p.num_tokens_post_pad = 3;
  check_error(reference_grouped_gemm(p).status(), Code::invalid_argument, {"num_tokens_post_pad = 3", "block_m = 4"});
  p = base;
  p.a_row_divisor = 0;
  check_error(reference_grouped_gemm(p).status(), Code::invalid_argument, {"a_row_divisor = 0"});
  p = base;
  p.a = std::span<const double>(a).first(2 * kK);
  check_error(reference_grouped_gemm(p).status(), Code::invalid_argument, {"reads A row 2", "A has 2 rows"});
  p = base;
  p.a = std::span<const double>(a).first(kK + 1);
  check_error(reference_grouped_gemm(p).status(), Code::invalid_argument, {"whole rows of K = 64"});
  p = base;
  p.epilogue = Epilogue::topk_weight;
  check_error(reference_grouped_gemm(p).status(), Code::invalid_argument, {"topk_weights has 0 entries"});
  p.layout = Layout::masked;
  check_error(reference_grouped_gemm(p).status(), Code::invalid_argument, {"topk_weight", "layout indexed"});
  p = base;
  const std::vector<float> short_bias(3);
  p.bias = short_bias;
  check_error(reference_grouped_gemm(p).status(), Code::invalid_argument, {"bias has 3 elements", "E*N = 256"});
  p = base;
  p.weights = nullptr;
  check_error(reference_grouped_gemm(p).status(), Code::invalid_argument, {"weights"});

  p = base;
  p.layout = Layout::contiguous;
  const std::vector<i32> decreasing = {0, 3, 2, 4, 4};
  p.expert_offsets = decreasing;
  check_error(reference_grouped_gemm(p).status(), Code::invalid_argument, {"expert_offsets[2] = 2", "non-decreasing"});
  const std::vector<i32> too_few = {0, 4};
  p.expert_offsets = too_few;
  check_error(reference_grouped_gemm(p).status(), Code::invalid_argument, {"expert_offsets has 2 entries", "E + 1 = 5"});

  p = base;
  p.layout = Layout::masked;
  p.m = 1;
  const std::vector<i32> counts = {1, 2, 0, 0};
  p.expert_counts = counts;
  check_error(reference_grouped_gemm(p).status(), Code::invalid_argument, {"expert_counts[1] = 2", "max_m = 1"});

  QuantizedWeights odd = make_quantized_weights(WeightFormat::int4_sym, 32, DType::bf16, 1, 3, 32);
  p = base;
  p.layout = Layout::contiguous;
  p.weights = &odd;
  p.epilogue = Epilogue::silu_and_mul;
  check_error(reference_grouped_gemm(p).status(), Code::invalid_argument, {"N = 3 is odd"});
}
