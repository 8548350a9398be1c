// Host twins of the memory and atomic primitives (templates/common/memory.cuh, atomic.cuh,
// ldmatrix.cuh in a kernel): values, atomicity across OS threads, and the address checks the
// device makes in hardware.

#include <doctest/doctest.h>

#include <thread>

#include "common/atomic.cuh"
#include "common/memory.cuh"
#include "host_test_support.hpp"

using namespace moejit;
using namespace moejit::test;

TEST_CASE("global atomics and reductions are atomic across threads and acquire/release carry values") {
  alignas(16) u32 counter = 0;
  alignas(16) float sum = 0.0f;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        prim::global_atomic_add(&counter, 3);
        prim::global_red_add(&sum, 0.5f);  // multiples of 0.5 below 2^23 add exactly
      }
    });
  for (auto& t : threads) t.join();
  CHECK(counter == 4u * 20000u * 3u);
  CHECK(sum == 4.0f * 20000.0f * 0.5f);
  CHECK(prim::global_atomic_add(&counter, 1) == 240000u);  // returns the old value

  u32 flag = 0, payload = 0;
  std::thread writer([&] {
    payload = 42;
    prim::store_release(&flag, 1);
  });
  while (prim::load_acquire(&flag) != 1) std::this_thread::yield();
  CHECK(payload == 42);
  writer.join();
  u32 shared_word = 5;
  prim::shared_red_add(&shared_word, 7);
  CHECK(shared_word == 12);
}

TEST_CASE("vector global loads and stores move the bytes they name") {
  alignas(16) u32 src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  alignas(16) u32 dst[8] = {};
  const prim::u32x4 v = prim::ld_global_stream_v4(src + 4);
  CHECK((v.x == 5 && v.y == 6 && v.z == 7 && v.w == 8));
  prim::st_global_v4(dst, v);
  prim::st_global_v2(dst + 4, prim::u32x2{11, 12});
  prim::st_global_stream_v2(dst + 6, prim::u32x2{9, 10});
  CHECK((dst[0] == 5 && dst[1] == 6 && dst[2] == 7 && dst[3] == 8 && dst[4] == 11 && dst[5] == 12 && dst[6] == 9 &&
         dst[7] == 10));
}

namespace {

const char* kSharedLoadKernels = R"(#pragma once
#include "common/ldmatrix.cuh"
#include "common/memory.cuh"
#include "common/platform.cuh"
#include "common/sync.cuh"
#include "common/warp.cuh"
#include "hosttest/params.cuh"
namespace moejit::kernels {

// One warp. Shared memory holds four 8x8 matrices of 16-bit values v(i) = 3i + 1 (i the element
// index, 64 per matrix, rows of 16 bytes back to back). Lane L gives row L % 8 of matrix L / 8.
// mode 0: ldmatrix.x4, ldmatrix.x4.trans and ld.shared.v4 of the lane's row, 12 words per lane.
// mode 1: a row address 2 bytes off alignment. mode 2: ld.shared.v4 of a global address.
template <class Spec>
MOEJIT_GLOBAL void shared_loads(hosttest::Params p) {
  using namespace moejit::prim;
  const u32 lane = lane_id();
  unsigned char* sh = dynamic_shared();
  u16* sh16 = reinterpret_cast<u16*>(sh);
  for (u32 i = lane; i < 256; i += 32) sh16[i] = static_cast<u16>(3 * i + 1);
  warp_sync();
  u32 r[4], t[4];
  if (p.mode == 1) ldmatrix_x4(r, sh + lane * 16 + 2);
  if (p.mode == 2) ld_shared_v4(p.in);
  ldmatrix_x4(r, sh + lane * 16);
  ldmatrix_x4_trans(t, sh + lane * 16);
  const u32x4 v = ld_shared_v4(sh + lane * 16);
  u32* out = p.out + lane * 12;
  for (u32 j = 0; j < 4; ++j) {
    out[j] = r[j];
    out[4 + j] = t[j];
  }
  out[8] = v.x;
  out[9] = v.y;
  out[10] = v.z;
  out[11] = v.w;
}

}  // namespace moejit::kernels
)";

}  // namespace

TEST_CASE("ldmatrix and ld.shared.v4 in a kernel: fragments lane by lane, and misuse traps") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  auto k = build_host_test_kernel(*compiler, {{"test/shared_loads.cuh", kSharedLoadKernels}},
                                  "test/shared_loads.cuh", "shared_loads", 32, 512);
  REQUIRE_MESSAGE(k.ok(), k.status().message());
  std::vector<u32> out(32 * 12, 0xdeadbeef);
  alignas(16) u32 global_words[4] = {};
  HostTestParams p;
  p.out = out.data();
  p.in = global_words;
  REQUIRE(launch_test_kernel(*k, p, shape_of(1, 32, 512)).ok());
  auto v = [](u32 j, u32 row, u32 col) { return 3 * (64 * j + 8 * row + col) + 1; };
  for (u32 lane = 0; lane < 32; ++lane) {
    CAPTURE(lane);
    for (u32 j = 0; j < 4; ++j) {
      CHECK(out[lane * 12 + j] == (v(j, lane / 4, 2 * (lane % 4)) | v(j, lane / 4, 2 * (lane % 4) + 1) << 16));
      CHECK(out[lane * 12 + 4 + j] == (v(j, 2 * (lane % 4), lane / 4) | v(j, 2 * (lane % 4) + 1, lane / 4) << 16));
    }
    for (u32 w = 0; w < 4; ++w) {
      const u32 e = lane * 8 + 2 * w;  // the lane's row is elements lane*8 .. lane*8+7
      CHECK(out[lane * 12 + 8 + w] == ((3 * e + 1) | (3 * (e + 1) + 1) << 16));
    }
  }
  p.mode = 1;
  Status misaligned = launch_test_kernel(*k, p, shape_of(1, 32, 512));
  CHECK_FALSE(misaligned.ok());
  CHECK(contains(misaligned.message(), "ldmatrix: row address not 16-byte aligned"));
  p.mode = 2;
  Status not_shared = launch_test_kernel(*k, p, shape_of(1, 32, 512));
  CHECK_FALSE(not_shared.ok());
  CHECK(contains(not_shared.message(), "outside the block's shared memory"));
}
