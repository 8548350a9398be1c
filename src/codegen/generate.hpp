#pragma once
// Spec + template set -> one translation unit: a macro naming the template closure's hash, the
// template's includes (so NVRTC's automatic PCH covers them and is shared by every spec of the
// op and arch), then the generated Spec struct of constexpr values, then an explicit
// instantiation of the kernel for that Spec. For the host backend the unit ends with the
// symbols the host executor looks up (common/host_runtime.cuh): the runtime pointer, an entry
// that runs the kernel for one thread, and the params size and ABI version it was built with.

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/template_set.hpp"
#include "kernels/kernel_def.hpp"
#include "spec/kernel_spec.hpp"
#include "support/hash.hpp"
#include "support/status.hpp"

namespace moejit::codegen {

struct GeneratedKernel {
  std::string entry;                // template entry, e.g. "moe/align.cuh"
  std::string source;               // the translation unit
  std::string source_name;          // file name NVRTC reports in diagnostics
  std::string name_expression;      // for nvrtcAddNameExpression
  std::vector<std::string> headers;  // include closure (logical paths), passed to NVRTC in memory
  Hash128 template_hash;            // content hash of the closure
  std::uint32_t block_threads = 0;
  std::uint32_t dynamic_shared_bytes = 0;
};

// Validates the spec (generic and template constraints) and generates its translation unit.
Result<GeneratedKernel> generate_kernel(const KernelSpec& spec, const TemplateSet& templates);

// The translation unit of `def` for `spec`, with the definition's own check but not
// validate_spec: for kernels that are not an op of the library (the host executor's tests).
Result<GeneratedKernel> generate_from_def(const KernelSpec& spec, const KernelDef& def, const TemplateSet& templates);

// A readable, file-name-safe name for a spec: "moe_align-e512-bm64-w32-sm_90a".
std::string spec_slug(const KernelSpec& spec);

}  // namespace moejit::codegen
