#pragma once
// Warpgroup MMA of sm_90a (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"),
// with A from registers and B from shared memory:
//   wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16.bf16,f16.f16}   {d}, {a}, b-desc, p, 1, 1, 0
//   wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3             {d}, {a}, b-desc, p, 1, 1
//   wgmma.fence.sync.aligned, wgmma.commit_group.sync.aligned, wgmma.wait_group.sync.aligned n
//   fence.proxy.async.shared::cta
// N is 8, 16, 32, 64, 128 or 256 here. The four warps of a warpgroup (128 consecutive threads,
// the first a multiple of 128) compute D (64 x N, f32) = A (64 x K) * B (K x N) + D together.
// Warp w of the group holds rows 16w .. 16w + 15 of A and of D, in mma.sync's fragments
// (common/mma.cuh): A as m16n8k16's A (m16n8k32's for e4m3), D as N/8 of m16n8's C fragments
// side by side, d[4j .. 4j + 3] covering columns 8j .. 8j + 7. So a warp's rows of D depend only
// on its own A registers and on B, which is what the host twin uses.
//
// B is read through a 64-bit matrix descriptor (make_wgmma_descriptor): "K-major", each of the
// N columns with its K elements at increasing addresses, grouped in core matrices of 8 columns
// x 16 bytes. Three layouts are supported (WgmmaLayout), element (k, n) of e bytes at:
//   interleave: start + (n / 8) * SBO + (k * e / 16) * LBO + (n % 8) * 16 + (k * e) % 16
//   swizzle_128b: x = start + (n / 8) * SBO + (n % 8) * 128 + k * e, then bits 4-6 of the
//                 address XOR bits 7-9: x ^ ((x >> 7) & 7) << 4. The pattern follows absolute
//                 shared-window addresses, so 8-column groups must start 1024-byte aligned;
//                 a k step within the 128-byte row moves `start` by k * e bytes.
//   swizzle_64b: the same with 64-byte rows: x = start + (n / 8) * SBO + (n % 8) * 64 + k * e,
//                then bits 4-5 XOR bits 7-8: x ^ ((x >> 7) & 3) << 4; 8-column groups start
//                512-byte aligned.
//
// Asynchrony. The MMA runs after the instruction issues: its accumulators may not be read or
// written, nor B overwritten, until a wgmma.wait_group completes its group; the A registers
// may not be changed before either. wgmma.fence must come before the first wgmma and after
// any other write to registers a wgmma then reads; shared memory written by ordinary stores
// or cp.async must pass fence.proxy.async before a wgmma reads it.
//
// The host twin queues the MMA (host_runtime.cuh's mma_async) and performs it when the wait
// completes its group. It checks what the device leaves undefined and would race on:
//   - accumulators are poisoned (the quiet NaN kWgmmaPoison) from issue until the last wgmma
//     in flight on them completes, so a read before the wait shows; a wgmma issued on
//     accumulators with one in flight chains on it (as consecutive wgmmas into the same
//     registers do on the device) and takes its D as C, kept by the twin meanwhile (the
//     thread's table of accumulators in flight, in host_runtime.cuh's thread_scratch). An
//     accumulator found holding something else than the poison then (written in flight) is a
//     trap, at a chained issue and at every completion;
//   - B is read at issue and again at the wait: a change in between traps;
//   - b-desc and the accumulate flag must agree across the warp; the layout must be one of the
//     three above, the operand inside the block's shared memory, and the base offset 0.
// It sums each output exactly in double and rounds once to f32, like mma.sync's twin; the
// hardware's order and precision of the sum are unspecified, so device results may differ
// from the twin in the low bits of f32. Fences are no-ops on the host, which runs each thread
// in program order with one coherent memory.

#include "common/mma.cuh"

namespace moejit::prim {

enum class WgmmaLayout : u32 { interleave = 0, swizzle_128b = 1, swizzle_64b = 2 };

// The shared-window address of `p` (the address space wgmma descriptors and the swizzle refer
// to). On the host: its offset in the block's dynamic shared memory.
#if MOEJIT_TARGET_DEVICE
MOEJIT_DEVICE u32 shared_window_address(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}
#else
MOEJIT_DEVICE u32 shared_window_address(const void* p) {
  check_shared(p, 1, "shared_window_address: the pointer is outside the block's shared memory");
  return static_cast<u32>(static_cast<const unsigned char*>(p) - self().dynamic_shared);
}
#endif

// PTX ISA "Matrix Descriptor Format": bits 0-13 the start address >> 4, 16-29 the leading
// dimension byte offset (LBO, between core matrices adjacent in K) >> 4, 32-45 the stride
// dimension byte offset (SBO, between core matrices adjacent in N) >> 4, 49-51 the base offset
// (0 here), 62-63 the layout (0 interleave, 1 128-byte swizzle, 2 64-byte swizzle). Addresses and offsets are
// multiples of 16 below 256 KiB.
MOEJIT_DEVICE u64 make_wgmma_descriptor(u32 start, u32 lbo, u32 sbo, WgmmaLayout layout) {
  return static_cast<u64>((start >> 4) & 0x3FFFu) | static_cast<u64>((lbo >> 4) & 0x3FFFu) << 16 |
         static_cast<u64>((sbo >> 4) & 0x3FFFu) << 32 | static_cast<u64>(layout) << 62;
}

namespace twin {

// The accumulators' value while an MMA is in flight: a quiet NaN a kernel would not compute.
inline constexpr u32 kWgmmaPoison = 0x7FC0BADCu;

struct WgmmaDescriptor {
  u32 start, lbo, sbo, base_offset, layout;
};

constexpr WgmmaDescriptor decode_wgmma_descriptor(u64 d) {
  return {static_cast<u32>(d & 0x3FFFu) << 4, static_cast<u32>(d >> 16 & 0x3FFFu) << 4,
          static_cast<u32>(d >> 32 & 0x3FFFu) << 4, static_cast<u32>(d >> 49 & 7u),
          static_cast<u32>(d >> 62)};
}

// The shared-window address of byte `byte` (0 .. 15 for 16-bit types, one core-matrix row) of
// K-major B's column n, at k offset `k_bytes` (k * element size) from the descriptor's start.
constexpr u32 wgmma_b_address(const WgmmaDescriptor& d, u32 n, u32 k_bytes) {
  if (d.layout == static_cast<u32>(WgmmaLayout::interleave))
    return d.start + (n / 8) * d.sbo + (k_bytes / 16) * d.lbo + (n % 8) * 16 + k_bytes % 16;
  // A swizzled row is 128 or 64 bytes: its 16-byte chunks (8 or 4) XOR the row's index in the
  // 1024- or 512-byte pattern, bits 7 and up.
  const u32 row = d.layout == static_cast<u32>(WgmmaLayout::swizzle_64b) ? 64u : 128u;
  const u32 x = d.start + (n / 8) * d.sbo + (n % 8) * row + k_bytes;
  return x ^ ((x >> 7) & (row / 16 - 1)) << 4;
}

#if MOEJIT_TARGET_HOST

// The accumulators of a thread with wgmmas in flight on them: D of the last one completed,
// which the next takes as C (the registers themselves hold the poison meanwhile).
inline constexpr u32 kWgmmaChains = 8;
struct WgmmaChain {
  float* d;       // the accumulators (nullptr: a free entry)
  u32 pending;    // wgmmas in flight on them
  u32 count;      // N / 2
  float carry[128];
};
struct WgmmaChains {
  WgmmaChain chain[kWgmmaChains];
};

inline WgmmaChains& wgmma_chains() {
  return *static_cast<WgmmaChains*>(moejit_host_runtime->thread_scratch(sizeof(WgmmaChains)));
}
inline WgmmaChain* find_wgmma_chain(WgmmaChains& all, const float* d) {
  for (WgmmaChain& c : all.chain)
    if (c.d == d) return &c;
  return nullptr;
}

// What one thread's MMA needs when its group completes.
template <u32 N>
struct WgmmaPending {
  float* d;                      // the thread's accumulators (N / 2)
  const unsigned char* shared;   // the block's shared memory and its size
  u32 shared_bytes;
  u32 lane;
  MmaInput in;
  u32 accumulate;                // 0: D = A * B, else D = A * B + D (C: the chain's carry)
  u64 b_desc;
  u32 a_rows[2][8];              // rows g and g + 8 of the warp's A: 32 bytes of K each
  u8 b_columns[N / 4][32];       // B's columns 8j + 2t, 8j + 2t + 1 (j < N / 8) at issue
};

// Gathers the B columns lane `lane` reads; nullptr, or why they cannot be read.
template <u32 N>
const char* wgmma_gather_b(const WgmmaPending<N>& p, u8 (&out)[N / 4][32]) {
  const WgmmaDescriptor d = decode_wgmma_descriptor(p.b_desc);
  if (d.base_offset != 0) return "wgmma: the B descriptor's base offset is not 0";
  if (d.layout > 2) return "wgmma: the B descriptor's layout is the 32-byte swizzle";
  for (u32 c = 0; c < N / 4; ++c) {
    const u32 n = 8 * (c / 2) + 2 * (p.lane % 4) + c % 2;
    for (u32 kb = 0; kb < 32; kb += 16) {
      const u32 at = wgmma_b_address(d, n, kb);
      if (at + 16 > p.shared_bytes)
        return "wgmma: B reaches past the block's shared memory (descriptor start, LBO or SBO)";
      for (u32 i = 0; i < 16; ++i) out[c][kb + i] = p.shared[at + i];
    }
  }
  return nullptr;
}

inline bool wgmma_poisoned(const float* d, u32 count) {
  for (u32 i = 0; i < count; ++i)
    if (f32_bits(d[i]) != kWgmmaPoison) return false;
  return true;
}

inline constexpr const char* kWgmmaWrittenInFlight =
    "wgmma: an accumulator was written while a wgmma.mma_async on it was in flight";

// The queued operation: checks that nothing changed while in flight, then computes D from the
// chain's carry; the last of the chain writes it to the accumulators.
template <u32 N>
const char* wgmma_complete(void* ctx) {
  const WgmmaPending<N>& p = *static_cast<const WgmmaPending<N>*>(ctx);
  WgmmaChain* chain = find_wgmma_chain(wgmma_chains(), p.d);
  if (chain == nullptr || chain->pending == 0) return "wgmma: internal: no chain for a completing wgmma";
  if (!wgmma_poisoned(p.d, N / 2)) return kWgmmaWrittenInFlight;
  u8 b[N / 4][32];
  if (const char* failed = wgmma_gather_b(p, b)) return failed;
  for (u32 c = 0; c < N / 4; ++c)
    for (u32 i = 0; i < 32; ++i)
      if (b[c][i] != p.b_columns[c][i])
        return "wgmma: shared memory B changed between wgmma.mma_async and the wait that "
               "completed it";
  const bool e4m3 = p.in == MmaInput::e4m3;
  const u32 k = e4m3 ? 32 : 16, bytes = e4m3 ? 1 : 2;
  auto element = [&](const u8* row, u32 kk) {
    const u32 word = static_cast<u32>(row[kk * bytes]) | (bytes == 2 ? static_cast<u32>(row[kk * 2 + 1]) << 8 : 0);
    return mma_element(p.in, word, 0);
  };
  for (u32 i = 0; i < N / 2; ++i) {
    // d[4j + r]: row g + 8 (r / 2) of the warp's slice, column 8j + 2t + r % 2.
    const u32 r = i % 4, c = 2 * (i / 4) + r % 2;
    const u8* a = reinterpret_cast<const u8*>(p.a_rows[r / 2]);
    double sum = p.accumulate ? chain->carry[i] : 0.0;
    for (u32 kk = 0; kk < k; ++kk) sum += element(a, kk) * element(p.b_columns[c], kk);
    chain->carry[i] = static_cast<float>(sum);
  }
  if (--chain->pending == 0) {
    for (u32 i = 0; i < N / 2; ++i) p.d[i] = chain->carry[i];
    chain->d = nullptr;
  }
  return nullptr;
}

#endif

}  // namespace twin

#if MOEJIT_TARGET_DEVICE && ((defined(__CUDA_ARCH_SPECIFIC__) && __CUDA_ARCH_SPECIFIC__ == 900) || \
                             defined(__CUDA_ARCH_FEAT_SM90_ALL))

// Operand lists: N / 2 accumulators, then A's 4 registers and b-desc; the accumulate flag
// follows as the predicate's source.
#define MOEJIT_WGMMA_OPERANDS_8 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, %8"
#define MOEJIT_WGMMA_PREDICATE_8 "%9"
#define MOEJIT_WGMMA_OPERANDS_16 "{%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12"
#define MOEJIT_WGMMA_PREDICATE_16 "%13"
#define MOEJIT_WGMMA_OPERANDS_32                                                         \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20"
#define MOEJIT_WGMMA_PREDICATE_32 "%21"
#define MOEJIT_WGMMA_OPERANDS_64                                                         \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23," \
  "%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36"
#define MOEJIT_WGMMA_PREDICATE_64 "%37"
#define MOEJIT_WGMMA_OPERANDS_128                                                        \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23," \
  "%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45," \
  "%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, "              \
  "{%64,%65,%66,%67}, %68"
#define MOEJIT_WGMMA_PREDICATE_128 "%69"
#define MOEJIT_WGMMA_OPERANDS_256                                                        \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23," \
  "%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45," \
  "%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67," \
  "%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89," \
  "%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,"    \
  "%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,"    \
  "%126,%127}, {%128,%129,%130,%131}, %132"
#define MOEJIT_WGMMA_PREDICATE_256 "%133"

#define MOEJIT_WGMMA_F4(b) "+f"(d[(b)]), "+f"(d[(b) + 1]), "+f"(d[(b) + 2]), "+f"(d[(b) + 3])
#define MOEJIT_WGMMA_F8(b) MOEJIT_WGMMA_F4(b), MOEJIT_WGMMA_F4((b) + 4)
#define MOEJIT_WGMMA_F16(b) MOEJIT_WGMMA_F8(b), MOEJIT_WGMMA_F8((b) + 8)
#define MOEJIT_WGMMA_F32(b) MOEJIT_WGMMA_F16(b), MOEJIT_WGMMA_F16((b) + 16)
#define MOEJIT_WGMMA_F64(b) MOEJIT_WGMMA_F32(b), MOEJIT_WGMMA_F32((b) + 32)
#define MOEJIT_WGMMA_F128(b) MOEJIT_WGMMA_F64(b), MOEJIT_WGMMA_F64((b) + 64)
#define MOEJIT_WGMMA_ACCUMULATORS_8 MOEJIT_WGMMA_F4(0)
#define MOEJIT_WGMMA_ACCUMULATORS_16 MOEJIT_WGMMA_F8(0)
#define MOEJIT_WGMMA_ACCUMULATORS_32 MOEJIT_WGMMA_F16(0)
#define MOEJIT_WGMMA_ACCUMULATORS_64 MOEJIT_WGMMA_F32(0)
#define MOEJIT_WGMMA_ACCUMULATORS_128 MOEJIT_WGMMA_F64(0)
#define MOEJIT_WGMMA_ACCUMULATORS_256 MOEJIT_WGMMA_F128(0)

#define MOEJIT_WGMMA_ASM(N, SHAPE_TYPES, IMMEDIATES)                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, " MOEJIT_WGMMA_PREDICATE_##N                     \
               ", 0;\nwgmma.mma_async.sync.aligned.m64n" #N SHAPE_TYPES " " MOEJIT_WGMMA_OPERANDS_##N \
               ", p" IMMEDIATES ";\n}\n"                                                          \
               : MOEJIT_WGMMA_ACCUMULATORS_##N                                                    \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(accumulate)         \
               : "memory")

#define MOEJIT_WGMMA_DISPATCH(SHAPE_TYPES, IMMEDIATES)                                 \
  static_assert(N == 8 || N == 16 || N == 32 || N == 64 || N == 128 || N == 256,       \
                "wgmma: N must be 8, 16, 32, 64, 128 or 256");                         \
  if constexpr (N == 8) MOEJIT_WGMMA_ASM(8, SHAPE_TYPES, IMMEDIATES);                  \
  else if constexpr (N == 16) MOEJIT_WGMMA_ASM(16, SHAPE_TYPES, IMMEDIATES);           \
  else if constexpr (N == 32) MOEJIT_WGMMA_ASM(32, SHAPE_TYPES, IMMEDIATES);           \
  else if constexpr (N == 64) MOEJIT_WGMMA_ASM(64, SHAPE_TYPES, IMMEDIATES);           \
  else if constexpr (N == 128) MOEJIT_WGMMA_ASM(128, SHAPE_TYPES, IMMEDIATES);         \
  else MOEJIT_WGMMA_ASM(256, SHAPE_TYPES, IMMEDIATES)

// D (64 x N) = A (64 x 16) * B (16 x N) + (accumulate ? D : 0); scale-a and scale-b +1, B not
// transposed (K-major).
template <u32 N>
MOEJIT_DEVICE void wgmma_m64k16_bf16(float (&d)[N / 2], const u32 (&a)[4], u64 b_desc, u32 accumulate) {
  MOEJIT_WGMMA_DISPATCH("k16.f32.bf16.bf16", ", 1, 1, 0");
}
template <u32 N>
MOEJIT_DEVICE void wgmma_m64k16_f16(float (&d)[N / 2], const u32 (&a)[4], u64 b_desc, u32 accumulate) {
  MOEJIT_WGMMA_DISPATCH("k16.f32.f16.f16", ", 1, 1, 0");
}
// D (64 x N) = A (64 x 32) * B (32 x N) + (accumulate ? D : 0), e4m3 (K-major is the only
// layout fp8 has).
template <u32 N>
MOEJIT_DEVICE void wgmma_m64k32_e4m3(float (&d)[N / 2], const u32 (&a)[4], u64 b_desc, u32 accumulate) {
  MOEJIT_WGMMA_DISPATCH("k32.f32.e4m3.e4m3", ", 1, 1");
}

#undef MOEJIT_WGMMA_DISPATCH
#undef MOEJIT_WGMMA_ASM

MOEJIT_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
MOEJIT_DEVICE void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <u32 Pending>
MOEJIT_DEVICE void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
}
// Orders shared-memory writes by ordinary stores and cp.async before later reads by the async
// proxy (wgmma's B operand): each writing thread, after its writes, before the barrier.
MOEJIT_DEVICE void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

#elif MOEJIT_TARGET_DEVICE

template <u32 N>
MOEJIT_DEVICE void wgmma_m64k16_bf16(float (&)[N / 2], const u32 (&)[4], u64, u32) {
  trap("wgmma needs sm_90a");
}
template <u32 N>
MOEJIT_DEVICE void wgmma_m64k16_f16(float (&)[N / 2], const u32 (&)[4], u64, u32) {
  trap("wgmma needs sm_90a");
}
template <u32 N>
MOEJIT_DEVICE void wgmma_m64k32_e4m3(float (&)[N / 2], const u32 (&)[4], u64, u32) {
  trap("wgmma needs sm_90a");
}
MOEJIT_DEVICE void wgmma_fence() { trap("wgmma needs sm_90a"); }
MOEJIT_DEVICE void wgmma_commit_group() { trap("wgmma needs sm_90a"); }
template <u32 Pending>
MOEJIT_DEVICE void wgmma_wait_group() {
  trap("wgmma needs sm_90a");
}
MOEJIT_DEVICE void fence_proxy_async_shared() { trap("wgmma needs sm_90a"); }

#else

template <u32 N>
MOEJIT_DEVICE void wgmma_host(twin::MmaInput in, float (&d)[N / 2], const u32 (&a)[4], u64 b_desc,
                              u32 accumulate) {
  static_assert(N == 8 || N == 16 || N == 32 || N == 64 || N == 128 || N == 256,
                "wgmma: N must be 8, 16, 32, 64, 128 or 256");
  struct Lane {
    u32 a[4];
    u32 accumulate;
    u64 b_desc;
  };
  const Lane mine{{a[0], a[1], a[2], a[3]}, accumulate != 0, b_desc};
  Lane lanes[32];
  static_assert(sizeof(Lane) <= host::kMaxExchangeBytes);
  moejit_host_runtime->warp_exchange(0xffffffffu, &mine, lanes, sizeof mine);
  for (const Lane& l : lanes)
    if (l.b_desc != b_desc || l.accumulate != mine.accumulate)
      trap("wgmma: b-desc or the accumulate flag differs between lanes of the warp");

  // The chain of these accumulators: joined when a wgmma is in flight on them, else started
  // with their values as C.
  twin::WgmmaChains& chains = twin::wgmma_chains();
  twin::WgmmaChain* chain = twin::find_wgmma_chain(chains, d);
  if (chain != nullptr) {
    if (!twin::wgmma_poisoned(d, N / 2)) trap(twin::kWgmmaWrittenInFlight);
    if (chain->count != N / 2) trap("wgmma: a wgmma of another N on accumulators with one in flight");
  } else {
    chain = twin::find_wgmma_chain(chains, nullptr);
    if (chain == nullptr) trap("wgmma: more accumulator arrays in flight at once than the twin tracks (8)");
    chain->d = d;
    chain->count = N / 2;
    for (u32 i = 0; i < N / 2; ++i) {
      chain->carry[i] = d[i];
      d[i] = twin::f32_from_bits(twin::kWgmmaPoison);
    }
  }
  ++chain->pending;

  auto* p = new twin::WgmmaPending<N>{};  // large for N = 256: off the fiber's stack
  p->d = d;
  p->shared = dynamic_shared();
  p->shared_bytes = self().dynamic_shared_bytes;
  p->lane = lane_id();
  p->in = in;
  p->accumulate = mine.accumulate;
  p->b_desc = b_desc;
  // Rows g and g + 8 of A, from the registers of lanes 4g .. 4g + 3 in mma.sync's A layout
  // (common/mma.cuh).
  const u32 g = p->lane / 4;
  const bool e4m3 = in == twin::MmaInput::e4m3;
  const u32 per_reg = e4m3 ? 4 : 2, elem_bytes = e4m3 ? 1 : 2;
  for (u32 q = 4 * g; q < 4 * g + 4; ++q)
    for (u32 i = 0; i < 4 * per_reg; ++i) {
      const twin::RowCol rc = twin::mma_a_position(in, q, i);
      const u32 word = lanes[q].a[i / per_reg] >> (8 * elem_bytes * (i % per_reg));
      u8* row = reinterpret_cast<u8*>(p->a_rows[rc.row / 8]);
      for (u32 b = 0; b < elem_bytes; ++b) row[rc.col * elem_bytes + b] = static_cast<u8>(word >> (8 * b));
    }
  const char* failed = twin::wgmma_gather_b(*p, p->b_columns);
  if (failed == nullptr) moejit_host_runtime->mma_async(&twin::wgmma_complete<N>, p, sizeof *p);
  delete p;
  if (failed != nullptr) trap(failed);
}

template <u32 N>
MOEJIT_DEVICE void wgmma_m64k16_bf16(float (&d)[N / 2], const u32 (&a)[4], u64 b_desc, u32 accumulate) {
  wgmma_host<N>(twin::MmaInput::bf16, d, a, b_desc, accumulate);
}
template <u32 N>
MOEJIT_DEVICE void wgmma_m64k16_f16(float (&d)[N / 2], const u32 (&a)[4], u64 b_desc, u32 accumulate) {
  wgmma_host<N>(twin::MmaInput::f16, d, a, b_desc, accumulate);
}
template <u32 N>
MOEJIT_DEVICE void wgmma_m64k32_e4m3(float (&d)[N / 2], const u32 (&a)[4], u64 b_desc, u32 accumulate) {
  wgmma_host<N>(twin::MmaInput::e4m3, d, a, b_desc, accumulate);
}
MOEJIT_DEVICE void wgmma_fence() {}
MOEJIT_DEVICE void wgmma_commit_group() { moejit_host_runtime->mma_async_commit(); }
template <u32 Pending>
MOEJIT_DEVICE void wgmma_wait_group() {
  moejit_host_runtime->mma_async_wait(Pending);
}
MOEJIT_DEVICE void fence_proxy_async_shared() {}

#endif

// Keeps the compiler from moving the computation of registers a wgmma reads, or reads of the
// accumulators it writes, across the wgmma instructions (asm whose register effects the
// compiler does not see): call it on the A fragments and accumulators before wgmma_fence, and
// on the accumulators after wgmma_wait_group. Without it, ptxas finds A's registers defined
// after the fence and injects a fence (warpgroup.arrive) before every wgmma.
template <class T>
inline constexpr bool kWgmmaF32Operand = false;  // u32: A fragments
template <>
inline constexpr bool kWgmmaF32Operand<float> = true;  // accumulators
template <class T, u32 M>
MOEJIT_DEVICE void wgmma_fence_operand(T (&v)[M]) {
  static_assert(kWgmmaF32Operand<T> || sizeof(T) == 4, "wgmma operands are f32 accumulators or u32 fragments");
#if MOEJIT_TARGET_DEVICE
  MOEJIT_UNROLL
  for (u32 i = 0; i < M; ++i) {
    if constexpr (kWgmmaF32Operand<T>) asm volatile("" : "+f"(v[i])::"memory");
    else asm volatile("" : "+r"(v[i])::"memory");
  }
#else
  (void)v;
#endif
}

}  // namespace moejit::prim
