#pragma once
// Vector loads and stores with cache hints. PTX ISA: ld.global.nc.L1::no_allocate.v4.u32
// (read-only data streamed once), ld.shared.{u32,v2.u32,v4.u32}, st.global.v4.u32,
// st.global.v2.u32, st.global.cs.v2.u32.
// On the host these are plain copies.

#include "common/platform.cuh"

namespace moejit::prim {

struct u32x4 {
  u32 x, y, z, w;
};
struct u32x2 {
  u32 x, y;
};

#if MOEJIT_TARGET_DEVICE

MOEJIT_DEVICE u32x4 ld_global_stream_v4(const void* p) {
  u32x4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

MOEJIT_DEVICE u32x4 ld_shared_v4(const void* p) {
  u32x4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(static_cast<u32>(__cvta_generic_to_shared(p))));
  return v;
}

MOEJIT_DEVICE u32x2 ld_shared_v2(const void* p) {
  u32x2 v;
  asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];"
               : "=r"(v.x), "=r"(v.y)
               : "r"(static_cast<u32>(__cvta_generic_to_shared(p))));
  return v;
}

MOEJIT_DEVICE u32 ld_shared_u32(const void* p) {
  u32 v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(static_cast<u32>(__cvta_generic_to_shared(p))));
  return v;
}

MOEJIT_DEVICE void st_global_v4(void* p, u32x4 v) {
  asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

MOEJIT_DEVICE void st_global_v2(void* p, u32x2 v) {
  asm volatile("st.global.v2.u32 [%0], {%1,%2};" ::"l"(p), "r"(v.x), "r"(v.y) : "memory");
}

// Streaming store (evict first): output written once and not read again by this kernel.
MOEJIT_DEVICE void st_global_stream_v2(void* p, u32x2 v) {
  asm volatile("st.global.cs.v2.u32 [%0], {%1,%2};" ::"l"(p), "r"(v.x), "r"(v.y) : "memory");
}

#else

MOEJIT_DEVICE u32x4 ld_global_stream_v4(const void* p) {
  check_aligned(p, 16, "ld.global.nc.v4: address not 16-byte aligned");
  u32x4 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
MOEJIT_DEVICE u32x4 ld_shared_v4(const void* p) {
  check_aligned(p, 16, "ld.shared.v4: address not 16-byte aligned");
  check_shared(p, 16, "ld.shared.v4: address outside the block's shared memory");
  u32x4 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
MOEJIT_DEVICE u32x2 ld_shared_v2(const void* p) {
  check_aligned(p, 8, "ld.shared.v2: address not 8-byte aligned");
  check_shared(p, 8, "ld.shared.v2: address outside the block's shared memory");
  u32x2 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
MOEJIT_DEVICE u32 ld_shared_u32(const void* p) {
  check_aligned(p, 4, "ld.shared.u32: address not 4-byte aligned");
  check_shared(p, 4, "ld.shared.u32: address outside the block's shared memory");
  u32 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
MOEJIT_DEVICE void st_global_v4(void* p, u32x4 v) {
  check_aligned(p, 16, "st.global.v4: address not 16-byte aligned");
  __builtin_memcpy(p, &v, sizeof v);
}
MOEJIT_DEVICE void st_global_v2(void* p, u32x2 v) {
  check_aligned(p, 8, "st.global.v2: address not 8-byte aligned");
  __builtin_memcpy(p, &v, sizeof v);
}
MOEJIT_DEVICE void st_global_stream_v2(void* p, u32x2 v) {
  check_aligned(p, 8, "st.global.cs.v2: address not 8-byte aligned");
  __builtin_memcpy(p, &v, sizeof v);
}

#endif

}  // namespace moejit::prim
