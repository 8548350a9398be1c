#include "kernels/moe_align.hpp"

#include "gemm/grouped_gemm_params.cuh"
#include "kernels/spec_checks.hpp"
#include "spec/arch.hpp"

namespace moejit {
namespace {

using namespace std::string_view_literals;

Status align_fields(const KernelSpec& s) {
  MOEJIT_TRY(spec_checks::unused_zero(s, {"op"sv, "arch"sv, "backend"sv, "warps"sv, "bm"sv, "experts"sv}));
  MOEJIT_TRY(spec_checks::range("experts", s.experts, 1, kMaxExperts, "moe_align"));
  MOEJIT_TRY(spec_checks::pow2("bm", s.bm, 8, 256, "moe_align"));
  MOEJIT_TRY(spec_checks::range("warps", s.warps, 1, 32, "moe_align"));
  return {};
}

std::uint32_t align_block_threads(const KernelSpec& s) { return s.warps * 32u; }

std::uint32_t align_dynamic_shared(const KernelSpec& s) {
  return static_cast<std::uint32_t>(align_shared_bytes(s.experts, s.warps));
}

Status align_check(const KernelSpec& s) {
  const auto& arch = arch_info(s.arch);
  if (std::uint32_t need = align_dynamic_shared(s); need > arch.max_shared_per_block)
    return error(Code::invalid_argument,
                 "fields 'experts' = {} and 'warps' = {}: moe_align needs (warps*experts + experts + 1)*4 = {} bytes "
                 "of shared memory, more than the {} bytes a block may use on {}; expected fewer warps",
                 s.experts, s.warps, need, arch.max_shared_per_block, arch.name);
  return {};
}

std::vector<SpecConstant> align_constants(const KernelSpec& s) {
  return {{"int", "experts", std::to_string(s.experts)},
          {"int", "block_size", std::to_string(s.bm)},
          {"int", "warps", std::to_string(s.warps)}};
}

}  // namespace

const KernelDef kMoeAlignKernel = {
    .entry = "moe/align.cuh",
    .kernel = "moejit::kernels::moe_align_kernel",
    .params_type = "moejit::MoeAlignParams",
    .validate_fields = align_fields,
    .check = align_check,
    .constants = align_constants,
    .block_threads = align_block_threads,
    .dynamic_shared_bytes = align_dynamic_shared,
};

std::uint16_t moe_align_warps(std::uint32_t experts, Arch arch) {
  for (std::uint16_t w = 16; w > 1; w /= 2)
    if (align_shared_bytes(experts, w) <= arch_info(arch).max_shared_per_block) return w;
  return 1;
}

}  // namespace moejit
