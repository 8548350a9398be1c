#pragma once
// Atomics and reductions. PTX ISA: red.shared.add.u32 (no result), atom.shared.add.u32.

#include "common/platform.cuh"

namespace moejit::prim {

MOEJIT_DEVICE u32 shared_address(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// *p += v on a shared-memory word, without returning the old value.
MOEJIT_DEVICE void shared_red_add(u32* p, u32 v) {
  asm volatile("red.shared.add.u32 [%0], %1;" ::"r"(shared_address(p)), "r"(v) : "memory");
}

}  // namespace moejit::prim
