#pragma once
// The compile-time choices a generated Spec struct carries (weight format, dtypes, layout,
// epilogue), numbered as the host's KernelSpec enums (src/spec/kernel_spec.hpp) and the C ABI's
// (include/moejit/moejit.h); src/kernels/enum_numbering.cpp holds the static_asserts that keep
// the three in step. Plain C++, no device code: every template and the host library include it.

namespace moejit {
namespace kernel_enum {
inline constexpr int mxfp4 = 1, int4_sym = 2, int4_asym = 3;                       // weight
inline constexpr int bf16 = 1, f16 = 2, f32 = 3, e4m3 = 4, e8m0 = 5, e2m1 = 6;      // dtypes
inline constexpr int indexed = 1, contiguous = 2, masked = 3;                       // layout
inline constexpr int none = 0, silu_and_mul = 1, swiglu_oai = 2, topk_weight = 3;  // epilogue
inline constexpr int act_scale_token = 1, act_scale_block128 = 2, act_scale_block32 = 3;  // act_scale
}  // namespace kernel_enum
}  // namespace moejit
