#pragma once
// The wgmma probe kernel (templates/common/wgmma.cuh's primitives in one or two warpgroups),
// its operands and its fp64 reference, shared by the host-backend tests
// (tests/test_prim_wgmma.cpp) and the GPU test (tests/test_device_wgmma.cpp).

#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "common/wgmma.cuh"
#include "fp8_reference.hpp"

namespace moejit::test::wgmma_probe {

// One or two warpgroups; warpgroup w multiplies rows 64w .. 64w + 63 of A (rows x 128 bytes:
// K = 64 of a 16-bit type, 128 of e4m3) by B (N columns of 128 bytes, column n at n * 128). B is
// written into shared memory, 16 bytes at a time, in one of three K-major layouts:
//   0: interleave, core matrices of a column group adjacent in K (LBO 128, SBO 1024)
//   1: interleave, core matrices adjacent in N (LBO N * 16, SBO 128)
//   2: 128-byte swizzle: column n at (n / 8) * 1024 + (n % 8) * 128, its 16-byte chunk c at
//      chunk c ^ (n % 8) of that row (SBO 1024), from a 1024-byte aligned shared address
//   3: 64-byte swizzle: K in two halves of 64 bytes, half h of column n at h * N * 64 +
//      (n / 8) * 512 + (n % 8) * 64, its chunk c (0..3) at chunk c ^ (n % 8 / 2) (SBO 512)
// mode: bits 0-1 the type (0 bf16, 1 f16, 2 e4m3), 2-3 the layout, 4-7 a misuse to commit
// (0 none; see the test cases), 8-9 N (0: 8, 1: 64, 2: 256). out: D (rows x N f32), then for misuse 4 two more.
inline const char* const kWgmmaKernel = R"(#pragma once
#include "common/platform.cuh"
#include "common/sync.cuh"
#include "common/wgmma.cuh"
#include "hosttest/params.cuh"
namespace moejit::kernels {

// Layout: 0-3 as above, 4 the one in p.mode.
template <u32 N, u32 Type, bool Misuse, u32 Layout = 4>
MOEJIT_DEVICE void wgmma_case(hosttest::Params p) {
  using namespace moejit::prim;
  constexpr u32 kSteps = 4;  // 128 bytes of K in steps of 32 bytes (k16, or k32 of e4m3)
  const u32 layout = Layout < 4 ? Layout : p.mode >> 2 & 3, misuse = Misuse ? p.mode >> 4 & 15 : 0;
  const u32 thread = thread_x(), lane = thread % 32, warp = thread / 32;
  const u32 rows = block_threads() / 2;
  const u8* a_bytes = reinterpret_cast<const u8*>(p.in);
  const u8* b_bytes = a_bytes + rows * 128;
  unsigned char* smem = dynamic_shared();
  unsigned char* b_smem = smem + (1024 - shared_window_address(smem) % 1024) % 1024;
  for (u32 i = thread; i < N * 8; i += block_threads()) {
    const u32 n = i / 8, chunk = i % 8;
    u32 at;
    if (layout == 0) at = (n / 8) * 1024 + chunk * 128 + (n % 8) * 16;
    else if (layout == 1) at = chunk * (N / 8) * 128 + (n / 8) * 128 + (n % 8) * 16;
    else if (layout == 2) at = (n / 8) * 1024 + (n % 8) * 128 + (chunk ^ (n % 8)) * 16;
    else at = chunk / 4 * N * 64 + (n / 8) * 512 + (n % 8) * 64 + ((chunk % 4) ^ (n % 8 / 2)) * 16;
    for (u32 b = 0; b < 16; ++b) b_smem[at + b] = b_bytes[n * 128 + chunk * 16 + b];
  }
  fence_proxy_async_shared();
  block_sync();

  // A in mma.sync's fragments: rows g and g + 8 of the warp's 16, 4 bytes at byte 4t of each
  // 16-byte half of the step's 32 bytes of K.
  const u32 g = lane / 4, t = lane % 4, row = warp * 16 + g;
  u32 a[kSteps][4];
  for (u32 s = 0; s < kSteps; ++s)
    for (u32 r = 0; r < 4; ++r) {
      const u8* q = a_bytes + (row + 8 * (r % 2)) * 128 + s * 32 + 16 * (r / 2) + 4 * t;
      a[s][r] = q[0] | q[1] << 8 | q[2] << 16 | static_cast<u32>(q[3]) << 24;
    }
  const u32 base = shared_window_address(b_smem);
  auto descriptor = [&](u32 s) {
    if (layout == 0) return make_wgmma_descriptor(base + s * 256, 128, 1024, WgmmaLayout::interleave);
    if (layout == 1)
      return make_wgmma_descriptor(base + s * 2 * N * 16, N * 16, 128, WgmmaLayout::interleave);
    if (layout == 2) return make_wgmma_descriptor(base + s * 32, 16, 1024, WgmmaLayout::swizzle_128b);
    return make_wgmma_descriptor(base + s / 2 * N * 64 + s % 2 * 32, 16, 512, WgmmaLayout::swizzle_64b);
  };
  auto mma = [&](float (&acc)[N / 2], u32 s, u64 desc, u32 accumulate) {
    if constexpr (Type == 0) wgmma_m64k16_bf16<N>(acc, a[s], desc, accumulate);
    else if constexpr (Type == 1) wgmma_m64k16_f16<N>(acc, a[s], desc, accumulate);
    else wgmma_m64k32_e4m3<N>(acc, a[s], desc, accumulate);
  };
  auto store = [&](const float (&acc)[N / 2], u32 part) {
    for (u32 i = 0; i < N / 2; ++i) {
      const u32 r = row + 8 * (i % 4 / 2), c = 8 * (i / 4) + 2 * t + i % 2;
      p.out[(part * rows + r) * N + c] = twin::f32_bits(acc[i]);
    }
  };

  float acc[N / 2];
  for (u32 i = 0; i < N / 2; ++i) acc[i] = 1e30f;  // overwritten: accumulate is 0 first
  for (u32 s = 0; s < kSteps; ++s) wgmma_fence_operand(a[s]);
  wgmma_fence_operand(acc);
  wgmma_fence();
  if constexpr (!Misuse) {
    for (u32 s = 0; s < kSteps; ++s) mma(acc, s, descriptor(s), s > 0);
    wgmma_commit_group();
    wgmma_wait_group<0>();
    wgmma_fence_operand(acc);
    store(acc, 0);
    return;
  }
  float second[N / 2], early[N / 2];
  for (u32 i = 0; i < N / 2; ++i) second[i] = 1e30f;
  for (u32 s = 0; s < kSteps; ++s) {
    if (misuse == 7 && s == 2) acc[1] = 2.0f;
    mma(acc, s, descriptor(s) + (misuse == 5 && lane == 5 ? 1 : 0), s > 0);
  }
  wgmma_commit_group();
  if (misuse == 8) {  // a second group on the same accumulators, as a pipelined main loop issues it
    mma(acc, 0, descriptor(0), 1);
    wgmma_commit_group();
    wgmma_wait_group<1>();
    for (u32 i = 0; i < N / 2; ++i) early[i] = acc[i];
    wgmma_wait_group<0>();
    wgmma_fence_operand(acc);
    store(acc, 0);
    store(early, 1);
    return;
  }
  if (misuse == 4) {  // a second group: step 0 alone
    mma(second, 0, descriptor(0), 0);
    wgmma_commit_group();
    wgmma_wait_group<1>();
    wgmma_fence_operand(acc);
    for (u32 i = 0; i < N / 2; ++i) early[i] = second[i];
    wgmma_wait_group<0>();
    wgmma_fence_operand(second);
    store(acc, 0);
    store(early, 1);
    store(second, 2);
    return;
  }
  for (u32 i = 0; i < N / 2; ++i) early[i] = acc[i];
  if (misuse == 2 && thread == 0) b_smem[0] ^= 1;
  if (misuse == 6) acc[0] = 1.0f;
  if (misuse == 3) return;
  wgmma_wait_group<0>();
  wgmma_fence_operand(acc);
  store(misuse == 1 ? early : acc, 0);
}

template <class Spec>
MOEJIT_GLOBAL void wgmma_probe(hosttest::Params p) {
  const moejit::u32 type = p.mode & 3, n = p.mode >> 8 & 3;
#define MOEJIT_CASE(NI, N)                                     \
  if (n == NI) {                                               \
    if (type == 0) wgmma_case<N, 0, true>(p);                  \
    else if (type == 1) wgmma_case<N, 1, true>(p);             \
    else wgmma_case<N, 2, true>(p);                            \
  }
  MOEJIT_CASE(0, 8)
  MOEJIT_CASE(1, 64)
  MOEJIT_CASE(2, 256)
#undef MOEJIT_CASE
}

// The plain use alone (bf16, N = 128, the 128-byte swizzle): what ptxas must be able to
// pipeline. (A layout chosen at run time puts a branch between the wgmmas, and ptxas then
// fences each one.)
template <class Spec>
MOEJIT_GLOBAL void wgmma_pipeline(hosttest::Params p) {
  wgmma_case<128, 0, false, 2>(p);
}

}  // namespace moejit::kernels
)";

inline constexpr const char* kEntry = "test/wgmma_probe.cuh";
// B (256 columns of 128 bytes) plus up to 1008 bytes of alignment padding.
inline constexpr std::uint32_t kShared = 256 * 128 + 1024;

enum Type : std::uint32_t { type_bf16 = 0, type_f16 = 1, type_e4m3 = 2 };
inline constexpr std::uint32_t kLayouts = 4;  // the B layouts above
inline constexpr std::uint32_t kNs[] = {8, 64, 256};

struct Operands {
  std::vector<std::uint8_t> a, b;  // rows x 128 and N x 128 bytes
};

// Random values whose products and sums of up to 128 terms are exact in f32, and for e4m3 in
// the 14-bit significand Hopper's fp8 tensor cores keep while they sum (DeepSeek-V3 report,
// section 3.3.2): multiples of 1/4 in [-8, 8] (16-bit types) and e4m3 values of 0, +-0.5,
// +-1, +-1.5, +-2, +-3 and +-4 (products multiples of 1/4 up to 16, sums within 2^11).
inline std::uint8_t random_e4m3(std::mt19937& rng) {
  static constexpr float kValues[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f};
  const float v = kValues[rng() % 7];
  return static_cast<std::uint8_t>(prim::twin::f32_to_e4m3(rng() % 2 ? -v : v));
}

inline Operands random_operands(Type type, std::uint32_t rows, std::uint32_t n, std::mt19937& rng) {
  Operands o;
  auto fill = [&](std::vector<std::uint8_t>& v, std::size_t bytes) {
    v.resize(bytes);
    if (type == type_e4m3) {
      for (auto& x : v) x = random_e4m3(rng);
      return;
    }
    for (std::size_t i = 0; i < bytes; i += 2) {
      const float f = static_cast<float>(static_cast<int>(rng() % 65) - 32) / 4;
      const std::uint16_t h = type == type_bf16 ? prim::twin::f32_to_bf16(f) : prim::twin::f32_to_f16(f);
      v[i] = static_cast<std::uint8_t>(h);
      v[i + 1] = static_cast<std::uint8_t>(h >> 8);
    }
  };
  fill(o.a, std::size_t{rows} * 128);
  fill(o.b, std::size_t{n} * 128);
  return o;
}

inline double element(Type type, const std::uint8_t* row, std::uint32_t k) {
  if (type == type_e4m3) return fp8::e4m3_value(row[k]);
  const std::uint16_t h = static_cast<std::uint16_t>(row[2 * k] | row[2 * k + 1] << 8);
  return type == type_bf16 ? std::bit_cast<float>(std::uint32_t{h} << 16) : prim::twin::f16_to_f32(h);
}

// D[r][c] = sum over the first `k` elements of K of A[r][k] * B[k][c].
inline std::vector<float> reference(Type type, const Operands& o, std::uint32_t rows, std::uint32_t n,
                             std::uint32_t k) {
  std::vector<float> d(std::size_t{rows} * n);
  for (std::uint32_t r = 0; r < rows; ++r)
    for (std::uint32_t c = 0; c < n; ++c) {
      double sum = 0;
      for (std::uint32_t kk = 0; kk < k; ++kk)
        sum += element(type, &o.a[r * 128], kk) * element(type, &o.b[c * 128], kk);
      d[std::size_t{r} * n + c] = static_cast<float>(sum);
    }
  return d;
}

inline const char* type_name(Type t) { return t == type_bf16 ? "bf16" : t == type_f16 ? "f16" : "e4m3"; }

}  // namespace moejit::test::wgmma_probe
