#pragma once
// Range checks the kernel definitions share; each error names the field, its value and what was
// expected.

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit::spec_checks {

Status range(std::string_view field, std::uint32_t v, std::uint32_t lo, std::uint32_t hi, std::string_view op);
Status pow2(std::string_view field, std::uint32_t v, std::uint32_t lo, std::uint32_t hi, std::string_view op);
// Fields outside `used` must be zero for this op (so that two specs meaning the same kernel
// never hash to two keys).
Status unused_zero(const KernelSpec& spec, std::initializer_list<std::string_view> used);
Status one_of(std::string_view field, std::string_view value, bool ok, std::string_view expected,
              std::string_view why = {});

}  // namespace moejit::spec_checks
