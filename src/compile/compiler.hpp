#pragma once
// The interface every backend's compiler implements: generated source in, binary out, with the
// identity and flags that go into the key.

#include <cstdint>
#include <string>

#include "codegen/generate.hpp"
#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit {

// Resource usage of the compiled kernel, from the compiler's report.
struct KernelReport {
  std::uint32_t registers = 0;
  std::uint32_t spill_store_bytes = 0;
  std::uint32_t spill_load_bytes = 0;
  std::uint32_t stack_bytes = 0;
  std::uint32_t static_shared_bytes = 0;
  std::uint32_t barriers = 0;
  // ptxas serialized the kernel's wgmma.mma_async's (its C7511/C7515 "Potential Performance
  // Loss"): each waits for the last, so none overlaps the code around it. Correct, and slow.
  bool wgmma_serialized = false;
  // Why, as ptxas says it with its code ("C7511: insufficient register resources for the wgmma
  // pipeline"); empty where not serialized.
  std::string wgmma_serialization;
};

struct CompiledKernel {
  std::string binary;        // CUBIN (device) or shared object (host)
  std::string lowered_name;  // symbol of the kernel in `binary`
  KernelReport report;
  double compile_ms = 0;
  std::string log;           // compiler diagnostics, possibly empty
};

class KernelCompiler {
 public:
  virtual ~KernelCompiler() = default;
  // Compiler identity for keys (name, version, build).
  virtual const std::string& identity() const = 0;
  // Normalized flags for keys: everything that changes the binary, no absolute paths.
  virtual std::string key_flags(const KernelSpec& spec) const = 0;
  virtual Result<CompiledKernel> compile(const codegen::GeneratedKernel& kernel,
                                         const codegen::TemplateSet& templates,
                                         const KernelSpec& spec) const = 0;
};

}  // namespace moejit
