// C ABI: the grouped GEMM.

#include "api/api_support.hpp"
#include "dispatch/grouped_gemm_op.hpp"  // and the kernel's argument checks
#include "spec/spec_fields.hpp"

using namespace moejit;

namespace {

Result<dispatch::GroupedGemmRequest> gemm_request(const moejit_grouped_gemm_args_t* a, api::PackedUse use) {
  MOEJIT_TRY(api::check_struct(a, a ? a->struct_size : 0, MOEJIT_STRUCT_FIRST_SIZE(moejit_grouped_gemm_args_t, act_scale),
                               "args"));
  dispatch::GroupedGemmRequest r;
  MOEJIT_ASSIGN_OR_RETURN(r.weights, api::packed_view(a->weights, "args->weights", use));
  MOEJIT_ASSIGN_OR_RETURN(r.act, api::dtype_of(a->act_dtype, "args->act_dtype"));
  MOEJIT_ASSIGN_OR_RETURN(r.out, api::dtype_of(a->out_dtype, "args->out_dtype"));
  if (r.act != DType::bf16 && r.act != DType::f16 && r.act != DType::e4m3 && r.act != DType::e2m1)
    return error(Code::invalid_argument, "argument 'args->act_dtype' = {}: expected BF16, F16, E4M3 or E2M1",
                 to_string(r.act));
  const bool scales_given = MOEJIT_STRUCT_HAS(a, a_scale_ld);
  if (scales_given) {
    MOEJIT_ASSIGN_OR_RETURN(r.act_scale, api::act_scale_of(a->act_scale, "args->act_scale"));
  } else if (r.act == DType::e4m3 || r.act == DType::e2m1) {
    return error(Code::invalid_argument,
                 "argument 'args': struct_size = {} predates act_scale and a_scales; expected a struct from "
                 "moejit_grouped_gemm_args_init for {} activations",
                 a->struct_size, to_string(r.act));
  }
  MOEJIT_TRY(api::check_act_scale(r.act, r.act_scale, "args->act_scale"));
  if (r.act_scale != ActScale::none) {
    r.params.a_scales = a->a_scales;
    r.params.a_scale_ld = a->a_scale_ld;
  }
  MOEJIT_ASSIGN_OR_RETURN(r.layout, api::layout_of(a->layout, "args->layout"));
  if (a->m < 0) return error(Code::invalid_argument, "argument 'args->m' = {}: expected >= 0", a->m);
  // Offsets are row x stride in elements: bounded for every row the layout can address.
  const std::int64_t rows = r.layout == Layout::masked ? std::int64_t{r.weights.experts} * a->m : a->m;
  MOEJIT_TRY(check_offset_stride("args->lda", a->lda, rows, "rows of A"));
  MOEJIT_TRY(check_offset_stride("args->ldc", a->ldc, rows, "rows of C"));
  if (r.act_scale != ActScale::none)
    MOEJIT_TRY(check_offset_stride("args->a_scale_ld", a->a_scale_ld, rows, "rows of scales"));
  if (MOEJIT_STRUCT_HAS(a, a_scale_expert_stride)) {
    MOEJIT_TRY(
        check_offset_stride("args->a_scale_k_stride", a->a_scale_k_stride, r.weights.k / 128 + 1, "128-k blocks"));
    MOEJIT_TRY(
        check_offset_stride("args->a_scale_expert_stride", a->a_scale_expert_stride, r.weights.experts, "experts"));
    // Only BLOCK128 scales have a column-major or per-expert-slab layout.
    if (r.act_scale != ActScale::block128 && (a->a_scale_k_stride > 1 || a->a_scale_expert_stride != 0))
      return error(Code::invalid_argument,
                   "argument 'args->{}' = {} with act_scale {}: expected {} (only BLOCK128 scales are read column-major "
                   "or in expert slabs)",
                   a->a_scale_expert_stride != 0 ? "a_scale_expert_stride" : "a_scale_k_stride",
                   a->a_scale_expert_stride != 0 ? a->a_scale_expert_stride : a->a_scale_k_stride,
                   to_string(r.act_scale), a->a_scale_expert_stride != 0 ? "0" : "0 or 1");
    if (a->a_scale_k_stride < 0)
      return error(Code::invalid_argument, "argument 'args->a_scale_k_stride' = {}: expected >= 0 (0 or 1: row-major)",
                   a->a_scale_k_stride);
    if (a->a_scale_expert_stride < 0)
      return error(Code::invalid_argument,
                   "argument 'args->a_scale_expert_stride' = {}: expected >= 0 (0: m * a_scale_ld)", a->a_scale_expert_stride);
    if (a->a_scale_expert_stride != 0 && a->layout != MOEJIT_LAYOUT_MASKED)
      return error(Code::invalid_argument,
                   "argument 'args->a_scale_expert_stride' = {}: expected 0 outside MOEJIT_LAYOUT_MASKED",
                   a->a_scale_expert_stride);
    r.params.a_scale_k_stride = a->a_scale_k_stride;
    // The kernel adds e * skew to row (e * m + t)'s offset: skew = stride - m * a_scale_ld.
    if (a->a_scale_expert_stride != 0)
      r.params.a_scale_expert_skew = a->a_scale_expert_stride - static_cast<std::int64_t>(a->m) * a->a_scale_ld;
  }
  if (r.out != DType::bf16 && r.out != DType::f16 && r.out != DType::f32)
    return error(Code::invalid_argument, "argument 'args->out_dtype' = {}: expected BF16, F16 or F32", to_string(r.out));
  MOEJIT_ASSIGN_OR_RETURN(r.epilogue, api::epilogue_of(a->epilogue, "args->epilogue"));
  if (a->block_size < 0) return error(Code::invalid_argument, "argument 'args->block_size' = {}: expected >= 0", a->block_size);
  r.block_size = static_cast<std::uint32_t>(a->block_size);
  r.rows_per_expert_hint = a->rows_per_expert_hint;
  r.workspace = a->workspace;
  r.workspace_bytes = a->workspace_bytes;
  GroupedGemmParams& p = r.params;
  p.m = a->m;
  p.a = a->a;
  p.lda = a->lda;
  p.c = a->c;
  p.ldc = a->ldc;
  p.sorted_token_ids = a->sorted_token_ids;
  p.expert_ids = a->expert_ids;
  p.num_tokens_post_pad = a->num_tokens_post_pad;
  p.a_row_divisor = a->a_row_divisor;
  p.expert_offsets = a->expert_offsets;
  p.expert_counts = a->expert_counts;
  p.topk_weights = a->topk_weights;
  return r;
}

}  // namespace

extern "C" {

void moejit_grouped_gemm_args_init(moejit_grouped_gemm_args_t* args) {
  if (args == nullptr) return;
  *args = moejit_grouped_gemm_args_t{};
  args->struct_size = sizeof(moejit_grouped_gemm_args_t);
  args->act_dtype = MOEJIT_DTYPE_BF16;
  args->out_dtype = MOEJIT_DTYPE_BF16;
  args->layout = MOEJIT_LAYOUT_INDEXED;
  args->a_row_divisor = 1;
}

moejit_status_t moejit_grouped_gemm_workspace_size(moejit_context_t context, const moejit_grouped_gemm_args_t* args,
                                                   uint64_t* bytes) {
  return api::guarded([&]() -> Status {
    MOEJIT_TRY(api::check_context(context));
    if (bytes == nullptr) return error(Code::invalid_argument, "argument 'bytes' is null: expected where to store the size");
    MOEJIT_ASSIGN_OR_RETURN(dispatch::GroupedGemmRequest r, gemm_request(args, api::PackedUse::shape_only));
    MOEJIT_ASSIGN_OR_RETURN(Launcher * launcher, context->require_launcher());
    MOEJIT_ASSIGN_OR_RETURN(*bytes, dispatch::grouped_gemm_workspace(r, launcher->arch(), launcher->backend(), launcher->sm_count()));
    return {};
  });
}

moejit_status_t moejit_grouped_gemm(moejit_context_t context, const moejit_grouped_gemm_args_t* args, void* stream) {
  return api::guarded([&]() -> Status {
    MOEJIT_TRY(api::check_context(context));
    MOEJIT_ASSIGN_OR_RETURN(dispatch::GroupedGemmRequest r, gemm_request(args, api::PackedUse::launch));
    MOEJIT_ASSIGN_OR_RETURN(Launcher * launcher, context->require_launcher());
    dispatch::OpContext ops = context->op_context(*launcher);
    return dispatch::run_grouped_gemm(ops, r, stream);
  });
}

}  // extern "C"
