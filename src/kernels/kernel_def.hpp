#pragma once
// What one kernel op is: the template it instantiates, the spec fields it uses and their ranges,
// the template's own constraints on a target, the compile-time constants a spec becomes, and the
// block size and dynamic shared memory of its launches. Each op's definition lives in
// kernels/<op>.cpp together with everything else about launching it (grid, workspace, checks of
// the run-time arguments): one home per op. The block size and shared memory are computed here
// once, at code generation, stored with the compiled kernel, and read from it at launch.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit {

// `static constexpr <type> <name> = <value>;` members of the generated Spec struct.
struct SpecConstant {
  std::string_view type;  // "int", "unsigned", ...
  std::string_view name;
  std::string value;
};

struct KernelDef {
  std::string_view entry;        // logical template path, e.g. "moe/align.cuh"
  std::string_view kernel;       // qualified kernel template name
  std::string_view params_type;  // qualified type of the kernel's single by-value argument
  // The fields the op uses are in range and the others are zero (no target constraints).
  Status (*validate_fields)(const KernelSpec&);
  // Constraints the template adds on the spec's target (alignment, shared memory, ...).
  Status (*check)(const KernelSpec&);
  std::vector<SpecConstant> (*constants)(const KernelSpec&);
  std::uint32_t (*block_threads)(const KernelSpec&);
  std::uint32_t (*dynamic_shared_bytes)(const KernelSpec&);
};

// The definition of `op`, or an error naming the op.
Result<const KernelDef*> find_kernel_def(Op op);

// Checks a KernelSpec before anything is generated or compiled: every enum is a known value,
// the target and backend are set, and the op's fields are in range (KernelDef::validate_fields).
Status validate_spec(const KernelSpec& spec);

}  // namespace moejit
