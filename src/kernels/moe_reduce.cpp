#include "kernels/moe_reduce.hpp"

#include <algorithm>

#include "kernels/spec_checks.hpp"
#include "moe/reduce_params.cuh"
#include "spec/spec_fields.hpp"

namespace moejit {
namespace {

using namespace std::string_view_literals;

Status reduce_fields(const KernelSpec& s) {
  MOEJIT_TRY(spec_checks::unused_zero(s, {"op"sv, "arch"sv, "backend"sv, "act"sv, "out"sv, "n"sv, "warps"sv}));
  auto float_type = [](DType d) { return d == DType::bf16 || d == DType::f16 || d == DType::f32; };
  MOEJIT_TRY(spec_checks::one_of("act", to_string(s.act), float_type(s.act), "bf16, f16 or f32", "(the pair outputs)"));
  MOEJIT_TRY(spec_checks::one_of("out", to_string(s.out), float_type(s.out), "bf16, f16 or f32"));
  if (s.n < 8 || s.n % 8 != 0)
    return error(Code::invalid_argument, "field 'n' = {}: expected a positive multiple of 8 (one 16-byte vector per thread)",
                 s.n);
  return spec_checks::range("warps", s.warps, 1, 32, "moe_reduce");
}

std::vector<SpecConstant> reduce_constants(const KernelSpec& s) {
  return {{"int", "act", std::to_string(static_cast<int>(s.act))},
          {"int", "out", std::to_string(static_cast<int>(s.out))},
          {"unsigned", "n", std::to_string(s.n)},
          {"unsigned", "warps", std::to_string(s.warps)}};
}

}  // namespace

const KernelDef kMoeReduceKernel = {
    .entry = "moe/reduce.cuh",
    .kernel = "moejit::kernels::moe_reduce_kernel",
    .params_type = "moejit::MoeReduceParams",
    .validate_fields = reduce_fields,
    .check = [](const KernelSpec&) { return Status{}; },
    .constants = reduce_constants,
    .block_threads = [](const KernelSpec& s) { return s.warps * 32u; },
    .dynamic_shared_bytes = [](const KernelSpec&) { return 0u; },
};

LaunchGrid moe_reduce_grid(const KernelSpec& s, std::int32_t tokens) {
  const std::uint32_t per_block = s.warps * 32u * kReduceVector;
  LaunchGrid g;
  g.x = static_cast<std::uint32_t>(std::max(tokens, 0));
  g.y = (s.n + per_block - 1) / per_block;
  return g;
}

}  // namespace moejit
