// C ABI: the fused MoE layer.

#include "api/api_support.hpp"
#include "dispatch/fused_moe_op.hpp"

using namespace moejit;

namespace {

Result<dispatch::FusedMoeRequest> fused_request(const moejit_fused_moe_args_t* a, api::PackedUse use) {
  MOEJIT_TRY(api::check_struct(a, a ? a->struct_size : 0, MOEJIT_STRUCT_FIRST_SIZE(moejit_fused_moe_args_t, act_scale),
                               "args"));
  dispatch::FusedMoeRequest r;
  MOEJIT_ASSIGN_OR_RETURN(r.w13, api::packed_view(a->w13, "args->w13", use));
  MOEJIT_ASSIGN_OR_RETURN(r.w2, api::packed_view(a->w2, "args->w2", use));
  MOEJIT_ASSIGN_OR_RETURN(r.act, api::dtype_of(a->act_dtype, "args->act_dtype"));
  MOEJIT_ASSIGN_OR_RETURN(r.out, api::dtype_of(a->out_dtype, "args->out_dtype"));
  MOEJIT_ASSIGN_OR_RETURN(r.activation, api::epilogue_of(a->activation, "args->activation"));
  r.tokens = a->tokens;
  r.topk = a->topk;
  r.global_experts = a->global_experts;
  r.hidden = a->hidden;
  r.topk_ids = a->topk_ids;
  r.topk_weights = a->topk_weights;
  r.expert_map = a->expert_map;
  r.output = a->output;
  r.workspace = a->workspace;
  r.workspace_bytes = a->workspace_bytes;
  r.max_tokens = a->max_tokens;
  if (MOEJIT_STRUCT_HAS(a, hidden_scale_ld)) {
    MOEJIT_ASSIGN_OR_RETURN(r.act_scale, api::act_scale_of(a->act_scale, "args->act_scale"));
    r.hidden_scales = a->hidden_scales;
    r.hidden_scale_ld = a->hidden_scale_ld;
  }
  if (MOEJIT_STRUCT_HAS(a, hidden_scale_k_stride)) r.hidden_scale_k_stride = a->hidden_scale_k_stride;
  return r;
}

}  // namespace

extern "C" {

void moejit_fused_moe_args_init(moejit_fused_moe_args_t* args) {
  if (args == nullptr) return;
  *args = moejit_fused_moe_args_t{};
  args->struct_size = sizeof(moejit_fused_moe_args_t);
  args->act_dtype = MOEJIT_DTYPE_BF16;
  args->out_dtype = MOEJIT_DTYPE_BF16;
  args->activation = MOEJIT_EPILOGUE_SILU_AND_MUL;
}

moejit_status_t moejit_fused_moe_workspace_size(moejit_context_t context, const moejit_fused_moe_args_t* args,
                                                uint64_t* bytes) {
  return api::guarded([&]() -> Status {
    MOEJIT_TRY(api::check_context(context));
    if (bytes == nullptr) return error(Code::invalid_argument, "argument 'bytes' is null: expected where to store the size");
    MOEJIT_ASSIGN_OR_RETURN(dispatch::FusedMoeRequest r, fused_request(args, api::PackedUse::shape_only));
    MOEJIT_ASSIGN_OR_RETURN(Launcher * launcher, context->require_launcher());
    MOEJIT_ASSIGN_OR_RETURN(*bytes, dispatch::fused_moe_workspace(r, launcher->arch(), launcher->sm_count()));
    return {};
  });
}

moejit_status_t moejit_fused_moe(moejit_context_t context, const moejit_fused_moe_args_t* args, void* stream) {
  return api::guarded([&]() -> Status {
    MOEJIT_TRY(api::check_context(context));
    MOEJIT_ASSIGN_OR_RETURN(dispatch::FusedMoeRequest r, fused_request(args, api::PackedUse::launch));
    MOEJIT_ASSIGN_OR_RETURN(Launcher * launcher, context->require_launcher());
    dispatch::OpContext ops = context->op_context(*launcher);
    return dispatch::run_fused_moe(ops, r, stream);
  });
}

}  // extern "C"
