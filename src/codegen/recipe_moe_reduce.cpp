// Recipe for the MoE top-k reduction (templates/moe/reduce.cuh).

#include "codegen/recipe.hpp"

namespace moejit::codegen {
namespace {

std::vector<SpecConstant> reduce_constants(const KernelSpec& s) {
  return {{"int", "act", std::to_string(static_cast<int>(s.act))},
          {"int", "out", std::to_string(static_cast<int>(s.out))},
          {"unsigned", "n", std::to_string(s.n)},
          {"unsigned", "warps", std::to_string(s.warps)}};
}

}  // namespace

const KernelRecipe kMoeReduceRecipe = {
    .entry = "moe/reduce.cuh",
    .kernel = "moejit::kernels::moe_reduce_kernel",
    .params_type = "moejit::MoeReduceParams",
    .check = [](const KernelSpec&) { return Status{}; },
    .constants = reduce_constants,
    .block_threads = [](const KernelSpec& s) { return s.warps * 32u; },
    .dynamic_shared_bytes = [](const KernelSpec&) { return 0u; },
};

}  // namespace moejit::codegen
