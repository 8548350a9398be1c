#pragma once
// The grouped GEMM benchmark's cases and their memory floor (header-only: bench_gemm and the
// test of the arithmetic, tests/test_device_bench_floor.cpp, share it).
//
// A case is one projection of one model's MoE layer at one token count: gate/up (N = 2 I,
// K = H, act-and-mul epilogue, one A row per token) or down (N = H, K = I, top-k weighted
// epilogue, one A row per (token, k) pair). The floor is the time the bytes that must move take
// at the device's measured copy bandwidth: the packed weights, scales (and bias) of the experts
// the routing touches, the activations read and the outputs written; or, when longer, the time
// its FLOPs take at the device's measured dense bf16 GEMM rate.

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spec/arch.hpp"
#include "spec/kernel_spec.hpp"
#include "spec/spec_fields.hpp"

namespace moejit::bench {

struct MoeModel {
  std::string_view name;
  std::uint32_t hidden, intermediate, experts, topk;
  Epilogue activation;  // of the gate/up projection
  bool bias;            // per-expert bias on both projections
};

inline constexpr MoeModel kModels[] = {
    {"Ling-3.0-flash", 2560, 768, 512, 8, Epilogue::silu_and_mul, false},
    {"DeepSeek-V3", 7168, 2048, 256, 8, Epilogue::silu_and_mul, false},
    {"Qwen3-30B-A3B", 2048, 768, 128, 8, Epilogue::silu_and_mul, false},
    {"gpt-oss-120b", 2880, 2880, 128, 4, Epilogue::swiglu_oai, true},
};

struct WeightChoice {
  std::string_view name;
  WeightFormat weight;
  DType scale;
  std::uint32_t group;
  // f16: W4A16 with f16 activations and outputs, weights packed for them (MXFP4's a16f16 order;
  // INT4 with f16 scales, as GPTQ exports for f16 models). e4m3: W4A8, weights packed for it,
  // one f32 scale per A row. e2m1: W4A4 (MXFP4 weights, sm_120a / sm_121a), weights packed for
  // it, one E8M0 byte per A row and 32 k.
  DType act = DType::bf16;
  // Every activation but bf16: the format this one is set beside (same weights, bf16 activations).
  std::string_view bf16_twin = {};
  // e4m3: one f32 scale per A row and 128 k instead of one per row (DeepSeek's FP8 recipe, as
  // DeepEP's dispatch delivers the activations).
  bool block128 = false;
};

inline constexpr WeightChoice kWeightChoices[] = {
    {"mxfp4", WeightFormat::mxfp4, DType::e8m0, 32},
    {"int4_g128", WeightFormat::int4_sym, DType::bf16, 128},
    {"mxfp4_w4a8", WeightFormat::mxfp4, DType::e8m0, 32, DType::e4m3, "mxfp4"},
    {"int4_g128_w4a8", WeightFormat::int4_sym, DType::bf16, 128, DType::e4m3, "int4_g128"},
    {"int4_g128_w4a8_block128", WeightFormat::int4_sym, DType::bf16, 128, DType::e4m3, "int4_g128", true},
    {"mxfp4_w4a4", WeightFormat::mxfp4, DType::e8m0, 32, DType::e2m1, "mxfp4"},
    {"mxfp4_f16", WeightFormat::mxfp4, DType::e8m0, 32, DType::f16, "mxfp4"},
    {"int4_g128_f16", WeightFormat::int4_sym, DType::f16, 128, DType::f16, "int4_g128"},
};

inline bool is_w4a8(const WeightChoice& f) { return f.act == DType::e4m3; }
inline bool is_w4a4(const WeightChoice& f) { return f.act == DType::e2m1; }
inline bool is_f16_act(const WeightChoice& f) { return f.act == DType::f16; }
inline bool quantized_act(const WeightChoice& f) { return is_w4a8(f) || is_w4a4(f); }
// A format set beside its bf16 twin (f16, e4m3, e2m1 activations): run at the quick token
// counts only, after every bf16 format's cases.
inline bool beside_bf16(const WeightChoice& f) { return f.act != DType::bf16; }
// The dtype of A's 16-bit activations and of C: f16 for f16 formats, else bf16.
inline DType out_dtype(const WeightChoice& f) { return is_f16_act(f) ? DType::f16 : DType::bf16; }
// The key of a result's ratio to its bf16 twin: "vs_w4a16" for quantized activations (W4A8,
// W4A4), "vs_bf16" for f16 ones.
inline std::string_view twin_key(const WeightChoice& f) { return quantized_act(f) ? "vs_w4a16" : "vs_bf16"; }
// Bytes of one A row of k activations, and of its scales.
inline std::uint64_t act_row_bytes(const WeightChoice& f, std::uint32_t k) {
  return is_w4a4(f) ? k / 2 : is_w4a8(f) ? k : std::uint64_t{2} * k;
}
inline std::uint64_t act_scale_row_bytes(const WeightChoice& f, std::uint32_t k) {
  if (is_w4a8(f)) return f.block128 ? std::uint64_t{4} * (k / 128) : 4;
  return is_w4a4(f) ? k / 32 : 0;
}
// The activation-scale granularity the cases use: for e4m3 per token (as an engine quantizing
// its own hidden states would) or per 128 k (block128 formats), the MX block for e2m1.
inline ActScale case_act_scale(const WeightChoice& f) {
  if (is_w4a8(f)) return f.block128 ? ActScale::block128 : ActScale::token;
  return is_w4a4(f) ? ActScale::block32 : ActScale::none;
}

// Why a format cannot run on `arch` (empty: it can): e4m3 activations need sm_89 or newer,
// e2m1 ones the block-scaled mma of sm_120a / sm_121a.
inline std::string unsupported_on(const WeightChoice& f, Arch arch) {
  if (is_w4a4(f) && !has_block_scale_mma(arch))
    return std::string("W4A4 (e2m1 activations) needs the block-scaled mma of sm_120a / sm_121a; this target is ") +
           std::string(to_string(arch));
  if (is_w4a8(f) && arch_info(arch).sm < 89)
    return std::string("W4A8 (e4m3 activations) needs sm_89 or newer; this target is ") + std::string(to_string(arch));
  return {};
}

// Decode (1-256) and prefill (1024, 4096) token counts.
inline constexpr std::uint32_t kTokens[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096};
inline constexpr std::uint32_t kQuickTokens[] = {1, 32, 1024};

enum class Projection : std::uint8_t { gate_up, down };
inline std::string_view to_string(Projection p) { return p == Projection::gate_up ? "gate_up" : "down"; }

struct GemmCase {
  const MoeModel* model = nullptr;
  const WeightChoice* format = nullptr;
  Projection projection = Projection::gate_up;
  std::uint32_t tokens = 0;

  std::uint32_t n() const { return projection == Projection::gate_up ? 2 * model->intermediate : model->hidden; }
  std::uint32_t k() const { return projection == Projection::gate_up ? model->hidden : model->intermediate; }
  Epilogue epilogue() const { return projection == Projection::gate_up ? model->activation : Epilogue::topk_weight; }
  std::uint64_t pairs() const { return std::uint64_t{tokens} * model->topk; }
  // Columns of C: act-and-mul halves N.
  std::uint32_t out_columns() const { return projection == Projection::gate_up ? n() / 2 : n(); }
  // Rows of A: gate/up reads one row per token (divisor topk), down one per pair.
  std::uint64_t a_rows() const { return projection == Projection::gate_up ? tokens : pairs(); }
};

// A format applies to a projection when its group divides K (gpt-oss-120b's K = 2880 is not a
// multiple of 128, so it has no INT4 g128 cases; it ships MXFP4).
inline bool applicable(const GemmCase& c) { return c.k() % c.format->group == 0; }

// Every applicable case, grouped by model, format and projection (so one set of weights serves
// a run of token counts), token counts increasing: first every model's bf16 formats, then the
// formats set beside them (f16, W4A8, W4A4), which run at the quick token counts only: enough
// to compare without doubling the run, and a run that spends its time budget loses them first.
inline std::vector<GemmCase> enumerate_cases(bool quick) {
  std::vector<GemmCase> out;
  for (const bool beside : {false, true})
    for (const MoeModel& m : kModels)
      for (const WeightChoice& f : kWeightChoices) {
        if (beside_bf16(f) != beside) continue;
        std::span<const std::uint32_t> tokens = quick || beside ? std::span<const std::uint32_t>(kQuickTokens)
                                                                : std::span<const std::uint32_t>(kTokens);
        for (Projection p : {Projection::gate_up, Projection::down})
          for (std::uint32_t t : tokens)
            if (GemmCase c{&m, &f, p, t}; applicable(c)) out.push_back(c);
      }
  return out;
}

inline std::uint32_t scale_bytes(DType scale) { return scale == DType::e8m0 ? 1 : 2; }

// Per expert: packed 4-bit weights, and scales (plus zero points for int4_asym) per group.
inline std::uint64_t expert_weight_bytes(const GemmCase& c) { return std::uint64_t{c.n()} * c.k() / 2; }
inline std::uint64_t expert_scale_bytes(const GemmCase& c) {
  const std::uint64_t groups = c.k() / c.format->group;
  const std::uint64_t per = scale_bytes(c.format->scale) + (c.format->weight == WeightFormat::int4_asym ? 1 : 0);
  return std::uint64_t{c.n()} * groups * per;
}
inline std::uint64_t expert_bias_bytes(const GemmCase& c) { return c.model->bias ? std::uint64_t{c.n()} * 4 : 0; }

// Experts that uniform random top-k routing (k distinct experts per token) touches on average:
// each expert is missed by one token with probability 1 - k/E.
inline double expected_touched_experts(std::uint32_t experts, std::uint32_t topk, std::uint32_t tokens) {
  const double miss = 1.0 - static_cast<double>(topk) / experts;
  return experts * (1.0 - std::pow(miss, static_cast<double>(tokens)));
}

struct CaseBytes {
  double weights = 0;  // packed weights of the touched experts
  double scales = 0;   // their scales (and zero points)
  double bias = 0;     // their bias
  double act_in = 0;   // A rows read (bf16 or f16; W4A8: e4m3 and one f32 scale per row or per 128; W4A4: e2m1 and E8M0 per 32)
  double act_out = 0;  // C rows written (bf16, f16 for f16 activations)
  double total() const { return weights + scales + bias + act_in + act_out; }
};

// The bytes that must move for `c` when `touched_experts` experts get tokens (fractional for
// an average over routings).
inline CaseBytes case_bytes(const GemmCase& c, double touched_experts) {
  CaseBytes b;
  b.weights = touched_experts * static_cast<double>(expert_weight_bytes(c));
  b.scales = touched_experts * static_cast<double>(expert_scale_bytes(c));
  b.bias = touched_experts * static_cast<double>(expert_bias_bytes(c));
  b.act_in = static_cast<double>(c.a_rows()) * static_cast<double>(act_row_bytes(*c.format, c.k()) +
                                                                    act_scale_row_bytes(*c.format, c.k()));
  b.act_out = static_cast<double>(c.pairs()) * c.out_columns() * 2;
  return b;
}

// A device-to-device copy of `bytes` reads and writes each byte once.
inline double copy_bandwidth_bytes_per_s(double bytes_copied, double seconds) { return 2 * bytes_copied / seconds; }

// The useful multiply-adds of a case, two FLOPs each: every (token, k) pair's row times the
// N x K weights of its expert. Padding rows and the epilogue are not counted.
inline double case_flops(const GemmCase& c) { return 2.0 * static_cast<double>(c.pairs()) * c.n() * c.k(); }

// A dense GEMM of m x n x k in `seconds` runs at this many FLOP/s (the floor's matrix rate).
inline double gemm_flops_per_s(double m, double n, double k, double seconds) { return 2 * m * n * k / seconds; }

// The memory floor in microseconds: the case's bytes at the copy bandwidth.
inline double floor_us(const CaseBytes& b, double copy_bytes_per_s) { return b.total() / copy_bytes_per_s * 1e6; }

// The floor of a case: its bytes at the copy bandwidth, or its FLOPs at the dense bf16 matrix
// rate, whichever takes longer (a rate of 0, not measured, leaves the memory floor alone).
struct Floor {
  double memory_us = 0, compute_us = 0;
  double us() const { return memory_us > compute_us ? memory_us : compute_us; }
  std::string_view bound() const { return memory_us >= compute_us ? "memory" : "compute"; }
};
inline Floor case_floor(const CaseBytes& b, double flops, double copy_bytes_per_s, double flops_per_s) {
  return {floor_us(b, copy_bytes_per_s), flops_per_s > 0 ? flops / flops_per_s * 1e6 : 0.0};
}

// Achieved / floor: 1.0 means the kernel moved its bytes as fast as a copy does.
inline double fraction_of_floor(double floor_microseconds, double measured_microseconds) {
  return floor_microseconds / measured_microseconds;
}

// A layer case: one model's whole MoE layer at one token count, as an engine calls it
// (moejit_fused_moe: routing align, gate/up GEMM with the activation, down GEMM with the top-k
// weight, top-k reduction), with one routing for both GEMMs.
struct LayerCase {
  const MoeModel* model = nullptr;
  const WeightChoice* format = nullptr;
  std::uint32_t tokens = 0;
  GemmCase gate_up() const { return {model, format, Projection::gate_up, tokens}; }
  GemmCase down() const { return {model, format, Projection::down, tokens}; }
};

inline bool applicable(const LayerCase& c) { return applicable(c.gate_up()) && applicable(c.down()); }

// Every applicable layer case, by model and format, token counts increasing.
inline std::vector<LayerCase> enumerate_layer_cases(bool quick) {
  std::vector<LayerCase> out;
  for (const GemmCase& c : enumerate_cases(quick))
    if (c.projection == Projection::gate_up && applicable(LayerCase{c.model, c.format, c.tokens}))
      out.push_back({c.model, c.format, c.tokens});
  return out;
}

// The bytes a layer must move: both projections' weights, scales and bias of the touched
// experts, the hidden states read and the output written (T x H bf16 each). The intermediate
// activations between the GEMMs are not counted: a fused kernel could keep them on chip.
inline CaseBytes layer_bytes(const LayerCase& c, double touched_experts) {
  const CaseBytes up = case_bytes(c.gate_up(), touched_experts), down = case_bytes(c.down(), touched_experts);
  CaseBytes b;
  b.weights = up.weights + down.weights;
  b.scales = up.scales + down.scales;
  b.bias = up.bias + down.bias;
  b.act_in = static_cast<double>(c.tokens) * c.model->hidden * 2;
  b.act_out = static_cast<double>(c.tokens) * c.model->hidden * 2;
  return b;
}

inline double layer_flops(const LayerCase& c) { return case_flops(c.gate_up()) + case_flops(c.down()); }

}  // namespace moejit::bench
