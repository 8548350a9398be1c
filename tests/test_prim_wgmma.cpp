// wgmma (templates/common/wgmma.cuh): the matrix descriptor's bits; the host twin run as a whole
// warpgroup MMA on the host backend against fp64 products of the inputs, with B written into
// shared memory by layouts written out here from the PTX ISA's shared-memory matrix layouts
// (independently of twin::wgmma_b_address); the twin's checks of the asynchrony; and the PTX
// NVRTC emits on sm_90a (a trap elsewhere).

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codegen/generate.hpp"
#include "common/wgmma.cuh"
#include "compile/nvrtc_compiler.hpp"
#include "fp8_reference.hpp"
#include "host_test_support.hpp"
#include "kernels/kernel_def.hpp"
#include "nvrtc_ptx.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"

using namespace moejit;
using namespace moejit::test;

TEST_CASE("wgmma matrix descriptor: the PTX ISA's bit fields") {
  std::mt19937 rng(std::random_device{}());
  for (int rep = 0; rep < 200; ++rep) {
    const std::uint32_t start = (rng() % (1u << 18)) & ~15u, lbo = (rng() % (1u << 18)) & ~15u,
                        sbo = (rng() % (1u << 18)) & ~15u;
    const auto layout = rep % 2 ? prim::WgmmaLayout::swizzle_128b : prim::WgmmaLayout::interleave;
    const std::uint64_t d = prim::make_wgmma_descriptor(start, lbo, sbo, layout);
    CAPTURE(d);
    // Matrix descriptor format: bits 13-0 start >> 4, 29-16 LBO >> 4, 45-32 SBO >> 4, 51-49
    // base offset, 63-62 swizzle mode (0 none, 1 128B); every other bit 0.
    CHECK((d & 0x3FFF) == start >> 4);
    CHECK(((d >> 16) & 0x3FFF) == lbo >> 4);
    CHECK(((d >> 32) & 0x3FFF) == sbo >> 4);
    CHECK(((d >> 49) & 7) == 0);
    CHECK((d >> 62) == (layout == prim::WgmmaLayout::swizzle_128b ? 1u : 0u));
    CHECK((d & 0x3FFFC000C000C000ull & ~(7ull << 49)) == 0);
    const prim::twin::WgmmaDescriptor back = prim::twin::decode_wgmma_descriptor(d);
    CHECK(back.start == start);
    CHECK(back.lbo == lbo);
    CHECK(back.sbo == sbo);
  }
}

namespace {

// One or two warpgroups; warpgroup w multiplies rows 64w .. 64w + 63 of A (rows x 128 bytes:
// K = 64 of a 16-bit type, 128 of e4m3) by B (N columns of 128 bytes, column n at n * 128). B is
// written into shared memory, 16 bytes at a time, in one of three K-major layouts:
//   0: interleave, core matrices of a column group adjacent in K (LBO 128, SBO 1024)
//   1: interleave, core matrices adjacent in N (LBO N * 16, SBO 128)
//   2: 128-byte swizzle: column n at (n / 8) * 1024 + (n % 8) * 128, its 16-byte chunk c at
//      chunk c ^ (n % 8) of that row (SBO 1024), from a 1024-byte aligned shared address
// mode: bits 0-1 the type (0 bf16, 1 f16, 2 e4m3), 2-3 the layout, 4-7 a misuse to commit
// (0 none; see the test cases), 8-9 N (0: 8, 1: 64, 2: 256). out: D (rows x N f32), then for misuse 4 two more.
const char* kWgmmaKernel = R"(#pragma once
#include "common/platform.cuh"
#include "common/sync.cuh"
#include "common/wgmma.cuh"
#include "hosttest/params.cuh"
namespace moejit::kernels {

// Layout: 0-2 as above, 3 the one in p.mode.
template <u32 N, u32 Type, bool Misuse, u32 Layout = 3>
MOEJIT_DEVICE void wgmma_case(hosttest::Params p) {
  using namespace moejit::prim;
  constexpr u32 kSteps = 4;  // 128 bytes of K in steps of 32 bytes (k16, or k32 of e4m3)
  const u32 layout = Layout < 3 ? Layout : p.mode >> 2 & 3, misuse = Misuse ? p.mode >> 4 & 15 : 0;
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
    else at = (n / 8) * 1024 + (n % 8) * 128 + (chunk ^ (n % 8)) * 16;
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
    return make_wgmma_descriptor(base + s * 32, 16, 1024, WgmmaLayout::swizzle_128b);
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

constexpr const char* kEntry = "test/wgmma_probe.cuh";
// B (256 columns of 128 bytes) plus up to 1008 bytes of alignment padding.
constexpr std::uint32_t kShared = 256 * 128 + 1024;

enum Type : std::uint32_t { type_bf16 = 0, type_f16 = 1, type_e4m3 = 2 };
constexpr std::uint32_t kNs[] = {8, 64, 256};

struct Operands {
  std::vector<std::uint8_t> a, b;  // rows x 128 and N x 128 bytes
};

// Random values whose products and sums of up to 128 terms are exact in f32: multiples of 1/4
// in [-8, 8] (16-bit types) and e4m3 bytes of magnitude at most 8 with 2 mantissa bits used.
std::uint8_t random_e4m3(std::mt19937& rng) {
  const std::uint32_t exponent = 4 + rng() % 7, mantissa = rng() % 4 * 2;  // 2^-3 .. 2^3
  return static_cast<std::uint8_t>((rng() & 0x80) | exponent << 3 | mantissa);
}

Operands random_operands(Type type, std::uint32_t rows, std::uint32_t n, std::mt19937& rng) {
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

double element(Type type, const std::uint8_t* row, std::uint32_t k) {
  if (type == type_e4m3) return fp8::e4m3_value(row[k]);
  const std::uint16_t h = static_cast<std::uint16_t>(row[2 * k] | row[2 * k + 1] << 8);
  return type == type_bf16 ? std::bit_cast<float>(std::uint32_t{h} << 16) : prim::twin::f16_to_f32(h);
}

// D[r][c] = sum over the first `k` elements of K of A[r][k] * B[k][c].
std::vector<float> reference(Type type, const Operands& o, std::uint32_t rows, std::uint32_t n,
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

struct Run {
  Status status;
  std::vector<std::uint32_t> out;
};

Run run_case(const ResolvedKernel& k, Type type, std::uint32_t layout, std::uint32_t misuse,
             std::uint32_t n, std::uint32_t threads, const Operands& o) {
  const std::uint32_t rows = threads / 2, n_index = n == 64 ? 1 : n == 256 ? 2 : 0;
  std::vector<std::uint32_t> in((o.a.size() + o.b.size()) / 4);
  std::memcpy(in.data(), o.a.data(), o.a.size());
  std::memcpy(reinterpret_cast<std::uint8_t*>(in.data()) + o.a.size(), o.b.data(), o.b.size());
  Run run;
  run.out.assign(std::size_t{3} * rows * n, 0xDEADBEEFu);
  HostTestParams p;
  p.out = run.out.data();
  p.in = in.data();
  p.mode = type | layout << 2 | misuse << 4 | n_index << 8;
  run.status = launch_test_kernel(k, p, shape_of(1, threads, kShared));
  return run;
}

const char* type_name(Type t) { return t == type_bf16 ? "bf16" : t == type_f16 ? "f16" : "e4m3"; }

}  // namespace

TEST_CASE("wgmma twin on the host backend: D = A * B for every type, N and layout, one and two warpgroups") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  auto probe = build_host_test_kernel(*compiler, {{kEntry, kWgmmaKernel}}, kEntry, "wgmma_probe", 256, kShared);
  REQUIRE_MESSAGE(probe.ok(), probe.status().message());
  auto pipeline = build_host_test_kernel(*compiler, {{kEntry, kWgmmaKernel}}, kEntry, "wgmma_pipeline", 128, kShared);
  REQUIRE_MESSAGE(pipeline.ok(), pipeline.status().message());
  std::mt19937 rng(std::random_device{}());
  auto check = [&](const ResolvedKernel& k, Type type, std::uint32_t n, std::uint32_t layout,
                   std::uint32_t threads) {
    const std::uint32_t rows = threads / 2;
    CAPTURE(type_name(type));
    CAPTURE(n);
    CAPTURE(layout);
    CAPTURE(threads);
    const Operands o = random_operands(type, rows, n, rng);
    const Run run = run_case(k, type, layout, 0, n, threads, o);
    REQUIRE_MESSAGE(run.status.ok(), run.status.message());
    const std::vector<float> want = reference(type, o, rows, n, type == type_e4m3 ? 128 : 64);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
      if (run.out[i] != std::bit_cast<std::uint32_t>(want[i])) ++wrong;
    CHECK(wrong == 0);
  };
  for (Type type : {type_bf16, type_f16, type_e4m3})
    for (std::uint32_t n : kNs)
      for (std::uint32_t layout = 0; layout < 3; ++layout)
        check(*probe, type, n, layout, (n + layout) % 2 ? 256 : 128);
  check(*pipeline, type_bf16, 128, 2, 128);
}

TEST_CASE("wgmma twin: a second group waits for its own wait_group, and its accumulators read as poison until then") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  auto k = build_host_test_kernel(*compiler, {{kEntry, kWgmmaKernel}}, kEntry, "wgmma_probe", 128, kShared);
  REQUIRE_MESSAGE(k.ok(), k.status().message());
  std::mt19937 rng(std::random_device{}());
  const Operands o = random_operands(type_bf16, 64, 64, rng);
  const Run run = run_case(*k, type_bf16, 2, 4, 64, 128, o);
  REQUIRE_MESSAGE(run.status.ok(), run.status.message());
  const std::vector<float> full = reference(type_bf16, o, 64, 64, 64), first = reference(type_bf16, o, 64, 64, 16);
  for (std::size_t i = 0; i < full.size(); ++i) {
    CAPTURE(i);
    REQUIRE(run.out[i] == std::bit_cast<std::uint32_t>(full[i]));
    REQUIRE(run.out[full.size() + i] == prim::twin::kWgmmaPoison);
    REQUIRE(run.out[2 * full.size() + i] == std::bit_cast<std::uint32_t>(first[i]));
  }
}

TEST_CASE("wgmma twin: what the device leaves undefined fails the launch or reads as poison") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  auto k = build_host_test_kernel(*compiler, {{kEntry, kWgmmaKernel}}, kEntry, "wgmma_probe", 128, kShared);
  REQUIRE_MESSAGE(k.ok(), k.status().message());
  std::mt19937 rng(std::random_device{}());
  const Operands o = random_operands(type_f16, 64, 8, rng);

  SUBCASE("accumulators read before the wait") {
    const Run run = run_case(*k, type_f16, 0, 1, 8, 128, o);
    REQUIRE_MESSAGE(run.status.ok(), run.status.message());
    for (std::size_t i = 0; i < 64 * 8; ++i) REQUIRE(run.out[i] == prim::twin::kWgmmaPoison);
  }
  SUBCASE("B overwritten while in flight") {
    const Run run = run_case(*k, type_f16, 1, 2, 8, 128, o);
    CHECK(contains(run.status.message(), "shared memory B changed between wgmma.mma_async and the wait"));
  }
  SUBCASE("a thread exits without waiting") {
    const Run run = run_case(*k, type_f16, 2, 3, 8, 128, o);
    CHECK(contains(run.status.message(), "wgmma.mma_async operation(s) not waited for"));
  }
  SUBCASE("lanes disagree on b-desc") {
    const Run run = run_case(*k, type_f16, 0, 5, 8, 128, o);
    CHECK(contains(run.status.message(), "b-desc or the accumulate flag differs between lanes"));
  }
  SUBCASE("an accumulator written while in flight, before the wait or between chained wgmmas") {
    for (std::uint32_t misuse : {6u, 7u}) {
      CAPTURE(misuse);
      const Run run = run_case(*k, type_f16, 0, misuse, 8, 128, o);
      CHECK(contains(run.status.message(), "an accumulator was written while a wgmma.mma_async on it was in flight"));
    }
  }
}

TEST_CASE("wgmma lowers to wgmma.mma_async on sm_90a and to a trap on other targets") {
  auto nvrtc = NvrtcCompiler::create({});
  if (!nvrtc.ok()) {
    toolchain_missing("NVRTC is not available here: " + nvrtc.status().message());
    return;
  }
  const codegen::TemplateSet set = templates_with({{kEntry, kWgmmaKernel}});
  const KernelDef def = test_kernel_def<256, kShared>(kEntry, "moejit::kernels::wgmma_probe");
  const KernelDef plain = test_kernel_def<128, kShared>(kEntry, "moejit::kernels::wgmma_pipeline");
  for (const Arch arch : {Arch::sm_90a, Arch::sm_90, Arch::sm_80, Arch::sm_100a, Arch::sm_120a}) {
    CAPTURE(to_string(arch));
    KernelSpec spec = align_spec(8, 8, 1, arch);
    spec.backend = Backend::device;
    auto g = codegen::generate_from_def(spec, def, set);
    REQUIRE_MESSAGE(g.ok(), g.status().message());
    auto compiled = (*nvrtc)->compile(*g, set, spec);
    REQUIRE_MESSAGE(compiled.ok(), compiled.status().message());
    const ArchInfo& info = arch_info(arch);
    auto ptx = ptx_for(*g, set, "compute_" + std::string(info.name.substr(3)));
    REQUIRE_MESSAGE(ptx.ok(), ptx.status().message());
    const bool native = arch == Arch::sm_90a;
    for (const char* shape : {"m64n8k16.f32.bf16.bf16", "m64n64k16.f32.f16.f16", "m64n256k16.f32.bf16.bf16",
                              "m64n8k32.f32.e4m3.e4m3", "m64n256k32.f32.e4m3.e4m3"}) {
      CAPTURE(shape);
      CHECK(contains(*ptx, std::string("wgmma.mma_async.sync.aligned.") + shape) == native);
    }
    CHECK(contains(*ptx, "wgmma.fence.sync.aligned;") == native);
    CHECK(contains(*ptx, "wgmma.commit_group.sync.aligned;") == native);
    CHECK(contains(*ptx, "wgmma.wait_group.sync.aligned 1;") == native);
    CHECK(contains(*ptx, "fence.proxy.async.shared::cta;") == native);
    CHECK(contains(*ptx, "trap;") == !native);
    if (!native) continue;
    // The plain use: chained wgmmas, one commit, one wait. ptxas keeps the accumulators in
    // registers and does not serialize the wgmmas (it says so in its log when it has to, or
    // when it must wait on a wgmma before a register it writes is used).
    auto pg = codegen::generate_from_def(spec, plain, set);
    REQUIRE_MESSAGE(pg.ok(), pg.status().message());
    auto pc = (*nvrtc)->compile(*pg, set, spec);
    REQUIRE_MESSAGE(pc.ok(), pc.status().message());
    CHECK(pc->report.spill_store_bytes == 0);
    CHECK_MESSAGE(!contains(pc->log, "serialized"), pc->log);
    CHECK_MESSAGE(!contains(pc->log, "is injected"), pc->log);  // neither a wait nor a fence
  }
}
