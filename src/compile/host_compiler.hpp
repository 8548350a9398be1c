#pragma once
// Compiles generated translation units for the host backend: the system C++ compiler turns the
// same kernel source NVRTC compiles into a shared object that the host executor (src/host/)
// loads and runs. The compiler runs in a private temporary directory laid out like the
// template root, with relative paths only, so no path on disk reaches the key or the binary.
//
// Registers, spills and the other resource figures of the report are 0 for host kernels: a C++
// compiler has no such report, and the host executor has no limits for them to check against.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "compile/compiler.hpp"

namespace moejit {

struct HostCompilerOptions {
  // Program to run: $MOEJIT_HOST_CXX, else "c++" (searched in PATH). One program, no arguments.
  // create() resolves it to an absolute path once: compiles run in a scratch directory, where
  // a relative name would mean something else.
  std::string cxx = "c++";
  // $MOEJIT_HOST_COMPILE_TIMEOUT_MS: longest run of one compile (or probe) before it is killed.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
};

class HostCompiler final : public KernelCompiler {
 public:
  static Result<HostCompilerOptions> options_from_environment();
  // Resolves the program (PATH, or the current directory for a relative path) and probes it
  // (`--version`, `-dumpmachine`) for its identity; an error naming MOEJIT_HOST_CXX when it
  // cannot be found or run.
  static Result<std::unique_ptr<HostCompiler>> create(HostCompilerOptions options);

  // "<first line of --version>; <-dumpmachine>".
  const std::string& identity() const override { return identity_; }
  std::string key_flags(const KernelSpec& spec) const override;
  Result<CompiledKernel> compile(const codegen::GeneratedKernel& kernel,
                                 const codegen::TemplateSet& templates,
                                 const KernelSpec& spec) const override;

  // The flags every host kernel is compiled with, in order; the key holds exactly these.
  static const std::vector<std::string>& flags();
  // Symbol of the entry in every host shared object.
  static constexpr const char* kEntrySymbol = "moejit_host_kernel";
  // The absolute path of the program compiles run.
  const std::string& program() const { return options_.cxx; }

 private:
  HostCompiler(HostCompilerOptions options, std::string identity)
      : options_(std::move(options)), identity_(std::move(identity)) {}

  HostCompilerOptions options_;
  std::string identity_;
};

}  // namespace moejit
