#pragma once
// A recipe says how one op's template turns a KernelSpec into a kernel: which template and
// kernel, the compile-time constants the spec becomes, the template's own constraints, and the
// launch shape. One recipe per op, each in its own file (recipe_<op>.cpp).

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit::codegen {

// `static constexpr <type> <name> = <value>;` members of the generated Spec struct.
struct SpecConstant {
  std::string_view type;  // "int", "bool", ...
  std::string_view name;
  std::string value;
};

struct KernelRecipe {
  std::string_view entry;        // logical template path, e.g. "moe/align.cuh"
  std::string_view kernel;       // qualified kernel template name
  std::string_view params_type;  // qualified type of the kernel's single by-value argument
  // Constraints the template adds to validate_spec (alignment, shared memory, ...).
  Status (*check)(const KernelSpec&);
  std::vector<SpecConstant> (*constants)(const KernelSpec&);
  std::uint32_t (*block_threads)(const KernelSpec&);
  std::uint32_t (*dynamic_shared_bytes)(const KernelSpec&);
};

// The recipe for `op`, or an error naming the op.
Result<const KernelRecipe*> find_recipe(Op op);

extern const KernelRecipe kMoeAlignRecipe;
extern const KernelRecipe kGroupedGemmRecipe;
extern const KernelRecipe kMoeReduceRecipe;

}  // namespace moejit::codegen
