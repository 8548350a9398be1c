// Recipe for the routing-align kernel (templates/moe/align.cuh).

#include <fmt/format.h>

#include "codegen/recipe.hpp"
#include "moe/align_params.cuh"
#include "spec/arch.hpp"

namespace moejit::codegen {
namespace {

std::uint32_t align_block_threads(const KernelSpec& s) { return s.warps * 32u; }

std::uint32_t align_dynamic_shared(const KernelSpec& s) {
  return static_cast<std::uint32_t>(align_shared_bytes(s.experts, s.warps));
}

Status align_check(const KernelSpec& s) {
  const auto& arch = arch_info(s.arch);
  if (std::uint32_t need = align_dynamic_shared(s); need > arch.max_shared_per_block)
    return error(Code::invalid_argument,
                 "fields 'experts' = {} and 'warps' = {}: moe_align needs (warps*experts + "
                 "experts + 1)*4 = {} bytes of shared memory, more than the {} bytes a block may "
                 "use on {}; expected fewer warps",
                 s.experts, s.warps, need, arch.max_shared_per_block, arch.name);
  return {};
}

std::vector<SpecConstant> align_constants(const KernelSpec& s) {
  return {{"int", "experts", std::to_string(s.experts)},
          {"int", "block_size", std::to_string(s.bm)},
          {"int", "warps", std::to_string(s.warps)}};
}

}  // namespace

const KernelRecipe kMoeAlignRecipe = {
    .entry = "moe/align.cuh",
    .kernel = "moejit::kernels::moe_align_kernel",
    .params_type = "moejit::MoeAlignParams",
    .check = align_check,
    .constants = align_constants,
    .block_threads = align_block_threads,
    .dynamic_shared_bytes = align_dynamic_shared,
};

}  // namespace moejit::codegen
