// Recipe for the grouped GEMM kernel (templates/gemm/grouped_gemm.cuh).

#include <fmt/format.h>

#include "codegen/recipe.hpp"
#include "gemm/grouped_gemm_params.cuh"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"

namespace moejit::codegen {
namespace {

// The template numbers its choices like KernelSpec's enums; keep them in step.
static_assert(gemm_enum::mxfp4 == static_cast<int>(WeightFormat::mxfp4));
static_assert(gemm_enum::int4_sym == static_cast<int>(WeightFormat::int4_sym));
static_assert(gemm_enum::int4_asym == static_cast<int>(WeightFormat::int4_asym));
static_assert(gemm_enum::bf16 == static_cast<int>(DType::bf16) && gemm_enum::f16 == static_cast<int>(DType::f16) &&
              gemm_enum::f32 == static_cast<int>(DType::f32) && gemm_enum::e4m3 == static_cast<int>(DType::e4m3) &&
              gemm_enum::e8m0 == static_cast<int>(DType::e8m0));
static_assert(gemm_enum::indexed == static_cast<int>(Layout::indexed) &&
              gemm_enum::contiguous == static_cast<int>(Layout::contiguous) &&
              gemm_enum::masked == static_cast<int>(Layout::masked));
static_assert(gemm_enum::none == static_cast<int>(Epilogue::none) &&
              gemm_enum::silu_and_mul == static_cast<int>(Epilogue::silu_and_mul) &&
              gemm_enum::swiglu_oai == static_cast<int>(Epilogue::swiglu_oai) &&
              gemm_enum::topk_weight == static_cast<int>(Epilogue::topk_weight));

// Warps along M: the fewest that leave each warp whole n32 packed strips, so each warp's
// dequantized weights serve as many m16 rows as possible. 0 if no split works.
std::uint32_t warps_along_m(const KernelSpec& s) {
  for (std::uint32_t wm = 1; wm <= s.warps; wm *= 2) {
    if (s.warps % wm != 0) continue;
    const std::uint32_t wn = s.warps / wm;
    if (s.bm % (16 * wm) == 0 && s.bn % (32 * wn) == 0) return wm;
  }
  return 0;
}

std::uint32_t scale_bytes(const KernelSpec& s) { return s.scale == DType::e8m0 ? 1 : 2; }

std::uint32_t gemm_dynamic_shared(const KernelSpec& s) {
  return gemm_shared_bytes(s.bm, s.bn, s.bk, s.stages, s.group_size, scale_bytes(s),
                           s.weight == WeightFormat::int4_asym);
}

std::uint32_t gemm_block_threads(const KernelSpec& s) { return s.warps * 32u; }

Status gemm_check(const KernelSpec& s) {
  if (warps_along_m(s) == 0)
    return error(Code::invalid_argument,
                 "fields 'warps' = {}, 'bm' = {}, 'bn' = {}: no split of the warps gives each warp a "
                 "multiple of 16 rows and of 32 columns; expected bn >= 32 * warps / (bm / 16)",
                 s.warps, s.bm, s.bn);
  // Every thread copies the same number of 16-byte weight chunks per stage at offsets that
  // split into a per-thread and a compile-time part (templates/gemm/grouped_gemm.cuh).
  const std::uint32_t threads = gemm_block_threads(s), b_chunks = s.bn * s.bk / 32u;
  if ((b_chunks % threads != 0 && b_chunks > threads) || (threads % s.bk != 0 && s.bk % threads != 0))
    return error(Code::invalid_argument,
                 "tile bn={} bk={} warps={}: the {} weight chunks of a stage do not split evenly over {} threads "
                 "(expected bn * bk / 32 a multiple of the threads or fewer, and threads and bk multiples of one another)",
                 s.bn, s.bk, s.warps, b_chunks, threads);
  const std::uint32_t scale_chunks = gemm_scale_rows(s.bk, s.group_size) * s.bn * scale_bytes(s) / 16u;
  if (scale_chunks > threads)
    return error(Code::invalid_argument,
                 "tile bn={} bk={} warps={}: a stage's {} scale chunks exceed the {} threads that copy them; expected "
                 "more warps or a smaller tile",
                 s.bn, s.bk, s.warps, scale_chunks, threads);
  const auto& arch = arch_info(s.arch);
  if (std::uint32_t need = gemm_dynamic_shared(s); need > arch.max_shared_per_block)
    return error(Code::invalid_argument,
                 "tile bm={} bn={} bk={} stages={}: needs {} bytes of shared memory, more than the {} a "
                 "block may use on {}; expected fewer stages or a smaller tile",
                 s.bm, s.bn, s.bk, s.stages, need, arch.max_shared_per_block, arch.name);
  if (s.act == DType::e4m3 && arch.sm < 89)
    return error(Code::unsupported, "field 'act' = e4m3 needs sm_89 or newer, not {}", arch.name);
  return {};
}

std::vector<SpecConstant> gemm_constants(const KernelSpec& s) {
  auto n = [](auto v) { return std::to_string(static_cast<std::uint64_t>(v)); };
  return {{"int", "weight", n(s.weight)},        {"int", "scale", n(s.scale)},
          {"int", "act", n(s.act)},              {"int", "out", n(s.out)},
          {"int", "layout", n(s.layout)},        {"int", "epilogue", n(s.epilogue)},
          {"unsigned", "n", n(s.n)},             {"unsigned", "k", n(s.k)},
          {"unsigned", "experts", n(s.experts)}, {"unsigned", "group", n(s.group_size)},
          {"unsigned", "bm", n(s.bm)},           {"unsigned", "bn", n(s.bn)},
          {"unsigned", "bk", n(s.bk)},           {"unsigned", "stages", n(s.stages)},
          {"unsigned", "warps", n(s.warps)},     {"unsigned", "warps_m", n(warps_along_m(s))},
          {"unsigned", "split_k", n(s.split_k)}, {"int", "pinned_m", n(s.m)}};
}

}  // namespace

const KernelRecipe kGroupedGemmRecipe = {
    .entry = "gemm/grouped_gemm.cuh",
    .kernel = "moejit::kernels::grouped_gemm_kernel",
    .params_type = "moejit::GroupedGemmParams",
    .check = gemm_check,
    .constants = gemm_constants,
    .block_threads = gemm_block_threads,
    .dynamic_shared_bytes = gemm_dynamic_shared,
};

}  // namespace moejit::codegen
