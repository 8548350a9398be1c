#pragma once
// Where the model's inputs come from: the cases (model x weight format x tokens x device), the
// kernel specs moejit's own heuristic picks for them, those kernels compiled by NVRTC, and
// their SASS from nvdisasm.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "dispatch/hf_config.hpp"
#include "bench/perf_model/sass.hpp"
#include "runtime/kernel_resolver.hpp"
#include "spec/device_profiles.hpp"
#include "spec/kernel_spec.hpp"

namespace moejit::perf {

// ---- Cases ----------------------------------------------------------------------------------

struct ModelConfig {
  std::string name;  // as given on the command line, or the file's stem
  std::string path;  // the Hugging Face config.json it was read from
  dispatch::MoeLayerShape shape;
};

// `name_or_path`: a config file, or a model name looked up as <models_dir>/<lower-case name>.json.
Result<ModelConfig> load_model(const std::string& name_or_path, const std::filesystem::path& models_dir);

struct WeightChoice {
  std::string_view name;  // "mxfp4", "int4_g128", "mxfp4_w4a8", ...
  WeightFormat weight;
  DType scale;
  std::uint32_t group;
  // bf16 or f16: W4A16 with those activations. e4m3: W4A8 (weights packed for e4m3 activations
  // with per-token scales); e2m1: W4A4 (MXFP4 weights packed for e2m1 activations, E8M0 per 32;
  // sm_120a / sm_121a only). Quantized activations arrive in bf16 and the layer quantizes them.
  DType act = DType::bf16;
  // e4m3: per token, or per 128 k where block128 (as DeepSeek's checkpoints and DeepEP's
  // dispatch scale them).
  bool block128 = false;
};
std::span<const WeightChoice> weight_choices();
const WeightChoice* find_weight_choice(std::string_view name);

enum class Gemm : std::uint8_t { up, down };  // gate/up (act-and-mul) and down (top-k weighted)
std::string_view to_string(Gemm g);

// Decode is T <= 64 (DESIGN §10); above, the case is flagged prefill.
inline constexpr std::uint32_t kLargestDecodeTokens = 64;

struct Case {
  const ModelConfig* model = nullptr;
  const WeightChoice* format = nullptr;
  const DeviceProfile* profile = nullptr;
  std::uint32_t tokens = 0;
  Gemm gemm = Gemm::up;
  KernelSpec spec{};  // what the heuristic picked

  bool prefill() const { return tokens > kLargestDecodeTokens; }
  std::uint32_t experts() const { return model->shape.experts; }  // local = global: no expert parallelism
  std::uint32_t topk() const { return model->shape.topk; }
  std::int32_t rows() const { return static_cast<std::int32_t>(tokens * topk()); }  // the GEMM's m (pairs)
};

// Combinations with no case (e.g. a group that does not divide K) and why.
struct SkippedCase {
  std::string model, format, profile;
  std::vector<std::uint32_t> tokens;
  std::string reason;
};

// Every case, in the order: profile, model, format, tokens, gemm.
std::vector<Case> enumerate_cases(std::span<const ModelConfig> models, std::span<const WeightChoice* const> formats,
                                  std::span<const std::uint32_t> tokens,
                                  std::span<const DeviceProfile> profiles, std::vector<SkippedCase>& skipped);

// ---- Kernels --------------------------------------------------------------------------------

// Compiles every distinct spec of `cases` in the resolver's pool; entry i answers specs[i].
struct CompiledSpecs {
  std::vector<KernelSpec> specs;
  std::vector<Result<Resolution>> resolutions;
};
CompiledSpecs compile_specs(KernelResolver& resolver, std::span<const Case> cases);

// nvdisasm: $MOEJIT_NVDISASM, else `nvdisasm` on PATH, else the CUDA toolkit found at build
// time, else the PyPI package nvidia-cuda-nvdisasm (python3 is asked where it is). Code::not_found
// when there is none, saying where it looked.
struct Disassembler {
  std::string path;
  std::string version;  // the "Cuda compilation tools, release ..." line
};
Result<Disassembler> find_nvdisasm();

// `nvdisasm -c` of a CUBIN, written to a file in `work_dir` first.
Result<std::string> disassemble(const Disassembler& nvdisasm, std::string_view cubin,
                                const std::filesystem::path& work_dir);

// One kernel's SASS and its main loop.
struct KernelAnalysis {
  const ResolvedKernel* kernel = nullptr;
  std::string sass;                         // the whole disassembly
  std::optional<MainLoopAnalysis> loop;     // nullopt: no loop with mma (see error)
  std::uint64_t function_instructions = 0;  // the kernel function's whole length
  std::string error;
};

// Disassembles `kernel` and finds its main loop; the expected mma per stage comes from the
// spec's tile (bm x bn x bk over its warps).
KernelAnalysis analyze_kernel(const ResolvedKernel& kernel, const Disassembler& nvdisasm,
                              const std::filesystem::path& work_dir);

}  // namespace moejit::perf
