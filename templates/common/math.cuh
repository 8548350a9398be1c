#pragma once
// Transcendental functions for epilogues. PTX ISA: ex2.approx.f32 (2^x, relative error about
// 2^-22, subnormals kept), rcp.approx.f32. The host twins compute the exact functions, so device
// results may differ from them in the last bits.

#include "common/platform.cuh"

namespace moejit::prim {

inline constexpr float kLog2e = 1.4426950408889634f;

#if MOEJIT_TARGET_DEVICE

MOEJIT_DEVICE float exp2_approx(float x) {
  float y;
  asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

#else

MOEJIT_DEVICE float exp2_approx(float x) { return __builtin_exp2f(x); }

#endif

MOEJIT_DEVICE float exp_approx(float x) { return exp2_approx(x * kLog2e); }

// 1 / (1 + e^-x); saturates cleanly to 0 and 1 for large |x|.
MOEJIT_DEVICE float sigmoid(float x) { return 1.0f / (1.0f + exp_approx(-x)); }

}  // namespace moejit::prim
