#include "compile/nvrtc_library.hpp"

#include <dlfcn.h>
#include <link.h>

#include <fmt/format.h>

#include <mutex>
#include <string_view>

#include "support/env.hpp"

#ifndef MOEJIT_CUDA_LIBRARY_DIR
#define MOEJIT_CUDA_LIBRARY_DIR "/usr/local/cuda/lib64"
#endif

namespace moejit {
namespace {

// The first line of `text` that starts with `prefix`, without the prefix.
std::string_view line_after(std::string_view text, std::string_view prefix) {
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (line.starts_with(prefix)) return line.substr(prefix.size());
    pos = end + 1;
  }
  return {};
}

}  // namespace

Result<const NvrtcLibrary*> NvrtcLibrary::get() {
  static Result<const NvrtcLibrary*> instance = load();
  return instance;
}

Result<const NvrtcLibrary*> NvrtcLibrary::load() {
  std::vector<std::string> candidates;
  if (auto explicit_path = env_string("MOEJIT_NVRTC_LIBRARY")) {
    candidates.push_back(*explicit_path);
  } else {
    candidates = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                  MOEJIT_CUDA_LIBRARY_DIR "/libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so"};
  }
  std::string tried;
  void* handle = nullptr;
  for (const auto& c : candidates) {
    handle = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) break;
    const char* why = ::dlerror();
    tried += fmt::format("\n  {}: {}", c, why ? why : "not loadable");
  }
  if (handle == nullptr)
    return error(Code::unavailable,
                 "NVRTC not found; tried:{}\nInstall the CUDA toolkit's NVRTC or set "
                 "MOEJIT_NVRTC_LIBRARY to the path of libnvrtc.so",
                 tried);

  auto* lib = new NvrtcLibrary();  // lives for the process: NVRTC is never unloaded
  lib->handle_ = handle;
  link_map* map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr)
    lib->path_ = map->l_name;

  std::string missing;
  auto bind = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(handle, name));
    if (fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  NvrtcApi& a = lib->api_;
  bind(a.GetErrorString, "nvrtcGetErrorString");
  bind(a.Version, "nvrtcVersion");
  bind(a.GetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
  bind(a.GetSupportedArchs, "nvrtcGetSupportedArchs");
  bind(a.CreateProgram, "nvrtcCreateProgram");
  bind(a.DestroyProgram, "nvrtcDestroyProgram");
  bind(a.CompileProgram, "nvrtcCompileProgram");
  bind(a.GetPTXSize, "nvrtcGetPTXSize");
  bind(a.GetPTX, "nvrtcGetPTX");
  bind(a.GetCUBINSize, "nvrtcGetCUBINSize");
  bind(a.GetCUBIN, "nvrtcGetCUBIN");
  bind(a.GetProgramLogSize, "nvrtcGetProgramLogSize");
  bind(a.GetProgramLog, "nvrtcGetProgramLog");
  bind(a.AddNameExpression, "nvrtcAddNameExpression");
  bind(a.GetLoweredName, "nvrtcGetLoweredName");
  if (!missing.empty())
    return error(Code::unavailable, "NVRTC at '{}' lacks {} (moejit needs NVRTC 12.0 or newer)",
                 lib->path_, missing);

  a.Version(&lib->major_, &lib->minor_);
  int n = 0;
  a.GetNumSupportedArchs(&n);
  lib->supported_sms_.resize(static_cast<std::size_t>(n));
  a.GetSupportedArchs(lib->supported_sms_.data());
  MOEJIT_TRY(lib->probe_identity());
  return static_cast<const NvrtcLibrary*>(lib);
}

Status NvrtcLibrary::probe_identity() {
  nvrtcProgram prog = nullptr;
  if (api_.CreateProgram(&prog, "__global__ void moejit_probe() {}", "probe.cu", 0, nullptr,
                         nullptr) != NVRTC_SUCCESS)
    return error(Code::unavailable, "NVRTC at '{}' cannot create a program", path_);
  const char* options[] = {"-arch=compute_80"};
  nvrtcResult r = api_.CompileProgram(prog, 1, options);
  std::string ptx;
  if (r == NVRTC_SUCCESS) {
    std::size_t size = 0;
    api_.GetPTXSize(prog, &size);
    ptx.resize(size);
    api_.GetPTX(prog, ptx.data());
  }
  api_.DestroyProgram(&prog);
  if (r != NVRTC_SUCCESS)
    return error(Code::unavailable, "NVRTC at '{}' cannot compile a trivial program: {}", path_,
                 api_.GetErrorString(r));
  // "// Cuda compilation tools, release 13.0, V13.0.88" and "// Compiler Build ID: CL-36424714"
  std::string_view release = line_after(ptx, "// Cuda compilation tools, release ");
  std::string_view build = line_after(ptx, "// Compiler Build ID: ");
  if (auto comma = release.find(", "); comma != std::string_view::npos)
    release = release.substr(comma + 2);
  identity_ = fmt::format("nvrtc {}.{} {} {}", major_, minor_,
                          release.empty() ? "unknown-release" : release,
                          build.empty() ? "unknown-build" : build);
  return {};
}

}  // namespace moejit
