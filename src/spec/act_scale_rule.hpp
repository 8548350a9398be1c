#pragma once
// Which activation-scale granularity goes with which activation type: e4m3 activations carry f32
// scales per token or per 128 k, e2m1 ones E8M0 scales per 32 k, 16-bit ones none. One rule for
// the spec check (kernels/grouped_gemm.cpp), the fused op (dispatch/fused_moe_op.cpp) and the
// C ABI (api/api_support.cpp); each says it in its own vocabulary.

#include <string_view>

#include "spec/kernel_spec.hpp"

namespace moejit {

bool act_scale_fits(DType act, ActScale scale);

// The granularities that fit `act`, in spec names: "token or block128", "block32" or "none".
std::string_view act_scales_for(DType act);

}  // namespace moejit
