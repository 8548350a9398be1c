#pragma once
// Atomics and reductions. PTX ISA: red.shared.add.u32, atom.global.add.u32,
// red.global.add.f32, ld.acquire.gpu / st.release.gpu (flags between blocks).
// Host twins use the compiler's __atomic builtins: blocks run on several OS threads there.

#include "common/platform.cuh"

namespace moejit::prim {

#if MOEJIT_TARGET_DEVICE

MOEJIT_DEVICE u32 shared_address(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// *p += v on a shared-memory word, without returning the old value.
MOEJIT_DEVICE void shared_red_add(u32* p, u32 v) {
  asm volatile("red.shared.add.u32 [%0], %1;" ::"r"(shared_address(p)), "r"(v) : "memory");
}

// Returns the old value of the global word *p and adds v.
MOEJIT_DEVICE u32 global_atomic_add(u32* p, u32 v) {
  u32 old;
  asm volatile("atom.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

MOEJIT_DEVICE void global_red_add(float* p, float v) {
  asm volatile("red.global.add.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}

MOEJIT_DEVICE u32 load_acquire(const u32* p) {
  u32 v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

MOEJIT_DEVICE void store_release(u32* p, u32 v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

#else

MOEJIT_DEVICE void shared_red_add(u32* p, u32 v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
MOEJIT_DEVICE u32 global_atomic_add(u32* p, u32 v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
MOEJIT_DEVICE void global_red_add(float* p, float v) {
  float old;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  float sum = old + v;
  while (!__atomic_compare_exchange(p, &old, &sum, true, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
    sum = old + v;
}
MOEJIT_DEVICE u32 load_acquire(const u32* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
MOEJIT_DEVICE void store_release(u32* p, u32 v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }

#endif

}  // namespace moejit::prim
