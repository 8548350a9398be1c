#include "dispatch/grouped_gemm_launch.hpp"

#include <algorithm>

#include "moe/align_params.cuh"
#include "spec/spec_fields.hpp"

namespace moejit::dispatch {
namespace {

bool aligned(const void* p, std::uintptr_t bytes) { return reinterpret_cast<std::uintptr_t>(p) % bytes == 0; }

Status need(const void* p, const char* name, std::uintptr_t alignment, const char* why) {
  if (p == nullptr) return error(Code::invalid_argument, "argument '{}' is null; {} needs it", name, why);
  if (!aligned(p, alignment))
    return error(Code::invalid_argument, "argument '{}' = {}: expected {}-byte alignment", name, p, alignment);
  return {};
}

std::uint32_t out_columns(const KernelSpec& s) {
  const bool act_and_mul = s.epilogue == Epilogue::silu_and_mul || s.epilogue == Epilogue::swiglu_oai;
  return act_and_mul ? s.n / 2 : s.n;
}

}  // namespace

LaunchShape grouped_gemm_launch_shape(const KernelSpec& s, std::int32_t m) {
  LaunchShape shape;
  shape.block_threads = s.warps * 32u;
  shape.dynamic_shared_bytes = gemm_shared_bytes(s.bm, s.bn, s.bk, s.stages, s.group_size,
                                                 s.scale == DType::e8m0 ? 1 : 2,
                                                 s.weight == WeightFormat::int4_asym);
  shape.grid[0] = (s.n + s.bn - 1) / s.bn;
  shape.grid[2] = s.split_k;
  const std::int64_t rows = std::max<std::int32_t>(m, 0);
  std::int64_t tiles = 0;
  switch (s.layout) {
    case Layout::indexed: tiles = align_max_blocks(rows, s.experts, s.bm); break;
    // Each expert's rows take ceil(rows_e / bm) tiles: at most one partial tile per non-empty expert.
    case Layout::contiguous: tiles = rows == 0 ? 0 : (rows + s.bm - 1) / s.bm + std::min<std::int64_t>(rows, s.experts); break;
    case Layout::masked: tiles = static_cast<std::int64_t>(s.experts) * ((rows + s.bm - 1) / s.bm); break;
    case Layout::none: break;
  }
  shape.grid[1] = static_cast<std::uint32_t>(tiles);
  return shape;
}

Result<LaunchDims> grouped_gemm_launch_dims(const LaunchShape& shape) {
  const std::uint64_t tiles = static_cast<std::uint64_t>(shape.grid[0]) * shape.grid[1];
  if (tiles > 2147483647u)
    return error(Code::invalid_argument,
                 "grouped GEMM of {} column x {} row tiles: expected at most 2^31 - 1 tiles in one launch (fewer rows "
                 "per call)",
                 shape.grid[0], shape.grid[1]);
  LaunchDims d;
  d.grid[0] = static_cast<std::uint32_t>(tiles);
  d.grid[1] = 1;
  d.grid[2] = shape.grid[2];
  d.block[0] = shape.block_threads;
  d.dynamic_shared_bytes = shape.dynamic_shared_bytes;
  return d;
}

std::uint64_t grouped_gemm_counter_count(const KernelSpec& s, const LaunchShape& shape) {
  return s.split_k > 1 ? static_cast<std::uint64_t>(shape.grid[0]) * shape.grid[1] : 0;
}

std::uint64_t grouped_gemm_workspace_bytes(const KernelSpec& s, const LaunchShape& shape) {
  return grouped_gemm_counter_count(s, shape) * s.bm * s.bn * sizeof(float);
}

Status check_grouped_gemm_params(const KernelSpec& s, const GroupedGemmParams& p) {
  if (p.m < 0) return error(Code::invalid_argument, "argument 'm' = {}: expected >= 0", p.m);
  if (s.m != 0 && p.m != static_cast<std::int32_t>(s.m))
    return error(Code::invalid_argument, "argument 'm' = {}: the kernel was built for m = {} exactly", p.m, s.m);
  if (p.m == 0) return {};
  const char* act = s.act == DType::f16 ? "f16" : "bf16";
  MOEJIT_TRY(need(p.a, "a", 16, "every GEMM"));
  if (p.lda < s.k || p.lda % 8 != 0)
    return error(Code::invalid_argument, "argument 'lda' = {}: expected a multiple of 8 {} elements, at least k = {}",
                 p.lda, act, s.k);
  MOEJIT_TRY(need(p.b, "b", 16, "every GEMM"));
  MOEJIT_TRY(need(p.b_scales, "b_scales", 16, "every GEMM"));
  if (s.weight == WeightFormat::int4_asym) MOEJIT_TRY(need(p.b_zeros, "b_zeros", 16, "int4_asym weights"));
  if (s.weight == WeightFormat::mxfp4)
    MOEJIT_TRY(need(p.b_scale_ranges, "b_scale_ranges", 4, "mxfp4 weights (the per-expert scale ranges after the scales)"));
  if (p.bias != nullptr && !aligned(p.bias, 8))
    return error(Code::invalid_argument, "argument 'bias': expected 8-byte alignment");
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
        return error(Code::invalid_argument, "argument 'a_row_divisor' = {}: expected >= 1 (topk, or 1)", p.a_row_divisor);
      break;
    case Layout::contiguous: MOEJIT_TRY(need(p.expert_offsets, "expert_offsets", 4, "the contiguous layout")); break;
    case Layout::masked: MOEJIT_TRY(need(p.expert_counts, "expert_counts", 4, "the masked layout")); break;
    case Layout::none: break;
  }
  if (s.epilogue == Epilogue::topk_weight) MOEJIT_TRY(need(p.topk_weights, "topk_weights", 4, "the topk_weight epilogue"));
  if (s.split_k > 1) {
    MOEJIT_TRY(need(p.workspace, "workspace", 16, "split-K"));
    MOEJIT_TRY(need(p.tile_counters, "tile_counters", 4, "split-K"));
  }
  return {};
}

}  // namespace moejit::dispatch
