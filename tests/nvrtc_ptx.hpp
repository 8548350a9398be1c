#pragma once
// The PTX NVRTC makes of a generated kernel, for tests that check which instructions a
// primitive lowers to on a target.

#include <string>
#include <vector>

#include "codegen/generate.hpp"
#include "codegen/template_set.hpp"
#include "compile/nvrtc_library.hpp"
#include "support/status.hpp"

namespace moejit::test {

// The PTX NVRTC generates for the translation unit of `spec` at virtual architecture
// `compute_arch` (e.g. "compute_90a"), with the flags moejit compiles with otherwise.
inline Result<std::string> ptx_for(const codegen::GeneratedKernel& g, const codegen::TemplateSet& set,
                            const std::string& compute_arch) {
  MOEJIT_ASSIGN_OR_RETURN(const NvrtcLibrary* library, NvrtcLibrary::get());
  const NvrtcApi& api = library->api();
  std::vector<const char*> names, sources;
  for (const auto& h : g.headers) {
    names.push_back(h.c_str());
    sources.push_back(set.find(h)->c_str());
  }
  nvrtcProgram prog = nullptr;
  if (api.CreateProgram(&prog, g.source.c_str(), g.source_name.c_str(), static_cast<int>(names.size()),
                        sources.data(), names.data()) != NVRTC_SUCCESS)
    return error(Code::internal, "nvrtcCreateProgram failed");
  const std::string arch_flag = "-arch=" + compute_arch;
  const char* opts[] = {"-std=c++17", "-default-device", arch_flag.c_str()};
  api.AddNameExpression(prog, g.name_expression.c_str());
  const nvrtcResult r = api.CompileProgram(prog, 3, opts);
  std::string ptx;
  if (r == NVRTC_SUCCESS) {
    std::size_t size = 0;
    api.GetPTXSize(prog, &size);
    ptx.resize(size);
    api.GetPTX(prog, ptx.data());
  } else {
    std::size_t size = 0;
    api.GetProgramLogSize(prog, &size);
    ptx.resize(size);
    api.GetProgramLog(prog, ptx.data());
  }
  api.DestroyProgram(&prog);
  if (r != NVRTC_SUCCESS) return error(Code::compile_error, "NVRTC failed for {}:\n{}", compute_arch, ptx);
  return ptx;
}

}  // namespace moejit::test
