// `moejit warmup --model CONFIG.json --arch sm_90a[,sm_121a] --weights mxfp4 ...`: compile into
// the store every kernel a model's fused MoE layer can use, or (--from-usage FILE) exactly the
// kernels a previous run recorded. Needs no GPU.

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <unordered_set>

#include "cli/commands.hpp"
#include "cli/model_options.hpp"
#include "dispatch/spec_observer.hpp"
#include "dispatch/usage_retarget.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"
#include "support/log.hpp"

namespace moejit::cli {
namespace {

struct WarmupArgs {
  std::string model, archs = "", weights, scale, act, act_scale, out = "bf16", from_usage,
      backend = "device";
  std::uint32_t tp = 1, ep = 1, max_tokens = 8192, jobs = 0, sms = 0;
};

Result<std::vector<Arch>> parse_archs(const std::string& list) {
  std::vector<Arch> out;
  std::size_t pos = 0;
  while (pos <= list.size() && !list.empty()) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string name = list.substr(pos, comma - pos);
    auto a = parse_arch(name);
    if (!a) return error(Code::invalid_argument, "--arch {}: expected a comma-separated list of sm_80 ... sm_121a", name);
    if (runtime_target(*a) != *a)
      log(LogLevel::info, "--arch {}: warming {}, the kernels a GPU of that compute capability runs", name,
          to_string(runtime_target(*a)));
    // sm_90 and sm_90a name one target: warmed once.
    if (std::find(out.begin(), out.end(), runtime_target(*a)) == out.end()) out.push_back(runtime_target(*a));
    pos = comma + 1;
  }
  return out;
}

// What to warm: the specs, and with --model the weights they were built for.
struct WarmPlan {
  std::vector<KernelSpec> specs;
  std::optional<WeightChoice> weights;
  ActChoice act;
};

// The options that describe a model: a usage manifest lists its kernels whole instead.
constexpr const char* kModelOptions[] = {"--model", "--weights", "--scale", "--act",       "--act-scale",
                                         "--out",   "--tp",      "--ep",    "--max-tokens"};

// The specs to warm, from a model config or a usage manifest. `given(option)`: whether the
// command line set it.
Result<WarmPlan> specs_to_warm(const WarmupArgs& a, Backend backend, const std::function<bool(const char*)>& given) {
  MOEJIT_ASSIGN_OR_RETURN(std::vector<Arch> archs, parse_archs(a.archs));
  if (!a.from_usage.empty()) {
    for (const char* option : kModelOptions)
      if (given(option))
        return error(Code::invalid_argument,
                     "{} with --from-usage: expected none of the model's options (the manifest lists its kernels, "
                     "which --arch, --sms and --backend may re-target)",
                     option);
    if (given("--sms") && archs.empty())
      return error(Code::invalid_argument,
                   "--sms with --from-usage: expected --arch too (the target of the GPU with {} SMs)", a.sms);
    MOEJIT_ASSIGN_OR_RETURN(std::vector<dispatch::UsageRecord> used, dispatch::read_usage_manifest(a.from_usage));
    const std::optional<Backend> to_backend = given("--backend") ? std::optional<Backend>(backend) : std::nullopt;
    WarmPlan out;
    if (archs.empty()) {
      // What the run used, as it used it (on the named backend, if one is given); the layers'
      // records say what their kernels were chosen for, and the kernels are listed beside them.
      std::unordered_set<KernelSpec, KernelSpecHash> seen;
      for (const dispatch::UsageRecord& r : used) {
        if (r.layer) continue;
        KernelSpec s = r.spec;
        s.backend = to_backend.value_or(s.backend);
        if (seen.insert(s).second) out.specs.push_back(s);
      }
      return out;
    }
    // Re-targeted: each target's heuristics are asked what they pick for the recorded calls.
    for (Arch arch : archs) {
      MOEJIT_ASSIGN_OR_RETURN(dispatch::RetargetedUsage r, dispatch::retarget_usage(used, arch, to_backend, a.sms));
      if (r.gemms_without_call != 0)
        log(LogLevel::warn,
            "{}: {} grouped GEMM kernel(s) recorded without the call that chose them (a manifest of an older moejit): "
            "warmed for {} with their recorded tiles, which {}'s heuristic may not pick; record the manifest again "
            "for a store a frozen run can rely on",
            a.from_usage, r.gemms_without_call, to_string(arch), to_string(arch));
      if (r.kernels_without_layer != 0)
        log(LogLevel::warn,
            "{}: {} fused-layer kernel(s) recorded without their layer (a manifest of an older moejit): warmed for {} "
            "with their recorded tile rows, which {} may weigh otherwise; record the manifest again for a store a "
            "frozen run can rely on",
            a.from_usage, r.kernels_without_layer, to_string(arch), to_string(arch));
      out.specs.insert(out.specs.end(), r.specs.begin(), r.specs.end());
    }
    return out;
  }
  if (a.model.empty()) return error(Code::invalid_argument, "expected --model CONFIG.json or --from-usage FILE");
  if (archs.empty()) return error(Code::invalid_argument, "--arch is required with --model (e.g. --arch sm_90a)");
  MOEJIT_ASSIGN_OR_RETURN(dispatch::MoeLayerShape shape, dispatch::read_hf_config(a.model));
  MOEJIT_ASSIGN_OR_RETURN(WeightChoice w, choose_weights(a.weights, a.scale, shape.quantization, a.model));
  dispatch::ModelDesc m;
  m.hidden = shape.hidden;
  m.intermediate = shape.intermediate;
  m.experts = shape.experts;
  m.topk = shape.topk;
  m.activation = shape.activation;
  m.format = w.format;
  m.group_size = w.group_size;
  m.scale = w.scale;
  MOEJIT_ASSIGN_OR_RETURN(ActChoice act, choose_act(a.act, a.act_scale, w, shape.quantization, a.model));
  m.act = act.act;
  m.act_scale = act.scale;
  MOEJIT_ASSIGN_OR_RETURN(m.out, parse_out(a.out));
  m.tensor_parallel = a.tp;
  m.expert_parallel = a.ep;
  m.max_tokens = a.max_tokens;
  WarmPlan out{{}, w, act};
  for (Arch arch : archs) {
    MOEJIT_ASSIGN_OR_RETURN(auto specs, dispatch::model_specs(m, arch, backend, a.sms));
    out.specs.insert(out.specs.end(), specs.begin(), specs.end());
  }
  return out;
}

void draw_progress(std::size_t done, std::size_t total, bool tty) {
  if (tty) {
    const int width = 30, filled = static_cast<int>(width * done / std::max<std::size_t>(total, 1));
    std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu kernels", filled, "##############################", width - filled, "",
                 done, total);
    if (done == total) std::fprintf(stderr, "\n");
  } else if (done == total || (total >= 10 && done % (total / 10) == 0)) {
    std::fprintf(stderr, "warmup: %zu/%zu kernels\n", done, total);
  }
}

}  // namespace

Command add_warmup_command(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand("warmup", "Compile every kernel a model can use into the store (no GPU needed)");
  auto a = std::make_shared<WarmupArgs>();
  cmd->add_option("--model", a->model, "Hugging Face config.json of the model");
  cmd->add_option("--arch", a->archs, "Target architectures, comma-separated (e.g. sm_90a,sm_121a)");
  cmd->add_option("--weights", a->weights,
                  std::string("Weight format: ") + std::string(weights_help()) +
                      " (default: the config's quantization_config, else mxfp4)");
  cmd->add_option("--scale", a->scale, "INT4 scale dtype: bf16 (default) or f16");
  cmd->add_option("--act", a->act,
                  "Activation dtype: bf16 (default), f16, e4m3 (W4A8: FP8 activations; the hidden states may come "
                  "in bf16, f16 or e4m3) or e2m1 (W4A4: MXFP4 activations with MXFP4 weights, sm_120a/sm_121a)");
  cmd->add_option("--act-scale", a->act_scale,
                  "With --act e4m3: token (default) or block128 activation scales; with e2m1: block32 (E8M0)");
  cmd->add_option("--out", a->out, "Output dtype: bf16 (default), f16 or f32");
  cmd->add_option("--tp", a->tp, "Tensor-parallel ranks (the expert FFN width is split)");
  cmd->add_option("--ep", a->ep, "Expert-parallel ranks (the experts are split)");
  cmd->add_option("--max-tokens", a->max_tokens, "Largest batch the engine runs (default 8192)");
  cmd->add_option("--sms", a->sms,
                  "Also plan for a GPU of this many SMs (one no device profile of the target has: a MIG slice, "
                  "another SKU); tiles and split-K depend on it")
      ->check(CLI::Range(1u, 1024u));
  cmd->add_option("-j,--jobs", a->jobs, "Concurrent compiles (default: cores, at most 8)")->check(CLI::Range(1u, 256u));
  cmd->add_option("--from-usage", a->from_usage, "Warm exactly the kernels a usage manifest lists");
  cmd->add_option("--backend", a->backend, "device (CUBINs, default) or host");
  return {cmd, [&g, a, cmd]() -> int {
    Backend backend = a->backend == "host" ? Backend::host : Backend::device;
    if (a->backend != "host" && a->backend != "device")
      return fail(g, error(Code::invalid_argument, "--backend {}: expected device or host", a->backend));
    auto plan = specs_to_warm(*a, backend, [cmd](const char* option) { return cmd->count(option) > 0; });
    if (!plan.ok()) return fail(g, plan.status());
    const std::vector<KernelSpec>* specs = &plan->specs;
    auto options = resolver_options(g);
    if (!options.ok()) return fail(g, options.status());
    if (a->jobs > 0) options->compile_threads = a->jobs;
    auto resolver = KernelResolver::create(std::move(options).value());
    if (!resolver.ok()) return fail(g, resolver.status());
    // Warming a store that keeps nothing on disk would report kernels no later run finds.
    const store::Store& store = (*resolver)->store();
    if (store.memory_only()) return fail(g, store.memory_only_error("warm"));

    const auto start = std::chrono::steady_clock::now();
    std::vector<std::future<Result<Resolution>>> pending;
    for (const KernelSpec& s : *specs) pending.push_back((*resolver)->resolve_async(s));
    const bool tty = ::isatty(2) != 0;
    std::size_t compiled = 0, from_disk = 0, from_memory = 0;
    Json errors = Json::array();
    for (std::size_t i = 0; i < pending.size(); ++i) {
      auto r = pending[i].get();
      if (!r.ok()) errors.push_back(r.status().to_string());
      else if (r->source == KernelSource::compiled) ++compiled;
      else if (r->source == KernelSource::disk) ++from_disk;
      else ++from_memory;
      draw_progress(i + 1, pending.size(), tty);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const auto stats = (*resolver)->stats();
    // A kernel compiled but not stored (a full disk, say, which also turns the store
    // memory-only) is not warm.
    if (const auto failed = store.stats().publish_failures; failed > 0)
      errors.push_back(fmt::format("{} compiled kernel(s) could not be written to the store '{}' (its warnings say "
                                   "why)",
                                   failed, store.options().dir));
    Json doc{{"kernels", specs->size()},
             {"compiled", compiled},
             {"from_disk", from_disk},
             {"duplicates", from_memory},
             {"errors", errors},
             {"seconds", seconds},
             {"compile_ms", stats.compile_ms},
             {"store", (*resolver)->store().options().dir},
             {"memory_only", (*resolver)->store().memory_only()}};
    if (plan->weights) {
      doc["weights"] = dispatch::weights_spelling(plan->weights->format, plan->weights->group_size);
      doc["weight_scale"] = to_string(plan->weights->scale);
      doc["act"] = to_string(plan->act.act);
      if (plan->act.scale != ActScale::none) doc["act_scale"] = to_string(plan->act.scale);
    }
    print(g, doc);
    return errors.empty() ? 0 : 1;
  }};
}

}  // namespace moejit::cli
