// One numbering for every enum that crosses a boundary: the C ABI (include/moejit/moejit.h)
// hands its values to KernelSpec with a cast (src/api), and the templates receive KernelSpec's
// values as integers in the generated Spec struct (templates/common/kernel_enums.cuh). Changing
// one side without the others fails to compile here.

#include "common/kernel_enums.cuh"
#include "moejit/moejit.h"
#include "spec/kernel_spec.hpp"

namespace moejit {
namespace {

template <class E>
constexpr int value(E e) {
  return static_cast<int>(e);
}

// Weight formats.
static_assert(value(WeightFormat::mxfp4) == kernel_enum::mxfp4 && value(WeightFormat::mxfp4) == MOEJIT_WEIGHT_MXFP4);
static_assert(value(WeightFormat::int4_sym) == kernel_enum::int4_sym &&
              value(WeightFormat::int4_sym) == MOEJIT_WEIGHT_INT4_SYM);
static_assert(value(WeightFormat::int4_asym) == kernel_enum::int4_asym &&
              value(WeightFormat::int4_asym) == MOEJIT_WEIGHT_INT4_ASYM);

// Data types.
static_assert(value(DType::bf16) == kernel_enum::bf16 && value(DType::bf16) == MOEJIT_DTYPE_BF16);
static_assert(value(DType::f16) == kernel_enum::f16 && value(DType::f16) == MOEJIT_DTYPE_F16);
static_assert(value(DType::f32) == kernel_enum::f32 && value(DType::f32) == MOEJIT_DTYPE_F32);
static_assert(value(DType::e4m3) == kernel_enum::e4m3 && value(DType::e4m3) == MOEJIT_DTYPE_E4M3);
static_assert(value(DType::e8m0) == kernel_enum::e8m0 && value(DType::e8m0) == MOEJIT_DTYPE_E8M0);
static_assert(value(DType::e2m1) == kernel_enum::e2m1 && value(DType::e2m1) == MOEJIT_DTYPE_E2M1);

// MoE layouts.
static_assert(value(Layout::indexed) == kernel_enum::indexed && value(Layout::indexed) == MOEJIT_LAYOUT_INDEXED);
static_assert(value(Layout::contiguous) == kernel_enum::contiguous &&
              value(Layout::contiguous) == MOEJIT_LAYOUT_CONTIGUOUS);
static_assert(value(Layout::masked) == kernel_enum::masked && value(Layout::masked) == MOEJIT_LAYOUT_MASKED);

// Epilogues.
static_assert(value(Epilogue::none) == kernel_enum::none && value(Epilogue::none) == MOEJIT_EPILOGUE_NONE);
static_assert(value(Epilogue::silu_and_mul) == kernel_enum::silu_and_mul &&
              value(Epilogue::silu_and_mul) == MOEJIT_EPILOGUE_SILU_AND_MUL);
static_assert(value(Epilogue::swiglu_oai) == kernel_enum::swiglu_oai &&
              value(Epilogue::swiglu_oai) == MOEJIT_EPILOGUE_SWIGLU_OAI);
static_assert(value(Epilogue::topk_weight) == kernel_enum::topk_weight &&
              value(Epilogue::topk_weight) == MOEJIT_EPILOGUE_TOPK_WEIGHT);

// Activation scales.
static_assert(value(ActScale::none) == MOEJIT_ACT_SCALE_NONE);
static_assert(value(ActScale::token) == kernel_enum::act_scale_token && value(ActScale::token) == MOEJIT_ACT_SCALE_TOKEN);
static_assert(value(ActScale::block128) == kernel_enum::act_scale_block128 &&
              value(ActScale::block128) == MOEJIT_ACT_SCALE_BLOCK128);
static_assert(value(ActScale::block32) == kernel_enum::act_scale_block32 &&
              value(ActScale::block32) == MOEJIT_ACT_SCALE_BLOCK32);
// Backends: the ABI's AUTO (0) is resolved before a spec is built, where 0 means "not set".
static_assert(value(Backend::device) == MOEJIT_BACKEND_DEVICE && value(Backend::host) == MOEJIT_BACKEND_HOST);

}  // namespace
}  // namespace moejit
