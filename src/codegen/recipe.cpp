#include "codegen/recipe.hpp"

#include "spec/spec_fields.hpp"

namespace moejit::codegen {

Result<const KernelRecipe*> find_recipe(Op op) {
  switch (op) {
    case Op::moe_align: return &kMoeAlignRecipe;
    case Op::grouped_gemm: return &kGroupedGemmRecipe;
    case Op::moe_reduce: return &kMoeReduceRecipe;
    case Op::none: break;
  }
  return error(Code::unsupported, "field 'op' = {}: no kernel template for this op in this build",
               to_string(op));
}

}  // namespace moejit::codegen
