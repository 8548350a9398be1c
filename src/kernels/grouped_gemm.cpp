#include "kernels/grouped_gemm.hpp"

#include <algorithm>

#include "kernels/spec_checks.hpp"
#include "moe/align_params.cuh"
#include "spec/act_scale_rule.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"

namespace moejit {
namespace {

constexpr std::string_view kOp = "grouped_gemm";


Status gemm_fields(const KernelSpec& s) {
  const bool mxfp4 = s.weight == WeightFormat::mxfp4;
  MOEJIT_TRY(spec_checks::one_of("weight", to_string(s.weight), s.weight != WeightFormat::none,
                                 "mxfp4, int4_sym or int4_asym"));
  MOEJIT_TRY(spec_checks::one_of("scale", to_string(s.scale),
                                 mxfp4 ? s.scale == DType::e8m0 : (s.scale == DType::bf16 || s.scale == DType::f16),
                                 mxfp4 ? "e8m0" : "bf16 or f16", mxfp4 ? "(MXFP4 scales are E8M0)" : "(INT4 scales)"));
  MOEJIT_TRY(spec_checks::one_of("act", to_string(s.act),
                                 s.act == DType::bf16 || s.act == DType::f16 || s.act == DType::e4m3 ||
                                     s.act == DType::e2m1,
                                 "bf16, f16, e4m3 or e2m1"));
  if (s.act == DType::e2m1) {
    MOEJIT_TRY(spec_checks::one_of("act_scale", to_string(s.act_scale), act_scale_fits(s.act, s.act_scale),
                                   act_scales_for(s.act), "(e2m1 activations come with E8M0 scales per 32 k)"));
    if (!mxfp4)
      return error(Code::invalid_argument,
                   "field 'act' = e2m1 with weight {}: expected mxfp4 weights (the mma takes e2m1 x e2m1)",
                   to_string(s.weight));
    if (s.k % 64 != 0 || s.bk % 64 != 0)
      return error(Code::invalid_argument,
                   "field 'act' = e2m1 with k = {}, bk = {}: expected both multiples of 64 (one mma step is 64 k)", s.k,
                   s.bk);
  } else if (s.act == DType::e4m3) {
    MOEJIT_TRY(spec_checks::one_of("act_scale", to_string(s.act_scale), act_scale_fits(s.act, s.act_scale),
                                   act_scales_for(s.act), "(e4m3 activations come with f32 scales)"));
    if (s.act_scale == ActScale::block128 && s.k % 128 != 0)
      return error(Code::invalid_argument,
                   "field 'act_scale' = block128 with k = {}: expected k a multiple of 128 (one scale per 128 k)", s.k);
  } else if (!act_scale_fits(s.act, s.act_scale)) {
    return error(Code::invalid_argument,
                 "field 'act_scale' = {}: expected none for {} activations (only e4m3 and e2m1 ones are scaled)",
                 to_string(s.act_scale), to_string(s.act));
  }
  MOEJIT_TRY(spec_checks::one_of("out", to_string(s.out),
                                 s.out == DType::bf16 || s.out == DType::f16 || s.out == DType::f32,
                                 "bf16, f16 or f32"));
  MOEJIT_TRY(spec_checks::one_of("layout", to_string(s.layout), s.layout != Layout::none,
                                 "indexed, contiguous or masked"));
  MOEJIT_TRY(spec_checks::one_of("epilogue", to_string(s.epilogue),
                                 s.epilogue != Epilogue::topk_weight || s.layout == Layout::indexed,
                                 "none, silu_and_mul or swiglu_oai", "(topk_weight needs the indexed layout)"));
  if (s.n < 32 || s.n % 32 != 0)
    return error(Code::invalid_argument, "field 'n' = {}: expected a positive multiple of 32 (the packed weight tile)", s.n);
  if (s.k < 32 || s.k % 32 != 0)
    return error(Code::invalid_argument, "field 'k' = {}: expected a positive multiple of 32 (the packed weight tile)", s.k);
  // The packed layout's bounds (quant/pack.hpp): the kernel computes expert and row offsets in
  // 64 bits, its offsets within a strip of one expert in 32 (at most 8 x K x 16 bytes), and these
  // keep every size far from either limit (real models are far below).
  if (s.n > kMaxPackedExtent)
    return error(Code::invalid_argument, "field 'n' = {}: expected at most {}", s.n, kMaxPackedExtent);
  if (s.k > kMaxPackedExtent)
    return error(Code::invalid_argument, "field 'k' = {}: expected at most {}", s.k, kMaxPackedExtent);
  if (static_cast<std::uint64_t>(s.n) * s.k / 2 > kMaxExpertPackedBytes)
    return error(Code::invalid_argument,
                 "fields 'n' = {} and 'k' = {}: one expert's packed weights would be {} bytes; expected at "
                 "most {} (moejit's bound on one expert)",
                 s.n, s.k, static_cast<std::uint64_t>(s.n) * s.k / 2, kMaxExpertPackedBytes);
  if (mxfp4 && s.group_size != 32)
    return error(Code::invalid_argument, "field 'group_size' = {}: expected 32 for mxfp4 (one E8M0 scale per 32 k)",
                 s.group_size);
  if (!mxfp4) {
    const bool size_ok = s.group_size == 32 || s.group_size == 64 || s.group_size == 128 || s.group_size == s.k;
    if (!size_ok)
      return error(Code::invalid_argument, "field 'group_size' = {}: expected 32, 64, 128, or k = {} (per-channel)",
                   s.group_size, s.k);
    if (s.k % s.group_size != 0)
      return error(Code::invalid_argument, "field 'group_size' = {}: does not divide k = {}", s.group_size, s.k);
  }
  MOEJIT_TRY(spec_checks::range("experts", s.experts, 1, kMaxExperts, kOp));
  MOEJIT_TRY(spec_checks::pow2("bm", s.bm, 16, 128, kOp));
  MOEJIT_TRY(spec_checks::pow2("bn", s.bn, 32, 256, kOp));
  MOEJIT_TRY(spec_checks::pow2("bk", s.bk, 32, 256, kOp));
  if (s.k % s.bk != 0)
    return error(Code::invalid_argument,
                 "field 'bk' = {}: does not divide k = {}; expected a bk that does (the k loop runs whole stages)", s.bk,
                 s.k);
  MOEJIT_TRY(spec_checks::range("stages", s.stages, 2, 6, kOp));
  MOEJIT_TRY(spec_checks::pow2("warps", s.warps, 1, 8, kOp));
  MOEJIT_TRY(spec_checks::range("split_k", s.split_k, 1, 64, kOp));
  if (s.split_k > s.k / s.bk)
    return error(Code::invalid_argument,
                 "field 'split_k' = {}: expected at most k / bk = {} splits (splits are whole stages)", s.split_k,
                 s.k / s.bk);
  return {};
}

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
  const bool wgmma = gemm_uses_wgmma(s);
  return gemm_shared_bytes(s.bm, s.bn, s.bk, s.stages, s.group_size, scale_bytes(s),
                           s.weight == WeightFormat::int4_asym, gemm_act_bits(s.act), wgmma,
                           gemm_stages_row_scales(wgmma, s.act, s.act_scale));
}

std::uint32_t gemm_block_threads(const KernelSpec& s) { return s.warps * 32u; }

Status gemm_check(const KernelSpec& s) {
  if (warps_along_m(s) == 0)
    return error(Code::invalid_argument,
                 "fields 'warps' = {}, 'bm' = {}, 'bn' = {}: no split of the warps gives each warp a multiple of 16 "
                 "rows and of 32 columns; expected bn >= 32 * warps / (bm / 16)",
                 s.warps, s.bm, s.bn);
  // Every thread copies the same number of 16-byte weight chunks per stage at offsets that
  // split into a per-thread and a compile-time part (templates/gemm/grouped_gemm.cuh).
  const std::uint32_t threads = gemm_block_threads(s), b_chunks = s.bn * s.bk / 32u;
  if ((b_chunks % threads != 0 && b_chunks > threads) || (threads % s.bk != 0 && s.bk % threads != 0))
    return error(Code::invalid_argument,
                 "tile bn={} bk={} warps={}: the {} weight chunks of a stage do not split evenly over {} threads "
                 "(expected bn * bk / 32 a multiple of the threads or fewer, and threads and bk multiples of one "
                 "another)",
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
                 "tile bm={} bn={} bk={} stages={}: needs {} bytes of shared memory, more than the {} a block may use "
                 "on {}; expected fewer stages or a smaller tile",
                 s.bm, s.bn, s.bk, s.stages, need, arch.max_shared_per_block, arch.name);
  if (s.act == DType::e4m3 && arch.sm < 89)
    return error(Code::unsupported, "field 'act' = e4m3 needs sm_89 or newer, not {}", arch.name);
  if (s.act == DType::e2m1 && !has_block_scale_mma(s.arch))
    return error(Code::unsupported,
                 "field 'act' = e2m1 needs the block-scaled mma of sm_120a or sm_121a, not {} (use e4m3 activations "
                 "there)",
                 arch.name);
  return {};
}

std::vector<SpecConstant> gemm_constants(const KernelSpec& s) {
  auto n = [](auto v) { return std::to_string(static_cast<std::uint64_t>(v)); };
  return {{"int", "weight", n(s.weight)},        {"int", "scale", n(s.scale)},
          {"int", "act", n(s.act)},              {"int", "act_scale", n(s.act_scale)},
          {"int", "out", n(s.out)},
          {"int", "layout", n(s.layout)},        {"int", "epilogue", n(s.epilogue)},
          {"unsigned", "n", n(s.n)},             {"unsigned", "k", n(s.k)},
          {"unsigned", "experts", n(s.experts)}, {"unsigned", "group", n(s.group_size)},
          {"unsigned", "bm", n(s.bm)},           {"unsigned", "bn", n(s.bn)},
          {"unsigned", "bk", n(s.bk)},           {"unsigned", "stages", n(s.stages)},
          {"unsigned", "warps", n(s.warps)},     {"unsigned", "warps_m", n(warps_along_m(s))},
          {"unsigned", "split_k", n(s.split_k)}, {"int", "pinned_m", n(s.m)},
          {"unsigned", "sm", n(arch_info(s.arch).sm)},
          {"bool", "block_scale_mma", has_block_scale_mma(s.arch) ? "true" : "false"},
          {"bool", "wgmma", gemm_uses_wgmma(s) ? "true" : "false"}};
}

bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

Status need(const void* p, const char* name, std::uintptr_t alignment, const char* why) {
  if (p == nullptr) return error(Code::invalid_argument, "argument '{}' is null: expected a pointer ({} reads it)", name, why);
  if (!aligned(p, alignment))
    return error(Code::invalid_argument, "argument '{}' = {}: expected {}-byte alignment", name, p, alignment);
  return {};
}

std::uint32_t out_columns(const KernelSpec& s) {
  const bool act_and_mul = s.epilogue == Epilogue::silu_and_mul || s.epilogue == Epilogue::swiglu_oai;
  return act_and_mul ? s.n / 2 : s.n;
}

}  // namespace

std::uint32_t gemm_act_bits(DType act) { return act == DType::e2m1 ? 4 : act == DType::e4m3 ? 8 : 16; }

bool gemm_uses_wgmma(Arch arch, WeightFormat weight, DType act, ActScale act_scale, std::uint32_t group,
                     std::uint32_t bm, std::uint32_t bn, std::uint32_t bk, std::uint32_t warps, std::uint32_t stages,
                     std::uint32_t split_k) {
  // INT4 scales each group's sums after its wgmma's complete: groups of 32 k would wait on
  // every tile's (templates/gemm/grouped_gemm_wgmma.cuh).
  const bool int4_groups = weight != WeightFormat::mxfp4 && group >= 64;
  // e4m3 activations: INT4 as above, or MXFP4 (its E8M0 scales folded into the e4m3 bytes, one
  // block per 32-k wgmma), scaled per token (applied in the epilogue) with 128 or 64 k per stage
  // (one row of the 128- or 64-byte swizzle), or per 128 k with 128 k per stage (applied with the
  // weights' scales at every stage, which is one such block).
  const bool act16 = (act == DType::bf16 || act == DType::f16) && (weight == WeightFormat::mxfp4 || int4_groups);
  const bool act8 = act == DType::e4m3 && (weight == WeightFormat::mxfp4 || int4_groups) &&
                    ((act_scale == ActScale::token && (bk == 128 || bk == 64)) ||
                     (act_scale == ActScale::block128 && bk == 128));
  return arch == Arch::sm_90a && (act16 || act8) && (bm == 32 || bm == 64 || bm == 128) && bn == 128 &&
         (bk == 64 || bk == 128) && warps == 8 && stages >= 3 && split_k == 1;
}

bool gemm_stages_row_scales(bool wgmma, DType act, ActScale act_scale) {
  return wgmma && act == DType::e4m3 && act_scale == ActScale::block128;
}

bool gemm_uses_wgmma(const KernelSpec& s) {
  return gemm_uses_wgmma(s.arch, s.weight, s.act, s.act_scale, s.group_size, s.bm, s.bn, s.bk, s.warps, s.stages,
                         s.split_k);
}

const KernelDef kGroupedGemmKernel = {
    .entry = "gemm/grouped_gemm.cuh",
    .kernel = "moejit::kernels::grouped_gemm_kernel",
    .params_type = "moejit::GroupedGemmParams",
    .validate_fields = gemm_fields,
    .check = gemm_check,
    .constants = gemm_constants,
    .block_threads = gemm_block_threads,
    .dynamic_shared_bytes = gemm_dynamic_shared,
};

GemmTiles grouped_gemm_tiles(const KernelSpec& s, std::int32_t m) {
  GemmTiles t;
  t.columns = (s.n + s.bn - 1) / s.bn;
  t.splits = s.split_k;
  const std::int64_t rows = std::max<std::int32_t>(m, 0);
  std::int64_t tiles = 0;
  switch (s.layout) {
    case Layout::indexed: tiles = align_max_blocks(rows, s.experts, s.bm); break;
    // Each expert's rows take ceil(rows_e / bm) tiles: at most one partial tile per non-empty expert.
    case Layout::contiguous:
      tiles = rows == 0 ? 0 : (rows + s.bm - 1) / s.bm + std::min<std::int64_t>(rows, s.experts);
      break;
    case Layout::masked: tiles = static_cast<std::int64_t>(s.experts) * ((rows + s.bm - 1) / s.bm); break;
    case Layout::none: break;
  }
  // Saturated, never wrapped: a count past 32 bits is refused by grouped_gemm_grid.
  t.rows = static_cast<std::uint32_t>(std::min<std::int64_t>(tiles, UINT32_MAX));
  return t;
}

Result<LaunchGrid> grouped_gemm_grid(const GemmTiles& t) {
  const std::uint64_t tiles = static_cast<std::uint64_t>(t.columns) * t.rows;
  if (tiles > 2147483647u)
    return error(Code::invalid_argument,
                 "grouped GEMM of {} column x {} row tiles: expected at most 2^31 - 1 tiles in one launch (fewer rows "
                 "per call)",
                 t.columns, t.rows);
  return LaunchGrid{static_cast<std::uint32_t>(tiles), 1, t.splits};
}

std::uint64_t grouped_gemm_counter_count(const KernelSpec& s, const GemmTiles& t) {
  return s.split_k > 1 ? static_cast<std::uint64_t>(t.columns) * t.rows : 0;
}

std::uint64_t grouped_gemm_partial_bytes(const KernelSpec& s, const GemmTiles& t) {
  return grouped_gemm_counter_count(s, t) * s.split_k * s.bm * s.bn * sizeof(float);
}

Status check_offset_stride(std::string_view name, std::int64_t stride, std::int64_t count, std::string_view counted) {
  constexpr std::int64_t kOffsetLimit = std::int64_t{1} << 60;
  if (count > 0 && stride > kOffsetLimit / count)
    return error(Code::invalid_argument,
                 "argument '{}' = {}: expected at most {} for {} {} (the last one's offset must stay below 2^60 "
                 "elements)",
                 name, stride, kOffsetLimit / count, count, counted);
  return {};
}

Status check_grouped_gemm_params(const KernelSpec& s, const GroupedGemmParams& p) {
  if (p.m < 0) return error(Code::invalid_argument, "argument 'm' = {}: expected >= 0", p.m);
  if (s.m != 0 && p.m != static_cast<std::int32_t>(s.m))
    return error(Code::invalid_argument, "argument 'm' = {}: the kernel was built for m = {} exactly", p.m, s.m);
  if (p.m == 0) return {};
  const bool act8 = s.act == DType::e4m3;
  const std::uint32_t row_unit = 128 / gemm_act_bits(s.act);  // elements in 16 bytes
  MOEJIT_TRY(need(p.a, "a", 16, "every GEMM"));
  if (p.lda < s.k || p.lda % row_unit != 0)
    return error(Code::invalid_argument, "argument 'lda' = {}: expected a multiple of {} {} elements (16 bytes), at least k = {}",
                 p.lda, row_unit, to_string(s.act), s.k);
  if (s.act == DType::e2m1) {
    MOEJIT_TRY(need(p.a_scales, "a_scales", 16, "e2m1 activations (their E8M0 scales)"));
    if (p.a_scale_ld < s.k / 32 || p.a_scale_ld % 16 != 0)
      return error(Code::invalid_argument,
                   "argument 'a_scale_ld' = {}: expected a multiple of 16 of at least k / 32 = {} (one E8M0 byte per 32 "
                   "k of a row, 16-byte aligned rows)",
                   p.a_scale_ld, s.k / 32);
  }
  const bool block128 = act8 && s.act_scale == ActScale::block128;
  const bool column_major = p.a_scale_k_stride > 1;
  if (!block128 && (p.a_scale_k_stride > 1 || p.a_scale_expert_skew != 0))
    return error(Code::invalid_argument,
                 "argument 'a_scale_k_stride' = {} with a_scale_expert_skew = {}: expected 0 or 1 and 0 (only "
                 "block128 scales may be stored column-major or in expert slabs; these are {} with act {})",
                 p.a_scale_k_stride, p.a_scale_expert_skew, to_string(s.act_scale), to_string(s.act));
  if (p.a_scale_k_stride < 0)
    return error(Code::invalid_argument, "argument 'a_scale_k_stride' = {}: expected >= 0 (0 or 1: row-major)",
                 p.a_scale_k_stride);
  if (p.a_scale_expert_skew != 0 && s.layout != Layout::masked)
    return error(Code::invalid_argument, "argument 'a_scale_expert_skew' = {}: expected 0 outside the masked layout",
                 p.a_scale_expert_skew);
  if (act8) {
    MOEJIT_TRY(need(p.a_scales, "a_scales", 4, "e4m3 activations"));
    if (block128 && !column_major && p.a_scale_ld < s.k / 128)
      return error(Code::invalid_argument,
                   "argument 'a_scale_ld' = {}: expected at least k / 128 = {} (one f32 scale per 128 k of a row)",
                   p.a_scale_ld, s.k / 128);
    if (block128 && column_major && p.a_scale_ld < 1)
      return error(Code::invalid_argument,
                   "argument 'a_scale_ld' = {} with a_scale_k_stride = {} (column-major scales): expected >= 1 (f32 "
                   "elements between rows)",
                   p.a_scale_ld, p.a_scale_k_stride);
  }
  MOEJIT_TRY(need(p.b, "b", 16, "every GEMM"));
  MOEJIT_TRY(need(p.b_scales, "b_scales", 16, "every GEMM"));
  if (s.weight == WeightFormat::int4_asym) MOEJIT_TRY(need(p.b_zeros, "b_zeros", 16, "int4_asym weights"));
  if (s.weight == WeightFormat::mxfp4)
    MOEJIT_TRY(need(p.b_scale_ranges, "b_scale_ranges", 4, "mxfp4 weights (the per-expert scale ranges after the scales)"));
  if (p.bias != nullptr && !aligned(p.bias, 8))
    return error(Code::invalid_argument, "argument 'bias' = {}: expected 8-byte alignment", static_cast<const void*>(p.bias));
  const std::uint32_t out_bytes = s.out == DType::f32 ? 4 : 2;
  MOEJIT_TRY(need(p.c, "c", 2 * out_bytes, "every GEMM"));
  if (p.ldc < out_columns(s) || p.ldc % 2 != 0)
    return error(Code::invalid_argument, "argument 'ldc' = {}: expected an even stride of at least {} output columns",
                 p.ldc, out_columns(s));
  if (p.weights_before_dependency > 1 || (p.weights_before_dependency != 0 && s.layout != Layout::indexed))
    return error(Code::invalid_argument,
                 "argument 'weights_before_dependency' = {}: expected 0, or 1 with the indexed layout (layout is {})",
                 p.weights_before_dependency, to_string(s.layout));
  switch (s.layout) {
    case Layout::indexed:
      MOEJIT_TRY(need(p.sorted_token_ids, "sorted_token_ids", 4, "the indexed layout"));
      MOEJIT_TRY(need(p.expert_ids, "expert_ids", 4, "the indexed layout"));
      MOEJIT_TRY(need(p.num_tokens_post_pad, "num_tokens_post_pad", 4, "the indexed layout"));
      if (p.a_row_divisor < 1)
        return error(Code::invalid_argument, "argument 'a_row_divisor' = {}: expected >= 1 (topk, or 1)",
                     p.a_row_divisor);
      break;
    case Layout::contiguous: MOEJIT_TRY(need(p.expert_offsets, "expert_offsets", 4, "the contiguous layout")); break;
    case Layout::masked: MOEJIT_TRY(need(p.expert_counts, "expert_counts", 4, "the masked layout")); break;
    case Layout::none: break;
  }
  if (s.epilogue == Epilogue::topk_weight)
    MOEJIT_TRY(need(p.topk_weights, "topk_weights", 4, "the topk_weight epilogue"));
  if (s.split_k > 1) {
    MOEJIT_TRY(need(p.workspace, "workspace", 16, "split-K"));
    MOEJIT_TRY(need(p.tile_counters, "tile_counters", 4, "split-K"));
  }
  return {};
}

}  // namespace moejit
