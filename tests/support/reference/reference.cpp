#include "reference/reference.hpp"

#include <cmath>
#include <optional>

#include "spec/spec_fields.hpp"

namespace moejit::quant {

double silu_and_mul(double gate, double up) { return gate / (1.0 + std::exp(-gate)) * up; }

double swiglu_oai(double gate, double up) {
  // Written with comparisons that let NaN through, as torch.clamp does.
  const double g = gate > 7.0 ? 7.0 : gate;
  const double u = up > 7.0 ? 7.0 : (up < -7.0 ? -7.0 : up);
  return g * (1.0 / (1.0 + std::exp(-1.702 * g))) * (u + 1.0);
}

namespace {

bool is_act_and_mul(Epilogue e) { return e == Epilogue::silu_and_mul || e == Epilogue::swiglu_oai; }

class Evaluator {
 public:
  Evaluator(const ReferenceProblem& p, ReferenceOutput& out)
      : p_(p), w_(*p.weights), out_(out), dequantized_(w_.experts) {}

  // C row `c_row` = epilogue(A row `a_row` x W_e^T + bias_e), scaled by `topk` if given.
  Status row(u32 e, u64 a_row, u64 c_row, std::optional<double> topk) {
    if (out_.written[c_row]) return error(Code::invalid_argument, "C row {} is written twice", c_row);
    out_.written[c_row] = 1;
    const std::vector<double>& w = expert(e);
    const double* a = p_.a.data() + a_row * w_.k;
    std::vector<double> acc(w_.n);
    for (u32 n = 0; n < w_.n; ++n) {
      double sum = 0.0;
      for (u32 kk = 0; kk < w_.k; ++kk) sum += a[kk] * w[static_cast<u64>(n) * w_.k + kk];
      if (!p_.bias.empty()) sum += p_.bias[static_cast<u64>(e) * w_.n + n];
      acc[n] = sum;
    }
    double* c = out_.c.data() + c_row * out_.cols;
    const u32 half = w_.n / 2;
    switch (p_.epilogue) {
      case Epilogue::silu_and_mul:
        for (u32 j = 0; j < half; ++j) c[j] = silu_and_mul(acc[j], acc[half + j]);
        break;
      case Epilogue::swiglu_oai:
        for (u32 j = 0; j < half; ++j) c[j] = swiglu_oai(acc[j], acc[half + j]);
        break;
      default:
        for (u32 n = 0; n < w_.n; ++n) c[n] = topk ? acc[n] * *topk : acc[n];
        break;
    }
    return ok_status();
  }

 private:
  // Expert e's weights dequantized once, [N][K].
  const std::vector<double>& expert(u32 e) {
    std::vector<double>& d = dequantized_[e];
    if (d.empty()) {
      d.resize(static_cast<u64>(w_.n) * w_.k);
      for (u32 n = 0; n < w_.n; ++n)
        for (u32 kk = 0; kk < w_.k; ++kk) d[static_cast<u64>(n) * w_.k + kk] = w_.dequantized(e, n, kk);
    }
    return d;
  }

  const ReferenceProblem& p_;
  const QuantizedWeights& w_;
  ReferenceOutput& out_;
  std::vector<std::vector<double>> dequantized_;
};

Status run_indexed(const ReferenceProblem& p, u64 a_rows, Evaluator& eval) {
  const u32 experts = p.weights->experts;
  if (p.block_m == 0) return error(Code::invalid_argument, "block_m = 0: expected the align block size");
  if (p.num_tokens_post_pad < 0 || p.num_tokens_post_pad % static_cast<i64>(p.block_m) != 0)
    return error(Code::invalid_argument, "num_tokens_post_pad = {}: expected a non-negative multiple of block_m = {}",
                 p.num_tokens_post_pad, p.block_m);
  if (p.a_row_divisor < 1)
    return error(Code::invalid_argument, "a_row_divisor = {}: expected >= 1", p.a_row_divisor);
  const u64 slots = static_cast<u64>(p.num_tokens_post_pad), blocks = slots / p.block_m;
  if (p.sorted_token_ids.size() < slots)
    return error(Code::invalid_argument, "sorted_token_ids has {} entries: expected >= num_tokens_post_pad = {}",
                 p.sorted_token_ids.size(), slots);
  if (p.expert_ids.size() < blocks)
    return error(Code::invalid_argument, "expert_ids has {} entries: expected >= num_tokens_post_pad / block_m = {}",
                 p.expert_ids.size(), blocks);
  const bool topk = p.epilogue == Epilogue::topk_weight;
  if (topk && p.topk_weights.size() < static_cast<u64>(p.m))
    return error(Code::invalid_argument, "topk_weights has {} entries: expected >= m = {}", p.topk_weights.size(),
                 p.m);
  for (u64 b = 0; b < blocks; ++b) {
    const i32 e = p.expert_ids[b];
    if (e == -1) continue;
    if (e < 0 || static_cast<u32>(e) >= experts)
      return error(Code::invalid_argument, "expert_ids[{}] = {}: expected -1 or 0..{}", b, e, experts - 1);
    for (u64 s = b * p.block_m; s < (b + 1) * p.block_m; ++s) {
      const i32 id = p.sorted_token_ids[s];
      if (id >= p.m) continue;  // padding
      if (id < 0) return error(Code::invalid_argument, "sorted_token_ids[{}] = {}: expected 0..m", s, id);
      const u64 a_row = static_cast<u64>(id / p.a_row_divisor);
      if (a_row >= a_rows)
        return error(Code::invalid_argument, "sorted_token_ids[{}] = {} reads A row {}, but A has {} rows", s, id,
                     a_row, a_rows);
      std::optional<double> scale;
      if (topk) scale = p.topk_weights[static_cast<u64>(id)];
      MOEJIT_TRY(eval.row(static_cast<u32>(e), a_row, static_cast<u64>(id), scale));
    }
  }
  return ok_status();
}

Status run_contiguous(const ReferenceProblem& p, u64 a_rows, Evaluator& eval) {
  const u32 experts = p.weights->experts;
  if (p.expert_offsets.size() != static_cast<u64>(experts) + 1)
    return error(Code::invalid_argument, "expert_offsets has {} entries: expected E + 1 = {}",
                 p.expert_offsets.size(), experts + 1);
  if (a_rows < static_cast<u64>(p.m))
    return error(Code::invalid_argument, "A has {} rows: expected m = {}", a_rows, p.m);
  for (u32 e = 0; e <= experts; ++e) {
    const i32 o = p.expert_offsets[e];
    const i32 before = e == 0 ? 0 : p.expert_offsets[e - 1];
    if (o < before || o > p.m)
      return error(Code::invalid_argument, "expert_offsets[{}] = {}: expected non-decreasing from 0, at most m = {}",
                   e, o, p.m);
  }
  for (u32 e = 0; e < experts; ++e)
    for (i32 r = p.expert_offsets[e]; r < p.expert_offsets[e + 1]; ++r)
      MOEJIT_TRY(eval.row(e, static_cast<u64>(r), static_cast<u64>(r), std::nullopt));
  return ok_status();
}

Status run_masked(const ReferenceProblem& p, u64 a_rows, Evaluator& eval) {
  const u32 experts = p.weights->experts;
  const u64 max_m = static_cast<u64>(p.m);
  if (p.expert_counts.size() != experts)
    return error(Code::invalid_argument, "expert_counts has {} entries: expected E = {}", p.expert_counts.size(),
                 experts);
  if (a_rows < experts * max_m)
    return error(Code::invalid_argument, "A has {} rows: expected E * max_m = {}", a_rows, experts * max_m);
  for (u32 e = 0; e < experts; ++e) {
    const i32 count = p.expert_counts[e];
    if (count < 0 || count > p.m)
      return error(Code::invalid_argument, "expert_counts[{}] = {}: expected 0..max_m = {}", e, count, p.m);
    for (i32 r = 0; r < count; ++r) {
      const u64 row = e * max_m + static_cast<u64>(r);
      MOEJIT_TRY(eval.row(e, row, row, std::nullopt));
    }
  }
  return ok_status();
}

}  // namespace

Result<ReferenceOutput> reference_grouped_gemm(const ReferenceProblem& p) {
  if (p.weights == nullptr) return error(Code::invalid_argument, "weights: expected logical weights, got none");
  MOEJIT_TRY(p.weights->validate());
  const QuantizedWeights& w = *p.weights;
  const bool act_and_mul = is_act_and_mul(p.epilogue);
  if (p.epilogue != Epilogue::none && !act_and_mul && p.epilogue != Epilogue::topk_weight)
    return error(Code::invalid_argument, "epilogue {}: expected none, silu_and_mul, swiglu_oai or topk_weight",
                 static_cast<int>(p.epilogue));
  if (p.epilogue == Epilogue::topk_weight && p.layout != Layout::indexed)
    return error(Code::invalid_argument, "epilogue topk_weight with layout {}: expected layout indexed",
                 to_string(p.layout));
  if (act_and_mul && w.n % 2 != 0)
    return error(Code::invalid_argument, "epilogue {} needs N = 2I gate and up rows: N = {} is odd",
                 to_string(p.epilogue), w.n);
  if (!p.bias.empty() && p.bias.size() != static_cast<u64>(w.experts) * w.n)
    return error(Code::invalid_argument, "bias has {} elements: expected E*N = {}", p.bias.size(),
                 static_cast<u64>(w.experts) * w.n);
  if (p.m < 0) return error(Code::invalid_argument, "m = {}: expected >= 0", p.m);
  if (p.a.size() % w.k != 0)
    return error(Code::invalid_argument, "A has {} elements: expected whole rows of K = {}", p.a.size(), w.k);
  const u64 a_rows = p.a.size() / w.k;

  ReferenceOutput out;
  out.rows = p.layout == Layout::masked ? static_cast<u64>(w.experts) * static_cast<u64>(p.m) : static_cast<u64>(p.m);
  out.cols = act_and_mul ? w.n / 2 : w.n;
  out.c.assign(out.rows * out.cols, 0.0);
  out.written.assign(out.rows, 0);
  Evaluator eval(p, out);
  switch (p.layout) {
    case Layout::indexed: MOEJIT_TRY(run_indexed(p, a_rows, eval)); break;
    case Layout::contiguous: MOEJIT_TRY(run_contiguous(p, a_rows, eval)); break;
    case Layout::masked: MOEJIT_TRY(run_masked(p, a_rows, eval)); break;
    default:
      return error(Code::invalid_argument, "layout {}: expected indexed, contiguous or masked",
                   static_cast<int>(p.layout));
  }
  return out;
}

}  // namespace moejit::quant
