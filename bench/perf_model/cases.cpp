#include "bench/perf_model/cases.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <future>
#include <unordered_map>

#include "dispatch/fused_moe_op.hpp"
#include "quant/formats.hpp"
#include "quant/pack.hpp"
#include "support/fs.hpp"
#include "support/subprocess.hpp"

#ifndef MOEJIT_CUDA_BIN_DIR
#define MOEJIT_CUDA_BIN_DIR ""
#endif

namespace moejit::perf {
namespace {

constexpr std::array kWeightChoices = {
    WeightChoice{"mxfp4", WeightFormat::mxfp4, DType::e8m0, 32},
    WeightChoice{"int4_g128", WeightFormat::int4_sym, DType::bf16, 128},
    WeightChoice{"mxfp4_w4a8", WeightFormat::mxfp4, DType::e8m0, 32, DType::e4m3},
    WeightChoice{"int4_g128_w4a8", WeightFormat::int4_sym, DType::bf16, 128, DType::e4m3},
    WeightChoice{"int4_g128_w4a8_block128", WeightFormat::int4_sym, DType::bf16, 128, DType::e4m3, true},
    WeightChoice{"mxfp4_w4a4", WeightFormat::mxfp4, DType::e8m0, 32, DType::e2m1},
    // f16 models (and GPTQ/AWQ checkpoints, whose scales are f16): the mma runs in f16.
    WeightChoice{"mxfp4_f16", WeightFormat::mxfp4, DType::e8m0, 32, DType::f16},
    WeightChoice{"int4_g128_f16", WeightFormat::int4_sym, DType::f16, 128, DType::f16},
};

// The specs moejit's fused MoE layer picks for `tokens` tokens of `model` on `device`. The one
// call into the heuristic: the request is built as src/dispatch/model_specs.cpp builds it, with
// placeholder pointers (only shapes and dtypes matter), no tensor or expert parallelism.
Result<dispatch::FusedMoeSpecs> heuristic_specs(const dispatch::MoeLayerShape& model, const WeightChoice& format,
                                                std::uint32_t tokens, const DeviceProfile& device) {
  alignas(256) static const int placeholder[4] = {};
  dispatch::FusedMoeRequest r;
  const PackedOrder order = quant::packed_order_for(format.act, format.weight);
  r.w13 = {format.weight, format.group, format.scale, model.experts, 2 * model.intermediate, model.hidden, true,
           placeholder, placeholder, nullptr, nullptr, order};
  r.w2 = {format.weight, format.group, format.scale, model.experts, model.hidden, model.intermediate, false,
          placeholder, placeholder, nullptr, nullptr, order};
  r.act = format.act == DType::f16 ? DType::f16 : DType::bf16;  // quantized activations come from bf16
  r.act_scale = format.act == DType::e4m3   ? (format.block128 ? ActScale::block128 : ActScale::token)
                : format.act == DType::e2m1 ? ActScale::block32
                                            : ActScale::none;
  r.out = DType::bf16;
  r.activation = model.activation;
  r.topk = model.topk;
  r.global_experts = model.experts;
  r.tokens = static_cast<std::int32_t>(tokens);
  r.hidden = r.topk_ids = placeholder;
  r.topk_weights = reinterpret_cast<const float*>(placeholder);
  r.output = const_cast<int*>(placeholder);
  return dispatch::fused_moe_specs(r, device.arch, Backend::device, device.sms);
}

bool is_executable(const std::string& path) { return !path.empty() && ::access(path.c_str(), X_OK) == 0; }

std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "";
  while (!dirs.empty()) {
    const std::size_t colon = dirs.find(':');
    const std::string_view dir = dirs.substr(0, colon);
    dirs.remove_prefix(colon == std::string_view::npos ? dirs.size() : colon + 1);
    if (dir.empty()) continue;
    const std::string candidate = std::string(dir) + "/" + program;
    if (is_executable(candidate)) return candidate;
  }
  return {};
}

// Where pip put nvidia-cuda-nvdisasm: <site-packages>/nvidia/cu13/bin/nvdisasm (cu12/... for
// older releases), found through the `nvidia` namespace package.
std::string find_in_python_packages() {
  static constexpr const char* kScript =
      "import nvidia, pathlib\n"
      "hits = [p for d in nvidia.__path__ for p in sorted(pathlib.Path(d).glob('*/bin/nvdisasm'))]\n"
      "print(hits[-1] if hits else '')\n";
  auto out = run_captured({"python3", "-c", kScript});
  if (!out.ok() || out->exit_code != 0) return {};
  std::string path = out->output;
  while (!path.empty() && std::isspace(static_cast<unsigned char>(path.back()))) path.pop_back();
  return is_executable(path) ? path : std::string();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

Result<ModelConfig> load_model(const std::string& name_or_path, const std::filesystem::path& models_dir) {
  ModelConfig m;
  std::error_code ec;
  if (std::filesystem::is_regular_file(name_or_path, ec)) {
    m.path = name_or_path;
    m.name = std::filesystem::path(name_or_path).stem().string();
  } else {
    m.path = (models_dir / (lower(name_or_path) + ".json")).string();
    m.name = name_or_path;
  }
  MOEJIT_ASSIGN_OR_RETURN(m.shape, dispatch::read_hf_config(m.path));
  return m;
}

std::span<const WeightChoice> weight_choices() { return kWeightChoices; }

const WeightChoice* find_weight_choice(std::string_view name) {
  for (const auto& w : kWeightChoices)
    if (w.name == name) return &w;
  return nullptr;
}

std::string_view to_string(Gemm g) { return g == Gemm::up ? "up" : "down"; }

std::vector<Case> enumerate_cases(std::span<const ModelConfig> models, std::span<const WeightChoice* const> formats,
                                  std::span<const std::uint32_t> tokens, std::span<const DeviceProfile> profiles,
                                  std::vector<SkippedCase>& skipped) {
  std::vector<Case> cases;
  for (const DeviceProfile& profile : profiles)
    for (const ModelConfig& model : models)
      for (const WeightChoice* format : formats) {
        // A format applies when its group divides both K (gpt-oss-120b's 2880 is no multiple of 128).
        Status applies = quant::check_weight_format(format->weight, format->group, format->scale, model.shape.hidden);
        if (applies.ok())
          applies = quant::check_weight_format(format->weight, format->group, format->scale, model.shape.intermediate);
        if (!applies.ok()) {
          skipped.push_back({model.name, std::string(format->name), std::string(profile.name),
                             std::vector<std::uint32_t>(tokens.begin(), tokens.end()), applies.message()});
          continue;
        }
        for (std::uint32_t t : tokens) {
          auto specs = heuristic_specs(model.shape, *format, t, profile);
          if (!specs.ok()) {
            skipped.push_back({model.name, std::string(format->name), std::string(profile.name), {t},
                               specs.status().message()});
            continue;
          }
          Case c{&model, format, &profile, t, Gemm::up, specs->up};
          cases.push_back(c);
          c.gemm = Gemm::down;
          c.spec = specs->down;
          cases.push_back(c);
        }
      }
  return cases;
}

CompiledSpecs compile_specs(KernelResolver& resolver, std::span<const Case> cases) {
  CompiledSpecs out;
  std::vector<std::future<Result<Resolution>>> pending;
  for (const Case& c : cases)
    if (std::find(out.specs.begin(), out.specs.end(), c.spec) == out.specs.end()) {
      out.specs.push_back(c.spec);
      pending.push_back(resolver.resolve_async(c.spec));
    }
  for (auto& f : pending) out.resolutions.push_back(f.get());
  return out;
}

Result<Disassembler> find_nvdisasm() {
  Disassembler d;
  if (const char* env = std::getenv("MOEJIT_NVDISASM"); env != nullptr && *env != '\0') {
    if (!is_executable(env))
      return error(Code::not_found, "MOEJIT_NVDISASM = '{}' is not an executable file", env);
    d.path = env;
  }
  if (d.path.empty()) d.path = find_on_path("nvdisasm");
  if (d.path.empty() && is_executable(std::string(MOEJIT_CUDA_BIN_DIR) + "/nvdisasm"))
    d.path = std::string(MOEJIT_CUDA_BIN_DIR) + "/nvdisasm";
  if (d.path.empty()) d.path = find_in_python_packages();
  if (d.path.empty())
    return error(Code::not_found,
                 "nvdisasm not found: not in MOEJIT_NVDISASM, on PATH, in the CUDA toolkit ('{}') or in python3's "
                 "nvidia-cuda-nvdisasm package (pip install nvidia-cuda-nvdisasm)",
                 MOEJIT_CUDA_BIN_DIR);
  MOEJIT_ASSIGN_OR_RETURN(ProcessOutput version, run_captured({d.path, "--version"}));
  if (version.exit_code != 0) return error(Code::unavailable, "'{} --version' failed: {}", d.path, version.output);
  for (std::size_t pos = 0; pos < version.output.size();) {
    const std::size_t eol = std::min(version.output.find('\n', pos), version.output.size());
    const std::string line = version.output.substr(pos, eol - pos);
    if (line.find("release") != std::string::npos) d.version = line;
    pos = eol + 1;
  }
  if (d.version.empty()) d.version = version.output;
  return d;
}

Result<std::string> disassemble(const Disassembler& nvdisasm, std::string_view cubin,
                                const std::filesystem::path& work_dir) {
  const std::filesystem::path file = work_dir / ("kernel-" + unique_suffix() + ".cubin");
  {
    std::ofstream out(file, std::ios::binary);
    out.write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
    if (!out) return error(Code::io_error, "cannot write {}", file.string());
  }
  auto result = run_captured({nvdisasm.path, "-c", file.string()});
  std::error_code ec;
  std::filesystem::remove(file, ec);
  if (!result.ok()) return result.status();
  if (result->exit_code != 0)
    return error(Code::unavailable, "nvdisasm -c failed (exit {}): {}", result->exit_code, result->output);
  return std::move(result->output);
}

KernelAnalysis analyze_kernel(const ResolvedKernel& kernel, const Disassembler& nvdisasm,
                              const std::filesystem::path& work_dir) {
  KernelAnalysis a;
  a.kernel = &kernel;
  auto sass = disassemble(nvdisasm, kernel.binary, work_dir);
  if (!sass.ok()) {
    a.error = sass.status().message();
    return a;
  }
  a.sass = std::move(*sass);
  const std::vector<SassFunction> functions = parse_sass(a.sass);
  // The kernel's own function (a CUBIN may hold helpers too); else the longest one.
  const SassFunction* function = nullptr;
  for (const auto& f : functions)
    if (f.name == kernel.meta.kernel_name) function = &f;
  if (function == nullptr)
    for (const auto& f : functions)
      if (function == nullptr || f.instructions.size() > function->instructions.size()) function = &f;
  if (function == nullptr || function->instructions.empty()) {
    a.error = "the disassembly holds no instructions";
    return a;
  }
  a.function_instructions = function->instructions.size();
  const KernelSpec& s = kernel.spec;
  const double macs_per_stage_per_warp = static_cast<double>(s.bm) * s.bn * s.bk / std::max<std::uint32_t>(1, s.warps);
  a.loop = analyze_main_loop(*function, macs_per_stage_per_warp);
  if (!a.loop) a.error = "no loop holds an mma instruction: no main loop";
  return a;
}

}  // namespace moejit::perf
