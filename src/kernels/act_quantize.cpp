#include "kernels/act_quantize.hpp"

#include <algorithm>

#include "kernels/spec_checks.hpp"
#include "spec/spec_fields.hpp"

namespace moejit {
namespace {

using namespace std::string_view_literals;

// Each thread keeps at most this many 8-column vectors of its row in registers.
constexpr std::uint32_t kMaxVectorsPerThread = 8;
constexpr std::uint32_t kColumnsPerWarp = 32 * 8 * kMaxVectorsPerThread;
static_assert(kActQuantizeMaxColumns == 32 * kColumnsPerWarp, "the longest row is 32 warps' columns");

Status quantize_fields(const KernelSpec& s) {
  MOEJIT_TRY(spec_checks::unused_zero(s, {"op"sv, "arch"sv, "backend"sv, "act"sv, "out"sv, "act_scale"sv, "n"sv,
                                          "warps"sv}));
  MOEJIT_TRY(spec_checks::one_of("act", to_string(s.act), s.act == DType::bf16 || s.act == DType::f16, "bf16 or f16",
                                 "(the rows to quantize)"));
  MOEJIT_TRY(spec_checks::one_of("out", to_string(s.out), s.out == DType::e4m3 || s.out == DType::e2m1, "e4m3 or e2m1"));
  if (s.out == DType::e2m1)
    MOEJIT_TRY(spec_checks::one_of("act_scale", to_string(s.act_scale), s.act_scale == ActScale::block32, "block32",
                                   "(e2m1 takes E8M0 scales per 32)"));
  else
    MOEJIT_TRY(spec_checks::one_of("act_scale", to_string(s.act_scale),
                                   s.act_scale == ActScale::token || s.act_scale == ActScale::block128, "token or block128",
                                   "(e4m3 takes f32 scales)"));
  MOEJIT_TRY(spec_checks::range("warps", s.warps, 1, 32, "act_quantize"));
  if (s.n < 8 || s.n % 8 != 0 || s.n > s.warps * kColumnsPerWarp)
    return error(Code::invalid_argument,
                 "field 'n' = {}: expected a positive multiple of 8 (16-byte vectors) of at most warps x {} = {}", s.n,
                 kColumnsPerWarp, s.warps * kColumnsPerWarp);
  if (s.act_scale == ActScale::block128 && s.n % 128 != 0)
    return error(Code::invalid_argument, "field 'n' = {}: expected a multiple of 128 with act_scale block128", s.n);
  if (s.act_scale == ActScale::block32 && s.n % 32 != 0)
    return error(Code::invalid_argument, "field 'n' = {}: expected a multiple of 32 with act_scale block32", s.n);
  return {};
}

std::vector<SpecConstant> quantize_constants(const KernelSpec& s) {
  return {{"int", "act", std::to_string(static_cast<int>(s.act))},
          {"int", "act_scale", std::to_string(static_cast<int>(s.act_scale))},
          {"unsigned", "n", std::to_string(s.n)},
          {"unsigned", "warps", std::to_string(s.warps)}};
}

}  // namespace

const KernelDef kActQuantizeKernel = {
    .entry = "moe/quantize.cuh",
    .kernel = "moejit::kernels::act_quantize_kernel",
    .params_type = "moejit::ActQuantizeParams",
    .validate_fields = quantize_fields,
    .check = [](const KernelSpec&) { return Status{}; },
    .constants = quantize_constants,
    .block_threads = [](const KernelSpec& s) { return s.warps * 32u; },
    // token scales: one f32 per warp for the row's maximum.
    .dynamic_shared_bytes = [](const KernelSpec& s) { return s.act_scale == ActScale::token ? s.warps * 4u : 0u; },
};

KernelSpec act_quantize_spec(DType act, ActScale act_scale, std::uint32_t n, Arch arch, Backend backend) {
  KernelSpec s{};
  s.op = Op::act_quantize;
  s.arch = arch;
  s.backend = backend;
  s.act = act;
  s.out = act_scale == ActScale::block32 ? DType::e2m1 : DType::e4m3;  // MX blocks: MXFP4
  s.act_scale = act_scale;
  s.n = n;
  // The fewest warps (a power of two, at least 4 for latency) that keep the row in registers.
  std::uint16_t warps = 4;
  while (warps < 32 && n > warps * kColumnsPerWarp) warps *= 2;
  s.warps = warps;
  return s;
}

LaunchGrid act_quantize_grid(std::int32_t rows) {
  LaunchGrid g;
  g.x = static_cast<std::uint32_t>(std::max(rows, 0));
  return g;
}

}  // namespace moejit
