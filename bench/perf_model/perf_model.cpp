// perf_model: the static performance model of the grouped-GEMM kernels moejit's heuristic picks
// (DESIGN §10), without a GPU. For each model x weight format x token count x device profile it
// takes the gate/up and down specs the fused MoE layer would use, compiles them with NVRTC,
// disassembles them with nvdisasm, finds the main loop and reports the instructions per weight
// byte, occupancy, bytes in flight and grid fill, and the fraction of the HBM floor they allow.
// README.md beside this file says what each figure means and what the model assumes.

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <span>
#include <thread>

#include "bench/perf_model/cases.hpp"
#include "bench/perf_model/evaluate.hpp"
#include "bench/perf_model/report.hpp"
#include "bench/utc_now.hpp"
#include "codegen/template_set.hpp"
#include "spec/spec_fields.hpp"
#include "spec/spec_json.hpp"
#include "support/fs.hpp"

#include "moejit_build_commit.h"  // MOEJIT_BUILD_COMMIT, stamped each build
#ifndef MOEJIT_SOURCE_DIR
#define MOEJIT_SOURCE_DIR "."
#endif

namespace {

using namespace moejit;
using namespace moejit::perf;
namespace fs = std::filesystem;

// ctest's SKIP_RETURN_CODE: nothing to disassemble with.
constexpr int kExitNoNvdisasm = 77;

struct Options {
  std::vector<std::string> models = {"Ling-3.0-flash", "DeepSeek-V3", "Qwen3-30B-A3B", "gpt-oss-120b"};
  std::vector<std::string> formats = {"mxfp4", "int4_g128"};
  std::vector<std::uint32_t> tokens = {1, 2, 4, 8, 16, 32, 64, 1024, 4096};
  std::vector<std::string> profiles = {"H200", "B200", "RTX-PRO-6000"};
  std::string models_dir = std::string(MOEJIT_SOURCE_DIR) + "/bench/models";
  std::string out, markdown, cache_dir, dump_sass;
};

bool write_text(const std::string& path, const std::string& text) {
  std::error_code ec;
  if (fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path(), ec);
  std::ofstream out(path, std::ios::binary);
  out << text;
  return static_cast<bool>(out);
}

// The models, formats and profiles the options name.
struct Inputs {
  std::vector<ModelConfig> models;
  std::vector<const WeightChoice*> formats;
  std::vector<DeviceProfile> profiles;
};

Result<Inputs> read_inputs(const Options& o) {
  Inputs in;
  for (const auto& m : o.models) {
    MOEJIT_ASSIGN_OR_RETURN(ModelConfig model, load_model(m, o.models_dir));
    in.models.push_back(std::move(model));
  }
  for (const auto& f : o.formats) {
    const WeightChoice* w = find_weight_choice(f);
    if (w == nullptr) {
      std::string known;
      for (const auto& c : weight_choices()) known += fmt::format(" {}", c.name);
      return error(Code::invalid_argument, "unknown format '{}'; expected one of:{}", f, known);
    }
    in.formats.push_back(w);
  }
  for (const auto& p : o.profiles) {
    auto profile = device_profile(p);
    if (!profile) {
      std::string known;
      for (const auto& d : device_profiles()) known += fmt::format(" {}", d.name);
      return error(Code::invalid_argument, "unknown profile '{}'; expected one of:{}", p, known);
    }
    in.profiles.push_back(*profile);
  }
  return in;
}

// Every distinct kernel of the cases, compiled, disassembled and analyzed.
struct Kernels {
  CompiledSpecs compiled;
  std::vector<KernelAnalysis> analyses;  // of the kernels that compiled
  std::vector<int> analysis_of;          // per compiled spec: index into analyses, -1 if it failed
  std::vector<std::string> sass_files;   // per analysis, with --dump-sass

  std::size_t index_of(const KernelSpec& spec) const {
    return static_cast<std::size_t>(std::find(compiled.specs.begin(), compiled.specs.end(), spec) -
                                    compiled.specs.begin());
  }
};

// A file name for a kernel's SASS that says what it is, from the first case that uses it.
std::string sass_file_name(std::span<const Case> cases, const KernelSpec& s) {
  const Case& c = *std::find_if(cases.begin(), cases.end(), [&](const Case& x) { return x.spec == s; });
  std::string name = fmt::format("{}_{}_{}_{}_{}x{}x{}_s{}_w{}", to_string(s.arch), c.model->name, to_string(c.gemm),
                                 c.format->name, s.bm, s.bn, s.bk, s.stages, s.warps);
  if (s.split_k > 1) name += fmt::format("_sk{}", s.split_k);
  return name + ".sass";
}

Kernels build_kernels(KernelResolver& resolver, std::span<const Case> cases, const Disassembler& nvdisasm,
                      const fs::path& scratch, const std::string& dump_sass) {
  Kernels k;
  k.compiled = compile_specs(resolver, cases);
  k.analyses.reserve(k.compiled.specs.size());
  std::error_code ec;
  if (!dump_sass.empty()) fs::create_directories(dump_sass, ec);
  for (std::size_t i = 0; i < k.compiled.specs.size(); ++i) {
    const KernelSpec& spec = k.compiled.specs[i];
    const auto& r = k.compiled.resolutions[i];
    if (!r.ok()) {
      std::fprintf(stderr, "perf_model: compile failed for %s: %s\n", spec_to_json(spec).c_str(),
                   r.status().message().c_str());
      k.analysis_of.push_back(-1);
      continue;
    }
    std::fprintf(stderr, "perf_model: [%zu/%zu] disassembling %s %s\n", i + 1, k.compiled.specs.size(),
                 std::string(to_string(spec.arch)).c_str(), r->kernel->key.hex().c_str());
    k.analysis_of.push_back(static_cast<int>(k.analyses.size()));
    k.analyses.push_back(analyze_kernel(*r->kernel, nvdisasm, scratch));
    const KernelAnalysis& a = k.analyses.back();
    if (!a.error.empty()) std::fprintf(stderr, "perf_model:   %s\n", a.error.c_str());
    if (!dump_sass.empty()) {
      k.sass_files.push_back(sass_file_name(cases, spec));
      const std::string path = (fs::path(dump_sass) / k.sass_files.back()).string();
      if (!write_text(path, a.sass)) std::fprintf(stderr, "perf_model: cannot write %s\n", path.c_str());
    }
  }
  return k;
}

// Each case through the model, printed as it goes.
std::vector<CaseRecord> evaluate_cases(std::span<const Case> cases, const Kernels& k) {
  std::vector<CaseRecord> records;
  for (const Case& c : cases) {
    CaseRecord rec;
    rec.c = &c;
    const std::size_t i = k.index_of(c.spec);
    if (k.analysis_of[i] < 0) {
      rec.error = "compile failed: " + k.compiled.resolutions[i].status().message();
    } else {
      rec.kernel = &k.analyses[static_cast<std::size_t>(k.analysis_of[i])];
      if (rec.kernel->loop) rec.result = evaluate_case(c, *rec.kernel);
      else rec.error = rec.kernel->error;
    }
    std::printf("%s\n", case_line(rec).c_str());
    records.push_back(std::move(rec));
  }
  return records;
}

int run(const Options& o) {
  auto nvdisasm = find_nvdisasm();
  if (!nvdisasm.ok()) {
    std::fprintf(stderr, "perf_model: skipped: %s\n", nvdisasm.status().message().c_str());
    return nvdisasm.status().code() == Code::not_found ? kExitNoNvdisasm : 1;
  }
  auto inputs = read_inputs(o);
  if (!inputs.ok()) {
    std::fprintf(stderr, "perf_model: %s\n", inputs.status().message().c_str());
    return 1;
  }
  std::vector<SkippedCase> skipped;
  const std::vector<Case> cases = enumerate_cases(inputs->models, inputs->formats, o.tokens, inputs->profiles, skipped);
  for (const auto& s : skipped)
    std::fprintf(stderr, "perf_model: no case for %s %s T=%s on %s: %s\n", s.model.c_str(), s.format.c_str(),
                 fmt::format("{}", fmt::join(s.tokens, ",")).c_str(), s.profile.c_str(), s.reason.c_str());

  // CUBIN files for nvdisasm and, without --cache-dir, a private store: removed on the way out.
  struct ScratchDir {
    fs::path path = fs::temp_directory_path() / ("moejit-perf-model-" + unique_suffix());
    ~ScratchDir() {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  } scratch;
  std::error_code ec;
  fs::create_directories(scratch.path, ec);
  KernelResolver::Options ro;
  ro.store.dir = o.cache_dir.empty() ? (scratch.path / "store").string() : o.cache_dir;
  ro.compile_threads = std::max(1u, std::thread::hardware_concurrency());
  auto templates = codegen::TemplateSet::from_environment();
  if (!templates.ok()) {
    std::fprintf(stderr, "perf_model: %s\n", templates.status().message().c_str());
    return 1;
  }
  ro.templates = *templates;
  auto resolver = KernelResolver::create(ro);
  if (!resolver.ok()) {
    std::fprintf(stderr, "perf_model: %s\n", resolver.status().to_string().c_str());
    return 1;
  }
  std::fprintf(stderr, "perf_model: %zu cases, compiling their kernels (store %s) ...\n", cases.size(),
               ro.store.dir.c_str());
  const Kernels kernels = build_kernels(**resolver, cases, *nvdisasm, scratch.path, o.dump_sass);
  const std::vector<CaseRecord> records = evaluate_cases(cases, kernels);

  RunInfo run;
  run.date = bench::utc_now();
  run.commit = MOEJIT_BUILD_COMMIT;
  if (!kernels.analyses.empty()) run.nvrtc = kernels.analyses.front().kernel->meta.compiler;
  run.nvdisasm = *nvdisasm;
  const char* template_dir = std::getenv("MOEJIT_TEMPLATE_DIR");
  // Which templates, without the directory's path (results are committed).
  run.templates = template_dir != nullptr && *template_dir != '\0' ? "MOEJIT_TEMPLATE_DIR" : "embedded";
  run.tokens = o.tokens;
  run.profiles = inputs->profiles;

  nlohmann::ordered_json json = report_json(run, kernels.analyses, records, skipped);
  for (std::size_t i = 0; i < kernels.sass_files.size(); ++i) json["kernels"][i]["sass_file"] = kernels.sass_files[i];
  const std::string out = !o.out.empty() ? o.out
                                         : fmt::format("{}/bench/results/perf-model-{}.json", MOEJIT_SOURCE_DIR,
                                                       run.date.substr(0, 10));
  if (!write_text(out, report_text(json))) {
    std::fprintf(stderr, "perf_model: cannot write %s\n", out.c_str());
    return 1;
  }
  std::fprintf(stderr, "perf_model: wrote %s\n", out.c_str());
  if (!o.markdown.empty()) {
    if (!write_text(o.markdown, report_markdown(run, records))) {
      std::fprintf(stderr, "perf_model: cannot write %s\n", o.markdown.c_str());
      return 1;
    }
    std::fprintf(stderr, "perf_model: wrote %s\n", o.markdown.c_str());
  }
  const bool all_evaluated = std::all_of(records.begin(), records.end(), [](const CaseRecord& r) { return r.result; });
  return all_evaluated ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Static performance model of the grouped-GEMM kernels moejit picks (no GPU needed)"};
  app.add_option("--models", o.models, "Model names (bench/models/<lower-case name>.json) or config.json paths")
      ->capture_default_str();
  app.add_option("--models-dir", o.models_dir, "Where model names are looked up")->capture_default_str();
  app.add_option("--formats", o.formats, "Weight formats: mxfp4 (e8m0 scales, group 32), int4_g128 (symmetric, bf16 "
                                          "scales); with e4m3 activations (per-token scales): mxfp4_w4a8, "
                                          "int4_g128_w4a8 (int4_g128_w4a8_block128: scales per 128 k); with e2m1 activations (sm_120a/121a): mxfp4_w4a4; with f16 "
                                          "activations (f16 scales for INT4): mxfp4_f16, int4_g128_f16")
      ->capture_default_str();
  app.add_option("--tokens", o.tokens, "Token counts T (T > 64 is flagged prefill)")->capture_default_str();
  app.add_option("--profiles", o.profiles, "Device profiles (src/spec/device_profiles.cpp)")->capture_default_str();
  app.add_option("--out", o.out, "JSON result file (default bench/results/perf-model-<UTC date>.json)");
  app.add_option("--markdown", o.markdown, "Also write the Markdown tables (for the README) to this file");
  app.add_option("--cache-dir", o.cache_dir, "Kernel store to compile into and reuse (default: a private temporary)");
  app.add_option("--dump-sass", o.dump_sass, "Write each kernel's disassembly into this directory");
  CLI11_PARSE(app, argc, argv);
  return run(o);
}
