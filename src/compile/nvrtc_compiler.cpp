#include "compile/nvrtc_compiler.hpp"

#include <algorithm>
#include <chrono>
#include <memory>

#include <fmt/ranges.h>

#include "compile/ptxas_report.hpp"
#include "compile/source_dump.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"
#include "support/env.hpp"
#include "support/log.hpp"
#include "support/subprocess.hpp"

namespace moejit {
namespace {

struct ProgramDeleter {
  const NvrtcApi* api;
  void operator()(_nvrtcProgram* p) const { api->DestroyProgram(&p); }
};
using ProgramPtr = std::unique_ptr<_nvrtcProgram, ProgramDeleter>;

constexpr std::size_t kMaxLogBytes = std::size_t{1} << 20;

std::string program_log(const NvrtcApi& api, nvrtcProgram prog) {
  std::size_t size = 0;
  if (api.GetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  if (api.GetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return {};
  log.resize(size - 1);  // drop the terminating NUL
  // Carried into error messages and the store's logs: a template error repeated per
  // instantiation can run to megabytes.
  return clip_middle(std::move(log), kMaxLogBytes);
}

}  // namespace

Result<NvrtcOptions> NvrtcCompiler::options_from_environment() {
  NvrtcOptions o;
  MOEJIT_ASSIGN_OR_RETURN(o.use_pch, env_bool("MOEJIT_NVRTC_PCH", false));
  MOEJIT_ASSIGN_OR_RETURN(o.lineinfo, env_bool("MOEJIT_LINEINFO", false));
  return o;
}

Result<std::unique_ptr<NvrtcCompiler>> NvrtcCompiler::create(NvrtcOptions options) {
  MOEJIT_ASSIGN_OR_RETURN(const NvrtcLibrary* library, NvrtcLibrary::get());
  if (options.use_pch && !library->supports_pch()) options.use_pch = false;
  return std::unique_ptr<NvrtcCompiler>(new NvrtcCompiler(library, options));
}

NvrtcCommandLine NvrtcCompiler::command_line(const KernelSpec& spec) const {
  NvrtcCommandLine c;
  c.binary = {"-std=c++17", "-default-device", fmt::format("-arch={}", to_string(spec.arch))};
  if (options_.lineinfo) c.binary.emplace_back("-lineinfo");
  c.other = {"-Xptxas=-v"};  // the register / spill / shared memory report (compile/ptxas_report)
  if (options_.use_pch) c.other.emplace_back("-pch");
  if (library_->supports_no_cache()) c.other.emplace_back("-no-cache");
  return c;
}

std::string NvrtcCompiler::key_flags(const KernelSpec& spec) const {
  return fmt::format("{}", fmt::join(command_line(spec).binary, " "));
}

Result<CompiledKernel> NvrtcCompiler::compile(const codegen::GeneratedKernel& kernel,
                                              const codegen::TemplateSet& templates,
                                              const KernelSpec& spec) const {
  const NvrtcApi& api = library_->api();
  const ArchInfo& arch = arch_info(spec.arch);
  const auto& sms = library_->supported_sms();
  if (std::find(sms.begin(), sms.end(), arch.sm) == sms.end())
    return error(Code::unsupported, "field 'arch' = {}: NVRTC {}.{} at '{}' cannot target it",
                 arch.name, library_->major(), library_->minor(), library_->path());

  auto start = std::chrono::steady_clock::now();
  std::vector<const char*> header_names, header_sources;
  for (const auto& h : kernel.headers) {
    const std::string* text = templates.find(h);
    if (text == nullptr)
      return error(Code::internal, "template '{}' of {} vanished from its set", h,
                   kernel.source_name);
    header_names.push_back(h.c_str());
    header_sources.push_back(text->c_str());
  }
  nvrtcProgram raw = nullptr;
  nvrtcResult r = api.CreateProgram(&raw, kernel.source.c_str(), kernel.source_name.c_str(),
                                    static_cast<int>(header_names.size()), header_sources.data(),
                                    header_names.data());
  if (r != NVRTC_SUCCESS)
    return error(Code::internal, "nvrtcCreateProgram failed: {}", api.GetErrorString(r));
  ProgramPtr prog(raw, ProgramDeleter{&api});
  r = api.AddNameExpression(prog.get(), kernel.name_expression.c_str());
  if (r != NVRTC_SUCCESS)
    return error(Code::internal, "nvrtcAddNameExpression('{}') failed: {}",
                 kernel.name_expression, api.GetErrorString(r));

  const NvrtcCommandLine command = command_line(spec);
  std::vector<const char*> opts;
  for (const auto* list : {&command.binary, &command.other})
    for (const auto& o : *list) opts.push_back(o.c_str());

  r = api.CompileProgram(prog.get(), static_cast<int>(opts.size()), opts.data());
  CompiledKernel out;
  out.log = program_log(api, prog.get());
  if (r == NVRTC_ERROR_OUT_OF_MEMORY)  // the host's state, not the source's: not remembered
    return error(Code::unavailable, "NVRTC ran out of memory compiling {} for {}; the next call compiles it again",
                 kernel.source_name, arch.name);
  if (r != NVRTC_SUCCESS) {
    auto dumped = dump_sources(kernel, templates);
    return error(Code::compile_error, "NVRTC failed to compile {} for {} ({}):\n{}\nsource: {}",
                 kernel.source_name, arch.name, api.GetErrorString(r), out.log,
                 dumped.ok() ? *dumped : "not dumped: " + dumped.status().message());
  }
  if (dump_every_compile()) {
    if (auto dumped = dump_sources(kernel, templates); !dumped.ok())
      log(LogLevel::warn, "MOEJIT_DUMP_DIR: {}", dumped.status().message());
  }

  const char* lowered = nullptr;
  if (api.GetLoweredName(prog.get(), kernel.name_expression.c_str(), &lowered) != NVRTC_SUCCESS ||
      lowered == nullptr)
    return error(Code::internal, "NVRTC gave no lowered name for '{}'", kernel.name_expression);
  out.lowered_name = lowered;

  std::size_t size = 0;
  r = api.GetCUBINSize(prog.get(), &size);
  if (r != NVRTC_SUCCESS || size == 0)
    return error(Code::internal, "NVRTC gave no CUBIN for {} on {} ({}, {} bytes)",
                 kernel.source_name, arch.name, api.GetErrorString(r), size);
  out.binary.resize(size);
  r = api.GetCUBIN(prog.get(), out.binary.data());
  if (r != NVRTC_SUCCESS)
    return error(Code::internal, "nvrtcGetCUBIN for {} on {} failed: {}", kernel.source_name,
                 arch.name, api.GetErrorString(r));
  MOEJIT_ASSIGN_OR_RETURN(out.report, parse_ptxas_report(out.log, out.lowered_name));
  if (out.report.wgmma_serialized)
    log(LogLevel::warn, "{} for {}: ptxas serialized its wgmma's (correct, but none overlaps other work): {}",
        kernel.source_name, arch.name, out.report.wgmma_serialization);
  out.compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace moejit
