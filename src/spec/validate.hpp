#pragma once
// Checks a KernelSpec before anything is generated or compiled: every enum is a known value, the
// fields the op uses are in range, and the fields it does not use are left at zero (so that two
// specs meaning the same kernel can never hash to two keys). Template-specific constraints
// (alignment, shared memory) are checked by the op's recipe in codegen.

#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit {

Status validate_spec(const KernelSpec& spec);

}  // namespace moejit
