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
    case Op::grouped_gemm:
      return error(Code::unsupported,
                   "field 'op' = grouped_gemm: this build has no grouped GEMM template yet");
    case Op::none: break;
  }
  return error(Code::invalid_argument, "field 'op' is not set: expected moe_align or grouped_gemm");
}

}  // namespace moejit
