#pragma once
// NVRTC, loaded with dlopen at first use, so that moejit loads on machines where it is missing
// and reports that as a status rather than failing to start. Search order:
//   1. $MOEJIT_NVRTC_LIBRARY (a path; an error if it does not load),
//   2. libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so through the dynamic loader's search path,
//   3. the CUDA toolkit library directory found at build time, then /usr/local/cuda/lib64.

#include <nvrtc.h>

#include <string>
#include <vector>

#include "support/status.hpp"

namespace moejit {

struct NvrtcApi {
  decltype(&::nvrtcGetErrorString) GetErrorString;
  decltype(&::nvrtcVersion) Version;
  decltype(&::nvrtcGetNumSupportedArchs) GetNumSupportedArchs;
  decltype(&::nvrtcGetSupportedArchs) GetSupportedArchs;
  decltype(&::nvrtcCreateProgram) CreateProgram;
  decltype(&::nvrtcDestroyProgram) DestroyProgram;
  decltype(&::nvrtcCompileProgram) CompileProgram;
  decltype(&::nvrtcGetPTXSize) GetPTXSize;
  decltype(&::nvrtcGetPTX) GetPTX;
  decltype(&::nvrtcGetCUBINSize) GetCUBINSize;
  decltype(&::nvrtcGetCUBIN) GetCUBIN;
  decltype(&::nvrtcGetProgramLogSize) GetProgramLogSize;
  decltype(&::nvrtcGetProgramLog) GetProgramLog;
  decltype(&::nvrtcAddNameExpression) AddNameExpression;
  decltype(&::nvrtcGetLoweredName) GetLoweredName;
};

class NvrtcLibrary {
 public:
  // The process-wide library, loaded on first call; the error names every path tried.
  static Result<const NvrtcLibrary*> get();

  const NvrtcApi& api() const { return api_; }
  const std::string& path() const { return path_; }
  int major() const { return major_; }
  int minor() const { return minor_; }
  // Identity for keys: "nvrtc 13.0 V13.0.88 CL-36424714" — version, release build and
  // compiler build id, read from the header of a probe compile.
  const std::string& identity() const { return identity_; }
  // SM numbers this NVRTC can target (e.g. 80, 86, ..., 121).
  const std::vector<int>& supported_sms() const { return supported_sms_; }
  bool supports_no_cache() const { return major_ > 12 || (major_ == 12 && minor_ >= 9); }
  bool supports_pch() const { return major_ > 12 || (major_ == 12 && minor_ >= 8); }

 private:
  NvrtcLibrary() = default;
  static Result<const NvrtcLibrary*> load();
  Status probe_identity();

  void* handle_ = nullptr;
  NvrtcApi api_{};
  std::string path_;
  int major_ = 0;
  int minor_ = 0;
  std::string identity_;
  std::vector<int> supported_sms_;
};

}  // namespace moejit
