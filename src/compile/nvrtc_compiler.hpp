#pragma once
// Compiles generated translation units to CUBIN with NVRTC, in process. Template headers are
// handed to NVRTC from memory under their logical names, so no path on disk reaches the
// compiler or the key. Thread-safe: every compile uses its own nvrtcProgram.

#include "compile/compiler.hpp"
#include "compile/nvrtc_library.hpp"

#include <string>
#include <vector>

namespace moejit {

struct NvrtcOptions {
  // NVRTC automatic precompiled headers (process-private). Does not change the binary, so it
  // is not part of the key. Off by default: for the routing-align kernel it saves ~3% of a
  // compile (bench/compile) while leaving PCH files behind in /tmp when a process is killed.
  // MOEJIT_NVRTC_PCH=1 turns it on.
  bool use_pch = false;
  // -lineinfo, for profilers (MOEJIT_LINEINFO=1); part of the key.
  bool lineinfo = false;
};

// The options one compile passes to NVRTC, in two lists: those that change the CUBIN (which are
// also the key's flags, so the key can never miss one) and those that do not (the resource
// report, precompiled headers, NVRTC's own cache).
struct NvrtcCommandLine {
  std::vector<std::string> binary;
  std::vector<std::string> other;
};

class NvrtcCompiler final : public KernelCompiler {
 public:
  // Options from the environment (MOEJIT_NVRTC_PCH, MOEJIT_LINEINFO).
  static Result<NvrtcOptions> options_from_environment();
  // Loads NVRTC if needed; an error when it is missing.
  static Result<std::unique_ptr<NvrtcCompiler>> create(NvrtcOptions options);

  const std::string& identity() const override { return library_->identity(); }
  // The binary options, space-separated.
  std::string key_flags(const KernelSpec& spec) const override;
  NvrtcCommandLine command_line(const KernelSpec& spec) const;
  Result<CompiledKernel> compile(const codegen::GeneratedKernel& kernel,
                                 const codegen::TemplateSet& templates,
                                 const KernelSpec& spec) const override;

  const NvrtcOptions& options() const { return options_; }

 private:
  NvrtcCompiler(const NvrtcLibrary* library, NvrtcOptions options)
      : library_(library), options_(options) {}

  const NvrtcLibrary* library_;
  NvrtcOptions options_;
};

}  // namespace moejit
