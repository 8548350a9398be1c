#include "kernels/kernel_def.hpp"

#include "kernels/act_quantize.hpp"
#include "kernels/grouped_gemm.hpp"
#include "kernels/moe_align.hpp"
#include "kernels/moe_reduce.hpp"
#include "spec/spec_fields.hpp"

namespace moejit {

Result<const KernelDef*> find_kernel_def(Op op) {
  switch (op) {
    case Op::moe_align: return &kMoeAlignKernel;
    case Op::grouped_gemm: return &kGroupedGemmKernel;
    case Op::moe_reduce: return &kMoeReduceKernel;
    case Op::act_quantize: return &kActQuantizeKernel;
    case Op::none: break;
  }
  return error(Code::invalid_argument, "field 'op' = {}: expected moe_align, grouped_gemm, moe_reduce or act_quantize",
               to_string(op));
}

Status validate_spec(const KernelSpec& spec) {
  for (const auto& f : spec_fields()) {
    if (f.is_enum() && f.get(spec) >= f.value_names.size())
      return error(Code::invalid_argument, "field '{}' holds the unknown value {}", f.name, f.get(spec));
  }
  if (spec.arch == Arch::none)
    return error(Code::invalid_argument, "field 'arch' is not set: expected one of sm_80 ... sm_121a");
  if (spec.backend == Backend::none)
    return error(Code::invalid_argument, "field 'backend' is not set: expected device or host");
  if (spec.op == Op::none)
    return error(Code::invalid_argument, "field 'op' is not set: expected moe_align, grouped_gemm, moe_reduce or act_quantize");
  MOEJIT_ASSIGN_OR_RETURN(const KernelDef* def, find_kernel_def(spec.op));
  return def->validate_fields(spec);
}

}  // namespace moejit
