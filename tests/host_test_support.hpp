#pragma once
// Helpers for the host backend suites (header-only, so the suites need no CMake entry): small
// test kernels compiled from templates the test writes, and their launch.
//
// A test kernel is a template file that includes "hosttest/params.cuh" and defines
// `template <class Spec> MOEJIT_GLOBAL void moejit::kernels::<name>(hosttest::Params)`. It is
// generated through codegen's own path (generate_from_def), so its translation unit has the
// same host entry points as a library kernel's.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codegen/generate.hpp"
#include "kernels/kernel_def.hpp"
#include "compile/host_compiler.hpp"
#include "host/launch.hpp"
#include "test_support.hpp"

namespace moejit::test {

// The params every test kernel takes; the template side declares the same layout.
struct HostTestParams {
  std::uint32_t* out = nullptr;
  const std::uint32_t* in = nullptr;
  std::uint32_t* flag = nullptr;
  std::uint32_t mode = 0;
  std::uint32_t n = 0;
};

inline const char* kHostTestParamsCuh = R"(#pragma once
#include "common/types.cuh"
namespace hosttest {
struct Params {
  moejit::u32* out;
  const moejit::u32* in;
  moejit::u32* flag;
  moejit::u32 mode;
  moejit::u32 n;
};
}  // namespace hosttest
)";

// The spec a test kernel is filed under: only its backend and arch matter (host; the arch bounds
// the dynamic shared memory a launch may ask for).
inline KernelSpec host_test_spec() {
  KernelSpec s = align_spec(8, 8, 1, Arch::sm_90a);
  s.backend = Backend::host;
  return s;
}

// Sets an environment variable for the life of the object, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// The host compiler, or null after toolchain_missing says why (the test skips, or fails where
// the toolchain is required).
inline std::unique_ptr<HostCompiler> host_compiler_or_skip() {
  auto options = HostCompiler::options_from_environment();
  if (!options.ok()) {
    toolchain_missing(options.status().message());
    return nullptr;
  }
  auto c = HostCompiler::create(*options);
  if (!c.ok()) {
    toolchain_missing("no host C++ compiler: " + c.status().message());
    return nullptr;
  }
  return std::move(c).value();
}

// The embedded templates plus hosttest/params.cuh and the test's own files (path -> text).
inline codegen::TemplateSet templates_with(std::map<std::string, std::string> files) {
  for (const auto& [path, text] : codegen::TemplateSet::embedded()->files())
    files.emplace(path, text);
  files["hosttest/params.cuh"] = kHostTestParamsCuh;
  return codegen::TemplateSet(std::move(files));
}

// The definition of a test kernel: `qualified_kernel` (e.g. "moejit::kernels::copy") in template
// file `entry`, taking hosttest::Params, with no constants and no checks. The strings must outlive
// the definition (string literals do). Threads and shared bytes are template arguments because
// KernelDef holds plain function pointers.
template <std::uint32_t Threads = 0, std::uint32_t SharedBytes = 0>
KernelDef test_kernel_def(std::string_view entry, std::string_view qualified_kernel) {
  return KernelDef{
      .entry = entry,
      .kernel = qualified_kernel,
      .params_type = "hosttest::Params",
      .validate_fields = [](const KernelSpec&) { return Status{}; },
      .check = [](const KernelSpec&) { return Status{}; },
      .constants = [](const KernelSpec&) { return std::vector<SpecConstant>{}; },
      .block_threads = [](const KernelSpec&) { return Threads; },
      .dynamic_shared_bytes = [](const KernelSpec&) { return SharedBytes; },
  };
}

// A compiled test kernel as launchers take it: a host shared object or a CUBIN (spec.backend).
inline ResolvedKernel resolved_test_kernel(const KernelSpec& spec, const codegen::GeneratedKernel& generated,
                                           CompiledKernel compiled, std::uint32_t block_threads,
                                           std::uint32_t shared_bytes) {
  ResolvedKernel k;
  k.spec = spec;
  k.key = xxh3_128(generated.source);
  k.meta.kind = spec.backend == Backend::host ? store::PayloadKind::host_shared_object : store::PayloadKind::cubin;
  k.meta.kernel_name = compiled.lowered_name;
  k.meta.block_threads = block_threads;
  k.meta.dynamic_shared_bytes = shared_bytes;
  k.binary = std::move(compiled.binary);
  return k;
}

// Compiles kernel `kernel` of template file `entry` (given in `files`, with hosttest/params.cuh
// and the embedded templates added) into a ResolvedKernel that launch_host_kernel accepts.
inline Result<ResolvedKernel> build_host_test_kernel(const HostCompiler& compiler,
                                                     std::map<std::string, std::string> files,
                                                     const std::string& entry,
                                                     const std::string& kernel,
                                                     std::uint32_t block_threads,
                                                     std::uint32_t shared_bytes) {
  const codegen::TemplateSet set = templates_with(std::move(files));
  const std::string qualified = "moejit::kernels::" + kernel;
  const KernelDef def = test_kernel_def(entry, qualified);
  const KernelSpec spec = host_test_spec();
  MOEJIT_ASSIGN_OR_RETURN(auto generated, codegen::generate_from_def(spec, def, set));
  MOEJIT_ASSIGN_OR_RETURN(CompiledKernel compiled, compiler.compile(generated, set, spec));
  return resolved_test_kernel(spec, generated, std::move(compiled), block_threads, shared_bytes);
}

inline HostLaunchShape shape_of(std::uint32_t blocks, std::uint32_t threads, std::uint32_t shared) {
  HostLaunchShape s;
  s.grid = {blocks, 1, 1};
  s.block = {threads, 1, 1};
  s.dynamic_shared_bytes = shared;
  return s;
}

inline Status launch_test_kernel(const ResolvedKernel& k, const HostTestParams& p,
                                 const HostLaunchShape& shape) {
  return launch_host_kernel(k, &p, sizeof p, shape);
}

inline bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

}  // namespace moejit::test
