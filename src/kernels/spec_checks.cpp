#include "kernels/spec_checks.hpp"

#include <algorithm>

#include "spec/spec_fields.hpp"

namespace moejit::spec_checks {

Status range(std::string_view field, std::uint32_t v, std::uint32_t lo, std::uint32_t hi, std::string_view op) {
  if (v < lo || v > hi)
    return error(Code::invalid_argument, "field '{}' = {}: expected a value in [{}, {}] for op {}", field, v, lo, hi,
                 op);
  return {};
}

Status pow2(std::string_view field, std::uint32_t v, std::uint32_t lo, std::uint32_t hi, std::string_view op) {
  if (v == 0 || (v & (v - 1)) != 0 || v < lo || v > hi)
    return error(Code::invalid_argument, "field '{}' = {}: expected a power of two in [{}, {}] for op {}", field, v,
                 lo, hi, op);
  return {};
}

Status unused_zero(const KernelSpec& spec, std::initializer_list<std::string_view> used) {
  for (const auto& f : spec_fields()) {
    if (std::find(used.begin(), used.end(), f.name) != used.end()) continue;
    if (auto v = f.get(spec); v != 0)
      return error(Code::invalid_argument, "field '{}' = {}: op {} does not use it; expected it absent (0 / none)",
                   f.name, field_value_text(f, v), to_string(spec.op));
  }
  return {};
}

Status one_of(std::string_view field, std::string_view value, bool ok, std::string_view expected,
              std::string_view why) {
  if (ok) return {};
  return error(Code::invalid_argument, "field '{}' = {}: expected {}{}{}", field, value, expected,
               why.empty() ? "" : " ", why);
}

}  // namespace moejit::spec_checks
