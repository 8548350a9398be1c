#include "spec/validate.hpp"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <string_view>

#include "spec/spec_fields.hpp"

namespace moejit {
namespace {

using namespace std::string_view_literals;

bool is_pow2(std::uint32_t v) { return v != 0 && (v & (v - 1)) == 0; }

Status check_range(std::string_view field, std::uint32_t v, std::uint32_t lo, std::uint32_t hi,
                   std::string_view op) {
  if (v < lo || v > hi)
    return error(Code::invalid_argument, "field '{}' = {}: expected a value in [{}, {}] for op {}",
                 field, v, lo, hi, op);
  return {};
}

Status check_pow2(std::string_view field, std::uint32_t v, std::uint32_t lo, std::uint32_t hi,
                  std::string_view op) {
  if (!is_pow2(v) || v < lo || v > hi)
    return error(Code::invalid_argument,
                 "field '{}' = {}: expected a power of two in [{}, {}] for op {}", field, v, lo, hi,
                 op);
  return {};
}

// Fields outside `used` must be zero for this op.
Status check_unused(const KernelSpec& spec, std::initializer_list<std::string_view> used) {
  for (const auto& f : spec_fields()) {
    if (std::find(used.begin(), used.end(), f.name) != used.end()) continue;
    if (auto v = f.get(spec); v != 0)
      return error(Code::invalid_argument,
                   "field '{}' = {}: op {} does not use it; expected it absent (0 / none)", f.name,
                   field_value_text(f, v), to_string(spec.op));
  }
  return {};
}

Status validate_moe_align(const KernelSpec& spec) {
  MOEJIT_TRY(check_unused(spec, {"op"sv, "arch"sv, "backend"sv, "warps"sv, "bm"sv, "experts"sv}));
  MOEJIT_TRY(check_range("experts", spec.experts, 1, 4096, "moe_align"));
  MOEJIT_TRY(check_pow2("bm", spec.bm, 8, 256, "moe_align"));
  MOEJIT_TRY(check_range("warps", spec.warps, 1, 32, "moe_align"));
  return {};
}

Status expect_one_of(std::string_view field, std::string_view value, bool ok, std::string_view expected,
                     std::string_view why = {}) {
  if (ok) return {};
  return error(Code::invalid_argument, "field '{}' = {}: expected {}{}{}", field, value, expected,
               why.empty() ? "" : " ", why);
}

Status validate_grouped_gemm(const KernelSpec& s) {
  constexpr std::string_view op = "grouped_gemm";
  const bool mxfp4 = s.weight == WeightFormat::mxfp4;
  MOEJIT_TRY(expect_one_of("weight", to_string(s.weight), s.weight != WeightFormat::none,
                           "mxfp4, int4_sym or int4_asym"));
  MOEJIT_TRY(expect_one_of("scale", to_string(s.scale),
                           mxfp4 ? s.scale == DType::e8m0 : (s.scale == DType::bf16 || s.scale == DType::f16),
                           mxfp4 ? "e8m0" : "bf16 or f16", mxfp4 ? "(MXFP4 scales are E8M0)" : "(INT4 scales)"));
  if (s.act == DType::e4m3)
    return error(Code::unsupported,
                 "field 'act' = e4m3: FP8 activations are not implemented yet; expected bf16 or f16");
  MOEJIT_TRY(expect_one_of("act", to_string(s.act), s.act == DType::bf16 || s.act == DType::f16, "bf16 or f16"));
  MOEJIT_TRY(expect_one_of("out", to_string(s.out),
                           s.out == DType::bf16 || s.out == DType::f16 || s.out == DType::f32, "bf16, f16 or f32"));
  MOEJIT_TRY(expect_one_of("layout", to_string(s.layout), s.layout != Layout::none,
                           "indexed, contiguous or masked"));
  MOEJIT_TRY(expect_one_of("epilogue", to_string(s.epilogue),
                           s.epilogue != Epilogue::topk_weight || s.layout == Layout::indexed,
                           "none, silu_and_mul or swiglu_oai", "(topk_weight needs the indexed layout)"));
  if (s.n < 32 || s.n % 32 != 0)
    return error(Code::invalid_argument, "field 'n' = {}: expected a positive multiple of 32 (the packed weight tile)", s.n);
  if (s.k < 32 || s.k % 32 != 0)
    return error(Code::invalid_argument, "field 'k' = {}: expected a positive multiple of 32 (the packed weight tile)", s.k);
  if (mxfp4 && s.group_size != 32)
    return error(Code::invalid_argument, "field 'group_size' = {}: expected 32 for mxfp4 (one E8M0 scale per 32 k)", s.group_size);
  if (!mxfp4) {
    const bool size_ok = s.group_size == 32 || s.group_size == 64 || s.group_size == 128 || s.group_size == s.k;
    if (!size_ok)
      return error(Code::invalid_argument,
                   "field 'group_size' = {}: expected 32, 64, 128, or k = {} (per-channel)", s.group_size, s.k);
    if (s.k % s.group_size != 0)
      return error(Code::invalid_argument, "field 'group_size' = {}: does not divide k = {}", s.group_size, s.k);
  }
  MOEJIT_TRY(check_range("experts", s.experts, 1, 4096, op));
  MOEJIT_TRY(check_pow2("bm", s.bm, 16, 128, op));
  MOEJIT_TRY(check_pow2("bn", s.bn, 32, 256, op));
  MOEJIT_TRY(check_pow2("bk", s.bk, 32, 256, op));
  if (s.k % s.bk != 0)
    return error(Code::invalid_argument, "field 'bk' = {}: does not divide k = {}; expected a bk that does (the k loop runs whole stages)",
                 s.bk, s.k);
  MOEJIT_TRY(check_range("stages", s.stages, 2, 6, op));
  MOEJIT_TRY(check_pow2("warps", s.warps, 1, 8, op));
  MOEJIT_TRY(check_range("split_k", s.split_k, 1, 64, op));
  if (s.split_k > s.k / s.bk)
    return error(Code::invalid_argument, "field 'split_k' = {}: expected at most k / bk = {} splits (splits are whole stages)",
                 s.split_k, s.k / s.bk);
  return {};
}

Status validate_moe_reduce(const KernelSpec& s) {
  MOEJIT_TRY(check_unused(s, {"op"sv, "arch"sv, "backend"sv, "act"sv, "out"sv, "n"sv, "warps"sv}));
  auto float_type = [](DType d) { return d == DType::bf16 || d == DType::f16 || d == DType::f32; };
  MOEJIT_TRY(expect_one_of("act", to_string(s.act), float_type(s.act), "bf16, f16 or f32", "(the pair outputs)"));
  MOEJIT_TRY(expect_one_of("out", to_string(s.out), float_type(s.out), "bf16, f16 or f32"));
  if (s.n < 8 || s.n % 8 != 0)
    return error(Code::invalid_argument, "field 'n' = {}: expected a positive multiple of 8 (one 16-byte vector per thread)", s.n);
  MOEJIT_TRY(check_range("warps", s.warps, 1, 32, "moe_reduce"));
  return {};
}

}  // namespace

Status validate_spec(const KernelSpec& spec) {
  for (const auto& f : spec_fields()) {
    if (f.is_enum() && f.get(spec) >= f.value_names.size())
      return error(Code::invalid_argument, "field '{}' holds the unknown value {}", f.name,
                   f.get(spec));
  }
  if (spec.arch == Arch::none)
    return error(Code::invalid_argument, "field 'arch' is not set: expected one of sm_80 ... sm_121a");
  if (spec.backend == Backend::none)
    return error(Code::invalid_argument, "field 'backend' is not set: expected device or host");
  switch (spec.op) {
    case Op::moe_align: return validate_moe_align(spec);
    case Op::grouped_gemm: return validate_grouped_gemm(spec);
    case Op::moe_reduce: return validate_moe_reduce(spec);
    case Op::none: break;
  }
  return error(Code::invalid_argument, "field 'op' is not set: expected moe_align, grouped_gemm or moe_reduce");
}

}  // namespace moejit
