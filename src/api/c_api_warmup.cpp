// C ABI: warm-up.

#include <future>
#include <vector>

#include "api/api_support.hpp"
#include "dispatch/hf_config.hpp"
#include "dispatch/model_specs.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"
#include "spec/spec_json.hpp"
#include "support/log.hpp"

using namespace moejit;

namespace {

Result<dispatch::ModelDesc> model_of(const moejit_model_desc_t* m) {
  MOEJIT_TRY(api::check_struct(m, m ? m->struct_size : 0, MOEJIT_STRUCT_FIRST_SIZE(moejit_model_desc_t, act_scale),
                               "model"));
  if (m->format < MOEJIT_WEIGHT_MXFP4 || m->format > MOEJIT_WEIGHT_INT4_ASYM)
    return error(Code::invalid_argument, "argument 'model->format' = {}: expected a moejit_weight_format_t",
                 static_cast<int>(m->format));
  dispatch::ModelDesc d;
  d.hidden = m->hidden;
  d.intermediate = m->intermediate;
  d.experts = m->experts;
  d.topk = m->topk;
  d.format = static_cast<WeightFormat>(m->format);
  d.group_size = m->group_size == UINT32_MAX ? 0 : m->group_size;  // GPTQ's -1: per-channel, as 0
  MOEJIT_ASSIGN_OR_RETURN(d.scale, api::dtype_of(m->scale_dtype, "model->scale_dtype"));
  MOEJIT_ASSIGN_OR_RETURN(d.act, api::dtype_of(m->act_dtype, "model->act_dtype"));
  MOEJIT_ASSIGN_OR_RETURN(d.out, api::dtype_of(m->out_dtype, "model->out_dtype"));
  MOEJIT_ASSIGN_OR_RETURN(d.activation, api::epilogue_of(m->activation, "model->activation"));
  d.tensor_parallel = m->tensor_parallel;
  d.expert_parallel = m->expert_parallel;
  d.max_tokens = m->max_tokens;
  if (MOEJIT_STRUCT_HAS(m, act_scale)) {
    MOEJIT_ASSIGN_OR_RETURN(d.act_scale, api::act_scale_of(m->act_scale, "model->act_scale"));
  }
  MOEJIT_TRY(api::check_act_scale(d.act, d.act_scale, "model->act_scale"));
  return d;
}

Result<std::vector<Arch>> archs_of(moejit_context_t context, const char* const* archs, std::uint32_t count) {
  std::vector<Arch> out;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (archs == nullptr)
      return error(Code::invalid_argument, "argument 'archs' is null: expected an array of arch_count = {} names", count);
    if (archs[i] == nullptr)
      return error(Code::invalid_argument, "argument 'archs[{}]' is null: expected a target name such as sm_90a", i);
    auto a = parse_arch(archs[i]);
    if (!a) return error(Code::invalid_argument, "argument 'archs[{}]' = '{}': expected sm_80 ... sm_121a", i, archs[i]);
    // A plain name means the GPUs of that compute capability, which run the `a` form.
    out.push_back(runtime_target(*a));
  }
  if (out.empty()) {
    if (!context->launcher)
      return error(Code::invalid_argument,
                   "argument 'archs' is empty and the context has no GPU ({}); name the architectures to warm",
                   context->launcher_error.message());
    out.push_back(context->launcher->arch());
  }
  return out;
}

// Resolves `specs` (compiling in parallel), and with `load_on` loads each on that launcher;
// progress after each; the first error is returned once all have been tried.
Status resolve_all(moejit_context_t context, const std::vector<KernelSpec>& specs, Launcher* load_on,
                   moejit_progress_fn progress, void* progress_user_data) {
  std::vector<std::future<Result<Resolution>>> pending;
  for (const KernelSpec& s : specs) pending.push_back(context->resolver->resolve_async(s));
  Status first_error;
  for (std::size_t i = 0; i < pending.size(); ++i) {
    auto r = pending[i].get();
    Status s = r.status();
    if (r.ok() && load_on != nullptr) s = load_on->prepare(*r->kernel, r->kernel->meta.dynamic_shared_bytes);
    if (!s.ok() && first_error.ok()) first_error = s;
    if (progress != nullptr) {
      const std::string what = spec_to_json(specs[i]);
      progress(progress_user_data, static_cast<std::uint32_t>(i + 1), static_cast<std::uint32_t>(pending.size()),
               what.c_str());
    }
  }
  return first_error;
}

}  // namespace

extern "C" {

void moejit_model_desc_init(moejit_model_desc_t* model) {
  if (model == nullptr) return;
  *model = moejit_model_desc_t{};
  model->struct_size = sizeof(moejit_model_desc_t);
  model->act_dtype = MOEJIT_DTYPE_BF16;
  model->out_dtype = MOEJIT_DTYPE_BF16;
  model->activation = MOEJIT_EPILOGUE_SILU_AND_MUL;
  model->tensor_parallel = 1;
  model->expert_parallel = 1;
  model->max_tokens = 8192;
}

moejit_status_t moejit_model_desc_from_hf_config(const char* config_json, size_t length, moejit_model_desc_t* model) {
  return api::guarded([&]() -> Status {
    if (config_json == nullptr)
      return error(Code::invalid_argument, "argument 'config_json' is null: expected the text of a config.json");
    MOEJIT_TRY(api::check_struct(model, model ? model->struct_size : 0,
                                 MOEJIT_STRUCT_FIRST_SIZE(moejit_model_desc_t, act_scale), "model"));
    MOEJIT_ASSIGN_OR_RETURN(dispatch::MoeLayerShape shape,
                            dispatch::parse_hf_config(std::string_view(config_json, length), "config_json"));
    using Kind = dispatch::CheckpointQuantization::Kind;
    const dispatch::CheckpointQuantization& q = shape.quantization;
    if (q.kind == Kind::invalid) return error(Code::invalid_argument, "{}", q.reason);
    if (q.kind == Kind::unsupported)
      return error(Code::unsupported, "config_json: quantization_config '{}' is not a format moejit runs: {}", q.method,
                   q.reason);
    // Every check passed: only now is `model` written.
    model->hidden = shape.hidden;
    model->intermediate = shape.intermediate;
    model->experts = shape.experts;
    model->topk = shape.topk;
    model->activation = static_cast<moejit_epilogue_t>(shape.activation);
    if (q.kind == Kind::four_bit) {
      model->format = static_cast<moejit_weight_format_t>(q.format);
      model->group_size = q.group_size;
      model->scale_dtype = static_cast<moejit_dtype_t>(q.scale);
      if (!q.skipped_groups.empty())
        log(LogLevel::warn,
            "config_json: quantization_config also has config groups moejit cannot run ({}); if the experts are "
            "among them, the descriptor's weights are not theirs",
            q.skipped_groups);
    } else if (model->format == 0) {
      model->format = MOEJIT_WEIGHT_MXFP4;
      model->group_size = 32;
      model->scale_dtype = MOEJIT_DTYPE_E8M0;
    }
    if (q.act == DType::e4m3) {
      model->act_dtype = MOEJIT_DTYPE_E4M3;
      model->act_scale = static_cast<moejit_act_scale_t>(q.act_scale);
    }
    return {};
  });
}

moejit_status_t moejit_warmup(moejit_context_t context, const moejit_model_desc_t* model, const char* const* archs,
                              uint32_t arch_count, moejit_progress_fn progress, void* progress_user_data) {
  return api::guarded([&]() -> Status {
    MOEJIT_TRY(api::check_context(context));
    MOEJIT_ASSIGN_OR_RETURN(dispatch::ModelDesc desc, model_of(model));
    MOEJIT_ASSIGN_OR_RETURN(std::vector<Arch> targets, archs_of(context, archs, arch_count));
    // The context's own GPU may have an SM count no device profile has: its kernels too.
    const std::uint32_t own_sms = context->launcher ? context->launcher->sm_count() : 0;
    std::vector<KernelSpec> specs;
    for (Arch arch : targets) {
      const std::uint32_t extra = context->launcher && context->launcher->arch() == arch ? own_sms : 0;
      MOEJIT_ASSIGN_OR_RETURN(auto more, dispatch::model_specs(desc, arch, context->backend, extra));
      specs.insert(specs.end(), more.begin(), more.end());
    }
    return resolve_all(context, specs, nullptr, progress, progress_user_data);
  });
}

moejit_status_t moejit_prepare(moejit_context_t context, const moejit_model_desc_t* model, moejit_progress_fn progress,
                               void* progress_user_data) {
  return api::guarded([&]() -> Status {
    MOEJIT_TRY(api::check_context(context));
    MOEJIT_ASSIGN_OR_RETURN(dispatch::ModelDesc desc, model_of(model));
    MOEJIT_ASSIGN_OR_RETURN(Launcher * launcher, context->require_launcher());
    MOEJIT_ASSIGN_OR_RETURN(std::vector<KernelSpec> specs,
                            dispatch::model_specs(desc, launcher->arch(), context->backend, launcher->sm_count(), true));
    return resolve_all(context, specs, launcher, progress, progress_user_data);
  });
}

}  // extern "C"
