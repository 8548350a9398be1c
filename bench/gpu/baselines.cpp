#include "bench/gpu/baselines.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "bench/cutlass/cutlass_baselines.hpp"
#include "bench/gpu/device_data.hpp"
#include "bench/gpu/result_json.hpp"
#include "common/numeric.cuh"

namespace moejit::bench {

namespace cb = cutlass_baseline;

namespace {

constexpr std::uint32_t kCheckedRows = 8;
constexpr double kMaxRelError = 1e-2;  // bf16 outputs, as the kernel tests ask of moejit

Status cutlass_status(std::string_view what, const std::string& message) {
  if (message.empty()) return {};
  return error(Code::internal, "CUTLASS {}: {}", what, message);
}

// Relative Frobenius error of `got` against `want`, with the values that are not finite counted.
struct Comparison {
  double err2 = 0, ref2 = 0;
  std::uint64_t compared = 0, nonfinite = 0;
  void add(double got, double want) {
    ++compared;
    if (!std::isfinite(got)) {
      ++nonfinite;
      return;
    }
    err2 += (got - want) * (got - want);
    ref2 += want * want;
  }
  double rel_error() const { return ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2); }
  bool pass() const { return compared > 0 && nonfinite == 0 && rel_error() < kMaxRelError; }
  Json json() const {
    return {{"compared", compared}, {"nonfinite", nonfinite}, {"rel_error", rel_error()}, {"max_rel_error", kMaxRelError},
            {"pass", pass()}};
  }
};

}  // namespace

std::string_view to_string(Baseline b) {
  switch (b) {
    case Baseline::cutlass_bf16_grouped: return "cutlass_bf16_grouped";
    case Baseline::cutlass_int4_grouped: return "cutlass_int4_grouped";
    case Baseline::cutlass_int4_fp8_grouped: return "cutlass_int4_fp8_grouped";
  }
  return "?";
}

std::string not_applicable(Baseline b, const GemmCase& c, Arch arch) {
  // Which baseline fits the case first, whether this build has it last: a dry run of a build
  // without the kernels still lists each case's own baselines, as ones it lacks.
  const auto fits_but_missing = []() -> std::string {
    if (cb::available()) return {};
    return "the CUTLASS kernels are not in this build (" + cb::build_info() + ")";
  };
  if (arch != Arch::sm_90a)
    return fmt::format("the CUTLASS kernels are built for sm_90a only (wgmma, TMA); this target is {}", to_string(arch));
  if (b == Baseline::cutlass_bf16_grouped) return fits_but_missing();
  if (c.format->weight != WeightFormat::int4_sym)
    return "CUTLASS's Hopper mixed-input grouped GEMM has no E2M1 + E8M0 (MXFP4) weight mode; the INT4 g128 "
           "case of the same problem has this baseline";
  const bool fp8 = b == Baseline::cutlass_int4_fp8_grouped;
  if (fp8 != is_w4a8(*c.format))
    return fp8 ? "W4A16: CUTLASS's int4 x bf16 kernel (cutlass_int4_grouped) is this case's baseline"
               : "W4A8: CUTLASS's int4 x e4m3 kernel (cutlass_int4_fp8_grouped) is this case's baseline";
  if (c.format->scale != DType::bf16) return "the CUTLASS int4 baselines are built from bf16 scales";
  return fits_but_missing();
}

namespace {

// The int4 x e4m3 kernel's scale of each bf16 scale: the nearest power of two (so value x scale
// is exact in e4m3), times 2^shift, the one power of two for the whole block that brings the
// largest to at most 56 (8 x 56 = 448, e4m3's largest). Returns the e4m3 bit patterns.
std::vector<std::uint8_t> e4m3_table_scales(std::span<const std::uint16_t> bf16_scales) {
  double largest = 0;
  for (const std::uint16_t h : bf16_scales) largest = std::max(largest, std::abs(double(prim::twin::bf16_to_f32(h))));
  const int shift = largest > 0 ? static_cast<int>(std::floor(std::log2(56.0 / largest))) : 0;
  std::vector<std::uint8_t> out(bf16_scales.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double s = prim::twin::bf16_to_f32(bf16_scales[i]);
    const double pow2 = s == 0 ? 0 : std::exp2(std::round(std::log2(std::abs(s))) + shift);
    // Never below e4m3's smallest subnormal nor above 56 (the rounding can pass the bound by one step).
    const double clamped = pow2 == 0 ? 0 : std::clamp(pow2, 0x1p-9, 32.0);
    out[i] = prim::twin::f32_to_e4m3(static_cast<float>(std::copysign(clamped, s)));
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<BaselineWeights>> BaselineWeights::create(DeviceLauncher& l, CUstream stream, Baseline kind,
                                                                  const GemmCase& c,
                                                                  const quant::QuantizedWeights& block,
                                                                  std::uint64_t rotate_bytes) {
  if (const std::string why = not_applicable(kind, c, l.arch()); !why.empty()) return error(Code::unsupported, "{}", why);
  const std::uint32_t n = c.n(), k = c.k();
  if (block.experts < 1 || block.k != k || block.n == 0 || n % block.n != 0)
    return error(Code::invalid_argument, "weight block {} x {}: expected rows dividing N = {} and K = {}", block.n,
                 block.k, n, k);
  std::unique_ptr<BaselineWeights> w(new BaselineWeights(l, stream, kind));
  w->block_ = block.n;
  w->reference_w_.resize(std::uint64_t{block.n} * k);

  // One expert's weights and scales in CUTLASS's layout: row n holds block row n % block.
  std::vector<std::uint8_t> weights, scale_bytes;
  if (kind == Baseline::cutlass_bf16_grouped) {
    std::vector<u16> rows(std::uint64_t{block.n} * k);
    for (std::uint32_t r = 0; r < block.n; ++r)
      for (std::uint32_t kk = 0; kk < k; ++kk) {
        const u16 h = prim::twin::f32_to_bf16(static_cast<float>(block.dequantized(0, r, kk)));
        rows[std::uint64_t{r} * k + kk] = h;
        w->reference_w_[std::uint64_t{r} * k + kk] = prim::twin::bf16_to_f32(h);
      }
    weights.resize(std::uint64_t{n} * k * 2);
    for (std::uint32_t r = 0; r < n; ++r)
      std::memcpy(weights.data() + std::uint64_t{r} * k * 2, rows.data() + std::uint64_t{r % block.n} * k, k * 2ull);
  } else {
    const std::uint32_t group = c.format->group, groups = k / group;
    std::vector<std::int8_t> values(std::uint64_t{n} * k);
    std::vector<std::uint16_t> row_scales(std::uint64_t{n} * groups);
    for (std::uint32_t r = 0; r < n; ++r) {
      const std::uint32_t b = r % block.n;
      for (std::uint32_t kk = 0; kk < k; ++kk)
        values[std::uint64_t{r} * k + kk] = static_cast<std::int8_t>(
            static_cast<int>(block.codes[block.code_index(0, b, kk)]) - block.zero_of(0, b, kk));
      for (std::uint32_t g = 0; g < groups; ++g)
        row_scales[std::uint64_t{r} * groups + g] = block.scales[block.group_index(0, b, g)];
    }
    const int ni = static_cast<int>(n), ki = static_cast<int>(k), gi = static_cast<int>(group);
    if (kind == Baseline::cutlass_int4_grouped) {
      for (std::uint32_t r = 0; r < block.n; ++r)
        for (std::uint32_t kk = 0; kk < k; ++kk) w->reference_w_[std::uint64_t{r} * k + kk] = block.dequantized(0, r, kk);
      std::vector<std::uint16_t> scales;
      MOEJIT_TRY(cutlass_status("int4 weights", cb::int4_weight_bytes(values.data(), ni, ki, weights)));
      MOEJIT_TRY(cutlass_status("int4 scales", cb::int4_scale_bytes(row_scales.data(), ni, ki, gi, scales)));
      scale_bytes.resize(scales.size() * 2);
      std::memcpy(scale_bytes.data(), scales.data(), scale_bytes.size());
    } else {
      const std::vector<std::uint8_t> e4m3_scales = e4m3_table_scales(row_scales);
      for (std::uint32_t r = 0; r < block.n; ++r)
        for (std::uint32_t kk = 0; kk < k; ++kk)
          w->reference_w_[std::uint64_t{r} * k + kk] =
              double(values[std::uint64_t{r} * k + kk]) * prim::twin::e4m3_to_f32(e4m3_scales[std::uint64_t{r} * groups + kk / group]);
      MOEJIT_TRY(cutlass_status("int4 x e4m3 weights", cb::int4_fp8_weight_bytes(values.data(), ni, ki, weights)));
      MOEJIT_TRY(cutlass_status("int4 x e4m3 scales",
                                cb::int4_fp8_scale_bytes(e4m3_scales.data(), ni, ki, gi, scale_bytes)));
    }
  }
  const std::vector<std::uint8_t>& scales = scale_bytes;
  w->expert_weight_bytes_ = round16(weights.size());
  w->expert_scale_bytes_ = round16(scales.size());
  const std::uint64_t experts = c.model->experts;
  w->copies_ = rotation_copies(l, experts * (w->expert_weight_bytes_ + w->expert_scale_bytes_), rotate_bytes);
  const std::uint64_t count = experts * w->copies_;
  MOEJIT_ASSIGN_OR_RETURN(w->weights_, upload(l, stream, weights.data(), weights.size(), count * w->expert_weight_bytes_));
  MOEJIT_TRY(replicate(l, stream, w->weights_, w->expert_weight_bytes_, count));
  if (!scales.empty()) {
    MOEJIT_ASSIGN_OR_RETURN(w->scales_, upload(l, stream, scales.data(), scales.size(), count * w->expert_scale_bytes_));
    MOEJIT_TRY(replicate(l, stream, w->scales_, w->expert_scale_bytes_, count));
  }
  MOEJIT_TRY(l.synchronize(stream));
  return w;
}

Json BaselineWeights::run(const GemmCase& c, std::span<const Routing> routings, const TimingOptions& options,
                          std::mt19937_64& rng) {
  Result<Json> r = try_run(c, routings, options, rng);
  if (r.ok()) return std::move(r).value();
  return {{"error", r.status().message()}};
}

Result<Json> BaselineWeights::try_run(const GemmCase& c, std::span<const Routing> routings, const TimingOptions& options,
                                      std::mt19937_64& rng) {
  if (routings.empty()) return error(Code::invalid_argument, "routings: expected at least one");
  const std::uint32_t n = c.n(), k = c.k(), experts = c.model->experts;
  const std::uint64_t pairs = c.pairs();

  // A rows grouped by expert and D rows, one buffer of each per weight copy.
  const bool e4m3_act = kind_ == Baseline::cutlass_int4_fp8_grouped;
  const std::uint64_t a_size = e4m3_act ? 1 : 2;
  const std::uint64_t a_bytes = round16(pairs * k * a_size), d_bytes = round16(pairs * n * 2);
  std::vector<u16> a_bf16;
  std::vector<u8> a_e4m3;
  if (e4m3_act) a_e4m3 = random_e4m3(pairs * k, rng);
  else a_bf16 = random_bf16(pairs * k, rng);
  auto a_value = [&](std::uint64_t i) -> double {
    return e4m3_act ? prim::twin::e4m3_to_f32(a_e4m3[i]) : prim::twin::bf16_to_f32(a_bf16[i]);
  };
  const void* a_host = e4m3_act ? static_cast<const void*>(a_e4m3.data()) : a_bf16.data();
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_a, upload(l_, stream_, a_host, pairs * k * a_size, a_bytes * copies_));
  MOEJIT_TRY(replicate(l_, stream_, d_a, a_bytes, copies_));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_d, DeviceBuffer::allocate(l_, d_bytes * copies_));
  MOEJIT_TRY(l_.fill(d_d.data(), 0xff, d_bytes * copies_, stream_));  // NaN where nothing is written

  // One plan per rotation step p: weight copy and buffers p % copies, routing p % routings.
  std::vector<std::unique_ptr<cb::Plan>> plans;
  double touched = 0;
  for (const Routing& r : routings) touched += r.touched_experts;
  touched /= static_cast<double>(routings.size());
  const std::size_t steps = std::max<std::size_t>(copies_, routings.size());
  for (std::size_t p = 0; p < steps; ++p) {
    const Routing& routing = routings[p % routings.size()];
    const std::uint64_t copy = p % copies_;
    std::vector<int> rows(experts, 0);
    for (const std::int32_t e : routing.topk_ids) ++rows[static_cast<std::size_t>(e)];
    cb::GroupedProblem problem;
    problem.n = static_cast<int>(n);
    problem.k = static_cast<int>(k);
    const auto* a_base = d_a.as<const unsigned char>() + copy * a_bytes;
    auto* d_base = d_d.as<unsigned char>() + copy * d_bytes;
    std::uint64_t row = 0;
    for (std::uint32_t e = 0; e < experts; ++e) {
      if (rows[e] == 0) continue;
      const std::uint64_t expert = copy * experts + e;
      problem.m.push_back(rows[e]);
      problem.a.push_back(a_base + row * k * a_size);
      problem.w.push_back(weights_.as<const unsigned char>() + expert * expert_weight_bytes_);
      if (scales_) problem.scales.push_back(scales_.as<const unsigned char>() + expert * expert_scale_bytes_);
      problem.d.push_back(d_base + row * n * 2);
      row += static_cast<std::uint64_t>(rows[e]);
    }
    const int group = static_cast<int>(c.format->group);
    cb::PlanResult prepared = kind_ == Baseline::cutlass_bf16_grouped   ? cb::prepare_bf16_grouped(problem)
                              : kind_ == Baseline::cutlass_int4_grouped ? cb::prepare_int4_grouped(problem, group)
                                                                        : cb::prepare_int4_fp8_grouped(problem, group);
    if (!prepared.plan) return cutlass_status(to_string(kind_), prepared.error);
    plans.push_back(std::move(prepared.plan));
  }
  MOEJIT_TRY(l_.synchronize(stream_));

  auto enqueue = [&](std::uint64_t i) { return cutlass_status(to_string(kind_), plans[i % plans.size()]->run(stream_)); };
  MOEJIT_ASSIGN_OR_RETURN(Timing t, time_launches(l_.driver(), stream_, enqueue, options));

  // Sampled rows of copy 0's output, every column, against fp64: each row is its A row times
  // the (shared) expert weights, whichever group it fell in.
  Comparison check;
  std::vector<u16> out(n);
  std::vector<double> want(block_);
  const std::uint64_t checked = std::min<std::uint64_t>(pairs, kCheckedRows);
  for (std::uint64_t s = 0; s < checked; ++s) {
    const std::uint64_t row = s * pairs / checked;
    MOEJIT_TRY(l_.copy_from_backend(out.data(), d_d.as<unsigned char>() + row * n * 2, n * 2ull, stream_));
    MOEJIT_TRY(l_.synchronize(stream_));
    for (std::uint32_t b = 0; b < block_; ++b) {
      double sum = 0;
      for (std::uint32_t kk = 0; kk < k; ++kk)
        sum += a_value(row * k + kk) * reference_w_[std::uint64_t{b} * k + kk];
      want[b] = sum;
    }
    for (std::uint32_t col = 0; col < n; ++col) check.add(prim::twin::bf16_to_f32(out[col]), want[col % block_]);
  }

  // The bytes this kernel moves: its own weights (bf16: 4x moejit's), A rows, all N columns of D.
  CaseBytes bytes;
  bytes.weights = touched * static_cast<double>(expert_weight_bytes_);
  bytes.scales = touched * static_cast<double>(expert_scale_bytes_);
  bytes.act_in = static_cast<double>(pairs * k * a_size);
  bytes.act_out = static_cast<double>(pairs) * n * 2;
  Json j;
  j["kernel"] = plans.front()->name();
  j["groups"] = touched;
  j["weight_copies"] = copies_;
  j["bytes"] = bytes_json(bytes);
  add_timing(j, t, bytes, case_flops(c));
  j["output_check"] = check.json();
  j["output_check"]["rows"] = checked;
  if (!check.pass())
    j["error"] = fmt::format("output check failed: relative error {:.3g} (limit {}), {} values not finite",
                             check.rel_error(), kMaxRelError, check.nonfinite);
  return j;
}

Result<Json> measure_bf16_gemm_rate(DeviceLauncher& l, CUstream stream, std::uint32_t size,
                                    const TimingOptions& options, std::mt19937_64& rng) {
  Json j = {{"m", size}, {"n", size}, {"k", size}};
  if (!cb::available()) {
    j["tflops"] = nullptr;
    j["reason"] = "the CUTLASS kernels are not in this build (" + cb::build_info() + ")";
    return j;
  }
  const std::uint64_t count = std::uint64_t{size} * size;
  const std::vector<u16> a = random_bf16(count, rng), w = random_bf16(count, rng);
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_a, upload(l, stream, a.data(), count * 2, count * 2));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_w, upload(l, stream, w.data(), count * 2, count * 2));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_d, DeviceBuffer::allocate(l, count * 2));
  MOEJIT_TRY(l.fill(d_d.data(), 0xff, count * 2, stream));
  const int s = static_cast<int>(size);
  cb::PlanResult prepared = cb::prepare_bf16_dense(s, s, s, d_a.data(), d_w.data(), d_d.data());
  if (!prepared.plan) return cutlass_status("dense bf16 GEMM", prepared.error);
  MOEJIT_TRY(l.synchronize(stream));
  auto enqueue = [&](std::uint64_t) { return cutlass_status("dense bf16 GEMM", prepared.plan->run(stream)); };
  MOEJIT_ASSIGN_OR_RETURN(Timing t, time_launches(l.driver(), stream, enqueue, options));

  // 16 outputs spread over the matrix against fp64.
  Comparison check;
  std::vector<u16> row(size);
  for (std::uint64_t i = 0; i < 16; ++i) {
    const std::uint64_t r = i * 7919 % size, col = i * 104729 % size;
    MOEJIT_TRY(l.copy_from_backend(row.data(), d_d.as<unsigned char>() + r * size * 2, size * 2ull, stream));
    MOEJIT_TRY(l.synchronize(stream));
    double sum = 0;
    for (std::uint64_t kk = 0; kk < size; ++kk)
      sum += static_cast<double>(prim::twin::bf16_to_f32(a[r * size + kk])) * prim::twin::bf16_to_f32(w[col * size + kk]);
    check.add(prim::twin::bf16_to_f32(row[col]), sum);
  }
  j["kernel"] = prepared.plan->name();
  j["timing"] = t.mode;
  j["samples"] = t.sample_us.size();
  j["median_us"] = t.median_us;
  j["tflops"] = gemm_flops_per_s(size, size, size, t.median_us * 1e-6) / 1e12;
  j["output_check"] = check.json();
  if (!check.pass())
    return error(Code::internal, "dense bf16 GEMM output check failed: relative error {:.3g}, {} not finite",
                 check.rel_error(), check.nonfinite);
  return j;
}

}  // namespace moejit::bench
