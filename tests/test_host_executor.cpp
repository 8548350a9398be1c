// The host SIMT executor (src/host/): barriers, warp collectives, cp.async, shared memory
// poison, spin-waits, traps, deadlocks and launch arguments, each with a small kernel written
// here as a template file and compiled by the host compiler.

#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <thread>

#include "host_test_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

// Kernel sources. Each includes what a library kernel would, plus hosttest/params.cuh.
const char* kBarrierKernels = R"(#pragma once
#include "common/atomic.cuh"
#include "common/platform.cuh"
#include "common/sync.cuh"
#include "common/warp.cuh"
#include "hosttest/params.cuh"
namespace moejit::kernels {

// Three rounds: write a word, count the arrival, barrier, then read a neighbour's word and the
// arrival count. mode 1: then every third thread exits and the others meet at a barrier.
template <class Spec>
MOEJIT_GLOBAL void barrier_order(hosttest::Params p) {
  using namespace moejit::prim;
  const u32 tid = thread_x(), n = block_threads();
  u32* sh = reinterpret_cast<u32*>(dynamic_shared());
  for (u32 round = 0; round < 3; ++round) {
    sh[tid] = round * 1000 + tid;
    global_atomic_add(p.flag, 1);
    block_sync();
    p.out[(round * n + tid) * 2] = load_acquire(p.flag);
    p.out[(round * n + tid) * 2 + 1] = sh[(tid + 1) % n];
    block_sync();
  }
  if (p.mode == 1) {
    if (tid % 3 == 0) return;
    block_sync();
    p.out[6 * n + tid] = 1;
  }
}

// Four warps: warps 0 and 1 meet at barrier 1, warps 0 and 2 at barrier 2 (64 threads each),
// warp 3 alone at barrier 3 (32 threads), everyone at barrier 0 at the end.
// mode 1: warps 0 and 1 disagree on the count of barrier 1.
template <class Spec>
MOEJIT_GLOBAL void named_barriers(hosttest::Params p) {
  using namespace moejit::prim;
  const u32 tid = thread_x(), warp = tid / 32, lane = tid % 32;
  u32* sh = reinterpret_cast<u32*>(dynamic_shared());
  if (warp == 1) {
    sh[lane] = 100 + lane;
    named_barrier_sync(1, p.mode == 1 ? 96 : 64);
  }
  if (warp == 0) {
    named_barrier_sync(1, 64);
    p.out[lane] = sh[lane];
    sh[32 + lane] = 200 + lane;
    named_barrier_sync(2, 64);
  }
  if (warp == 2) {
    named_barrier_sync(2, 64);
    p.out[32 + lane] = sh[32 + lane];
  }
  if (warp == 3) {
    named_barrier_sync(3, 32);
    p.out[64 + lane] = 300 + lane;
  }
  block_sync();
  p.out[96 + tid] = 1;
}

// Deadlocks. mode 0: warp 0 waits at barrier 1 for 64 threads; the others exit.
// mode 1: warp 0 waits at barrier 0, warp 1 at barrier 1, both for the whole block.
// mode 2: lanes 0-30 of warp 0 shuffle with a full mask, lane 31 waits at barrier 0.
template <class Spec>
MOEJIT_GLOBAL void deadlocks(hosttest::Params p) {
  using namespace moejit::prim;
  const u32 tid = thread_x(), warp = tid / 32;
  if (p.mode == 0 && warp == 0) named_barrier_sync(1, 64);
  if (p.mode == 1) {
    if (warp == 0) block_sync();
    else named_barrier_sync(1, 0);
  }
  if (p.mode == 2 && warp == 0) {
    if (tid == 31) block_sync();
    else p.out[tid] = shfl_xor(tid, 1);
  }
}

}  // namespace moejit::kernels
)";

const char* kWarpKernels = R"(#pragma once
#include "common/platform.cuh"
#include "common/sync.cuh"
#include "common/warp.cuh"
#include "hosttest/params.cuh"
namespace moejit::kernels {

// Every warp collective of common/warp.cuh, full and partial masks, 16 results per thread.
template <class Spec>
MOEJIT_GLOBAL void warp_collectives(hosttest::Params p) {
  using namespace moejit::prim;
  const u32 tid = thread_x(), lane = lane_id();
  const u32 v = p.in[tid];
  u32* o = p.out + tid * 16;
  o[0] = shfl_up(v, 3);
  o[1] = shfl_down(v, 5);
  o[2] = shfl_xor(v, 9);
  o[3] = shfl_idx(v, (lane * 7) % 32);
  o[4] = match_any(v % 5);
  o[5] = ballot(v % 3 == 0);
  o[6] = warp_inclusive_sum(v & 0xff);
  if (lane < 16) o[7] = shfl_xor(v, 1, 0x0000ffffu);
  else o[7] = shfl_xor(v, 2, 0xffff0000u);
  o[8] = lane < 20 ? ballot((v & 1) != 0, 0x000fffffu) : 0u;
  u32 x = v;
  for (int i = 0; i < 37; ++i) x = shfl_idx(x, (lane + 1) % 32);
  o[9] = x;
  o[10] = lane % 2 == 0 ? match_any(v % 3, 0x55555555u) : 0u;
  o[11] = lanemask_lt();
  warp_sync();
}

// Misuse of warp collectives. mode 1: lane 5 exits, the others shuffle with a full mask.
// mode 2: lanes 0-15 and 16-31 name different, overlapping masks. mode 3: lane 3 names a mask
// without itself. mode 4: a full mask in a block whose last warp is partial. mode 5: lanes
// 0-15 shuffle while lanes 16-31 sync, all with a full mask.
template <class Spec>
MOEJIT_GLOBAL void warp_misuse(hosttest::Params p) {
  using namespace moejit::prim;
  const u32 tid = thread_x(), lane = lane_id();
  if (p.mode == 1) {
    if (lane == 5) return;
    p.out[tid] = shfl_xor(tid, 1);
  }
  if (p.mode == 2) p.out[tid] = shfl_xor(tid, 1, lane < 16 ? 0xffffffffu : 0xffff0000u);
  if (p.mode == 3) p.out[tid] = ballot(true, lane == 3 ? 0x1u : 0xfffffff7u);
  if (p.mode == 4) p.out[tid] = ballot(true);
  if (p.mode == 5) {
    if (lane < 16) p.out[tid] = shfl_xor(tid, 1);
    else warp_sync();
  }
}

}  // namespace moejit::kernels
)";

const char* kMemoryKernels = R"(#pragma once
#include "common/atomic.cuh"
#include "common/platform.cuh"
#include "common/sync.cuh"
#include "hosttest/params.cuh"
namespace moejit::kernels {

// cp.async through the runtime table directly (the templates have no cp.async primitive yet).
// Each thread owns two 16-byte slots (a, b) of shared memory and its 32 input bytes; after the
// mode's copies and a barrier it reports its neighbour's two slots.
template <class Spec>
MOEJIT_GLOBAL void cp_async_modes(hosttest::Params p) {
  using namespace moejit::prim;
  const u32 tid = thread_x(), n = block_threads();
  unsigned char* sh = dynamic_shared();
  const moejit::host::Runtime* rt = moejit_host_runtime;
  unsigned char* a = sh + tid * 32;
  unsigned char* b = a + 16;
  const u32* src = p.in + tid * 8;
  switch (p.mode) {
    case 0: rt->cp_async(a, src, 16, 16); rt->cp_async_commit(); break;  // no wait
    case 1: rt->cp_async(a, src, 16, 16); rt->cp_async_commit(); rt->cp_async_wait(0); break;
    case 2: rt->cp_async(a, src, 16, 8); rt->cp_async_commit(); rt->cp_async_wait(0); break;
    case 3:  // two groups; waiting with one pending completes only the older
      rt->cp_async(a, src, 16, 16); rt->cp_async_commit();
      rt->cp_async(b, src + 4, 16, 16); rt->cp_async_commit();
      rt->cp_async_wait(1);
      break;
    case 4: rt->cp_async(a, src, 16, 16); rt->cp_async_wait(0); break;  // never committed
    case 5:
      rt->cp_async(a, src, 16, 16); rt->cp_async_commit();
      rt->cp_async(b, src + 4, 8, 4); rt->cp_async_commit();
      rt->cp_async_wait(0);
      break;
    case 6: rt->cp_async(a + 4, src, 16, 16); break;  // misaligned destination
    case 7: rt->cp_async(p.out, src, 16, 16); break;  // not shared memory
  }
  block_sync();
  const u32* w = reinterpret_cast<const u32*>(sh + (tid + 1) % n * 32);
  for (u32 i = 0; i < 8; ++i) p.out[tid * 8 + i] = w[i];
}

// Reports the block's shared memory as found at block start, then scribbles over it.
template <class Spec>
MOEJIT_GLOBAL void shared_poison(hosttest::Params p) {
  using namespace moejit::prim;
  const u32 tid = thread_x(), n = block_threads();
  u32* sh = reinterpret_cast<u32*>(dynamic_shared());
  for (u32 i = tid; i < p.n; i += n) p.out[block_x() * p.n + i] = sh[i];
  block_sync();
  for (u32 i = tid; i < p.n; i += n) sh[i] = 0x12345678u + i;
}

// Spin-waits (spin_pause yields on the host). mode 0: warp 0 spins until warp 1 raises the
// flag. mode 1: nobody raises it. mode 2: block 0 spins until block 1 raises it.
template <class Spec>
MOEJIT_GLOBAL void spin_wait(hosttest::Params p) {
  using namespace moejit::prim;
  const u32 tid = thread_x(), warp = tid / 32;
  const bool waiter = p.mode == 2 ? block_x() == 0 : warp == 0;
  const bool raiser = p.mode == 2 ? block_x() == 1 && tid == 0 : p.mode == 0 && tid == 32;
  if (waiter) {
    while (load_acquire(p.flag) == 0) spin_pause();
    p.out[2 + tid] = p.out[1] + tid;
  }
  if (raiser) {
    p.out[1] = 41;
    store_release(p.flag, 1);
  }
}

// Traps in thread 37 of block `mode`; mode 100: thread 5 throws (a host-only test of the
// executor's guard, not something a kernel may do).
template <class Spec>
MOEJIT_GLOBAL void trap_at(hosttest::Params p) {
  using namespace moejit::prim;
  const u32 tid = thread_x();
  if (tid == 37 && block_x() == p.mode) trap("thread 37 found a bad value");
  if (p.mode == 100 && tid == 5) throw 5;
  block_sync();
  p.out[block_x() * block_threads() + tid] = 1;
}

// Coordinates of every thread of a 3-d grid of 3-d blocks.
template <class Spec>
MOEJIT_GLOBAL void coordinates(hosttest::Params p) {
  const moejit::host::ThreadState& s = moejit::prim::self();
  const u32 threads = s.block_dim.x * s.block_dim.y * s.block_dim.z;
  const u32 t = s.thread_idx.x + s.block_dim.x * (s.thread_idx.y + s.block_dim.y * s.thread_idx.z);
  const u32 b = s.block_idx.x + s.grid_dim.x * (s.block_idx.y + s.grid_dim.y * s.block_idx.z);
  u32* o = p.out + (b * threads + t) * 2;
  o[0] = s.thread_idx.x | s.thread_idx.y << 10 | s.thread_idx.z << 20;
  o[1] = s.block_idx.x | s.block_idx.y << 10 | s.block_idx.z << 20;
}

// Thread 0 of each block records the block's turn (its arrival among the blocks) at the
// block's linear index.
template <class Spec>
MOEJIT_GLOBAL void block_turns(hosttest::Params p) {
  const moejit::host::ThreadState& s = moejit::prim::self();
  const u32 b = s.block_idx.x + s.grid_dim.x * (s.block_idx.y + s.grid_dim.y * s.block_idx.z);
  if (moejit::prim::thread_x() == 0) p.out[b] = moejit::prim::global_atomic_add(p.flag, 1);
}

}  // namespace moejit::kernels
)";

std::map<std::string, std::string> kernel_files() {
  return {{"hosttest/barriers.cuh", kBarrierKernels},
          {"hosttest/warps.cuh", kWarpKernels},
          {"hosttest/memory.cuh", kMemoryKernels}};
}

// Compiles one of the kernels above; null (with the reason) when there is no host compiler.
std::optional<ResolvedKernel> build(const std::string& entry, const std::string& kernel,
                                    std::uint32_t threads, std::uint32_t shared) {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return std::nullopt;
  auto k = build_host_test_kernel(*compiler, kernel_files(), entry, kernel, threads, shared);
  REQUIRE_MESSAGE(k.ok(), k.status().message());
  return std::move(k).value();
}

constexpr std::uint32_t kPoison = 0xffffffffu;

}  // namespace

TEST_CASE("host executor: a block barrier holds every thread until all have arrived") {
  auto k = build("hosttest/barriers.cuh", "barrier_order", 96, 96 * 4);
  if (!k) return;
  const std::uint32_t n = 96;
  for (std::uint32_t mode : {0u, 1u}) {
    CAPTURE(mode);
    std::vector<std::uint32_t> out(7 * n, kPoison);
    std::uint32_t counter = 0;
    HostTestParams p{.out = out.data(), .flag = &counter, .mode = mode};
    Status s = launch_test_kernel(*k, p, shape_of(1, n, n * 4));
    REQUIRE_MESSAGE(s.ok(), s.message());
    for (std::uint32_t round = 0; round < 3; ++round)
      for (std::uint32_t t = 0; t < n; ++t) {
        CAPTURE(round);
        CAPTURE(t);
        CHECK(out[(round * n + t) * 2] == n * (round + 1));
        CHECK(out[(round * n + t) * 2 + 1] == round * 1000 + (t + 1) % n);
      }
    // Exited threads count as arrived at the whole-block barrier.
    for (std::uint32_t t = 0; t < n; ++t)
      CHECK(out[6 * n + t] == (mode == 1 && t % 3 != 0 ? 1u : kPoison));
  }
}

TEST_CASE("host executor: named barriers synchronize only their own thread count") {
  auto k = build("hosttest/barriers.cuh", "named_barriers", 128, 64 * 4);
  if (!k) return;
  std::vector<std::uint32_t> out(96 + 128, kPoison);
  HostTestParams p{.out = out.data()};
  Status s = launch_test_kernel(*k, p, shape_of(1, 128, 64 * 4));
  REQUIRE_MESSAGE(s.ok(), s.message());
  for (std::uint32_t l = 0; l < 32; ++l) {
    CHECK(out[l] == 100 + l);
    CHECK(out[32 + l] == 200 + l);
    CHECK(out[64 + l] == 300 + l);
  }
  for (std::uint32_t t = 0; t < 128; ++t) CHECK(out[96 + t] == 1);

  p.mode = 1;  // warps 0 and 1 name different counts for barrier 1
  s = launch_test_kernel(*k, p, shape_of(1, 128, 64 * 4));
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "bar.sync 1 with a count of"));
}

TEST_CASE("host executor: a barrier that cannot complete is a deadlock error, not a hang") {
  auto k = build("hosttest/barriers.cuh", "deadlocks", 64, 0);
  if (!k) return;
  std::vector<std::uint32_t> out(64, kPoison);
  HostTestParams p{.out = out.data(), .mode = 0};
  Status s = launch_test_kernel(*k, p, shape_of(1, 64, 0));
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == Code::internal);
  CHECK(contains(s.message(), "deadlock in block (0,0,0)"));
  CHECK(contains(s.message(), "threads 0-31: wait at bar.sync 1 for 64 threads (32 arrived)"));
  CHECK(contains(s.message(), "threads 32-63: exited"));

  p.mode = 1;
  s = launch_test_kernel(*k, p, shape_of(1, 64, 0));
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "threads 0-31: wait at bar.sync 0 for the whole block"));
  CHECK(contains(s.message(), "threads 32-63: wait at bar.sync 1 for the whole block"));

  p.mode = 2;
  s = launch_test_kernel(*k, p, shape_of(1, 64, 0));
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "threads 0-30: wait in a warp collective of warp 0 with mask "
                              "0xffffffff for lanes 31"));
  CHECK(contains(s.message(), "thread 31: wait at bar.sync 0 for the whole block (1 arrived, 32 "
                              "exited)"));
}

TEST_CASE("host executor: warp collectives follow the PTX ISA lane by lane") {
  const std::uint32_t n = 64;
  auto k = build("hosttest/warps.cuh", "warp_collectives", n, 0);
  if (!k) return;
  std::mt19937 rng(12345);
  std::vector<std::uint32_t> in(n);
  for (auto& v : in) v = rng();
  in[3] = in[10] = in[40];  // some equal values for match_any
  std::vector<std::uint32_t> out(n * 16, kPoison);
  HostTestParams p{.out = out.data(), .in = in.data()};
  Status s = launch_test_kernel(*k, p, shape_of(1, n, 0));
  REQUIRE_MESSAGE(s.ok(), s.message());
  for (std::uint32_t t = 0; t < n; ++t) {
    const std::uint32_t w = t / 32 * 32, lane = t % 32;
    auto v = [&](std::uint32_t l) { return in[w + l]; };
    const std::uint32_t* o = &out[t * 16];
    CAPTURE(t);
    CHECK(o[0] == (lane >= 3 ? v(lane - 3) : v(lane)));
    CHECK(o[1] == (lane + 5 <= 31 ? v(lane + 5) : v(lane)));
    CHECK(o[2] == v(lane ^ 9));
    CHECK(o[3] == v(lane * 7 % 32));
    std::uint32_t peers = 0, votes = 0, sum = 0, sub_votes = 0, even_peers = 0;
    for (std::uint32_t l = 0; l < 32; ++l) {
      if (v(l) % 5 == v(lane) % 5) peers |= 1u << l;
      if (v(l) % 3 == 0) votes |= 1u << l;
      if (l <= lane) sum += v(l) & 0xff;
      if (l < 20 && (v(l) & 1)) sub_votes |= 1u << l;
      if (l % 2 == 0 && v(l) % 3 == v(lane) % 3) even_peers |= 1u << l;
    }
    CHECK(o[4] == peers);
    CHECK(o[5] == votes);
    CHECK(o[6] == sum);
    CHECK(o[7] == (lane < 16 ? v(lane ^ 1) : v(lane ^ 2)));
    CHECK(o[8] == (lane < 20 ? sub_votes : 0u));
    CHECK(o[9] == v((lane + 37) % 32));
    CHECK(o[10] == (lane % 2 == 0 ? even_peers : 0u));
    CHECK(o[11] == (1u << lane) - 1u);
  }
}

TEST_CASE("host executor: misused warp collectives are errors naming the lanes") {
  auto k = build("hosttest/warps.cuh", "warp_misuse", 64, 0);
  if (!k) return;
  std::vector<std::uint32_t> out(64, kPoison);
  HostTestParams p{.out = out.data(), .mode = 1};
  Status s = launch_test_kernel(*k, p, shape_of(1, 64, 0));
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "thread (5,0,0)"));
  CHECK(contains(s.message(), "exits while lanes 0-4 of warp 0 wait for it"));

  p.mode = 2;
  s = launch_test_kernel(*k, p, shape_of(1, 64, 0));
  REQUIRE_FALSE(s.ok());
  // Lanes 16-31 complete a collective of their own, then exit while lanes 0-15 still wait.
  CHECK(contains(s.message(), "exits while lanes 0-15 of warp 0 wait for it in a warp collective "
                              "with mask 0xffffffff"));

  p.mode = 3;
  s = launch_test_kernel(*k, p, shape_of(1, 64, 0));
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "does not include the calling lane"));

  p.mode = 4;
  s = launch_test_kernel(*k, p, shape_of(1, 48, 0));
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "names lanes 16-31 of warp 1, which do not exist"));

  p.mode = 5;
  s = launch_test_kernel(*k, p, shape_of(1, 64, 0));
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "exchanging 0 bytes while lanes 0-15 of warp 0 wait for it in one "
                              "exchanging 4 bytes"));
}

TEST_CASE("host executor: cp.async copies land only when a wait completes their group") {
  const std::uint32_t n = 64, shared = n * 32;
  auto k = build("hosttest/memory.cuh", "cp_async_modes", n, shared);
  if (!k) return;
  std::mt19937 rng(7);
  std::vector<std::uint32_t> in(n * 8);
  for (auto& v : in) v = rng() | 1u;  // never 0 and never all-ones by chance below
  auto run = [&](std::uint32_t mode, std::vector<std::uint32_t>& out) {
    out.assign(n * 8, 0xabababab);
    HostTestParams p{.out = out.data(), .in = in.data(), .mode = mode};
    return launch_test_kernel(*k, p, shape_of(1, n, shared));
  };
  std::vector<std::uint32_t> out;
  for (std::uint32_t mode : {0u, 1u, 2u, 3u, 4u, 5u}) {
    CAPTURE(mode);
    Status s = run(mode, out);
    REQUIRE_MESSAGE(s.ok(), s.message());
    for (std::uint32_t t = 0; t < n; ++t) {
      CAPTURE(t);
      const std::uint32_t nb = (t + 1) % n;
      const std::uint32_t* src = &in[nb * 8];
      const std::uint32_t* a = &out[t * 8];
      const std::uint32_t* b = a + 4;
      for (std::uint32_t i = 0; i < 4; ++i) {
        CAPTURE(i);
        switch (mode) {
          case 0:  // no wait: the copy never happened, the poison shows
          case 4:  // waited, but never committed
            CHECK(a[i] == kPoison);
            CHECK(b[i] == kPoison);
            break;
          case 1:
            CHECK(a[i] == src[i]);
            CHECK(b[i] == kPoison);
            break;
          case 2:  // 8 of 16 bytes copied, the rest zero-filled
            CHECK(a[i] == (i < 2 ? src[i] : 0u));
            break;
          case 3:  // wait_group 1: the older group done, the newer one not
            CHECK(a[i] == src[i]);
            CHECK(b[i] == kPoison);
            break;
          case 5:
            CHECK(a[i] == src[i]);
            CHECK(b[i] == (i == 0 ? src[4] : i == 1 ? 0u : kPoison));
            break;
        }
      }
    }
  }
  for (std::uint32_t mode : {6u, 7u}) {
    Status s = run(mode, out);
    REQUIRE_FALSE(s.ok());
    CHECK(contains(s.message(), mode == 6 ? "must be aligned" : "outside the block's 2048 bytes"));
  }
}

TEST_CASE("host executor: shared memory is poisoned at every block start") {
  const std::uint32_t words = 300, blocks = 5;
  auto k = build("hosttest/memory.cuh", "shared_poison", 64, words * 4);
  if (!k) return;
  for (const char* workers : {"1", "3"}) {
    ScopedEnv env("MOEJIT_HOST_THREADS", workers);
    std::vector<std::uint32_t> out(blocks * words, 0);
    HostTestParams p{.out = out.data(), .n = words};
    Status s = launch_test_kernel(*k, p, shape_of(blocks, 64, words * 4));
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(std::all_of(out.begin(), out.end(), [](std::uint32_t v) { return v == kPoison; }));
  }
}

TEST_CASE("host executor: a spin-wait with yield lets the other warp or block run") {
  auto k = build("hosttest/memory.cuh", "spin_wait", 64, 0);
  if (!k) return;
  std::vector<std::uint32_t> out(2 + 64, kPoison);
  std::uint32_t flag = 0;
  HostTestParams p{.out = out.data(), .flag = &flag, .mode = 0};
  Status s = launch_test_kernel(*k, p, shape_of(1, 64, 0));
  REQUIRE_MESSAGE(s.ok(), s.message());
  for (std::uint32_t t = 0; t < 32; ++t) CHECK(out[2 + t] == 41 + t);

  {  // one block waits for the next: fine while both are running
    ScopedEnv env("MOEJIT_HOST_THREADS", "2");
    flag = 0;
    p.mode = 2;
    s = launch_test_kernel(*k, p, shape_of(2, 64, 0));
    REQUIRE_MESSAGE(s.ok(), s.message());
    CHECK(out[2 + 63] == 41 + 63);
  }
  {  // with one worker the raising block never starts: an error, not a hang
    ScopedEnv env("MOEJIT_HOST_THREADS", "1");
    ScopedEnv timeout("MOEJIT_HOST_SPIN_TIMEOUT_MS", "200");
    flag = 0;
    s = launch_test_kernel(*k, p, shape_of(2, 64, 0));
    REQUIRE_FALSE(s.ok());
    CHECK(contains(s.message(), "block (0,0,0) made no progress for 200 ms"));
    CHECK(contains(s.message(), "1 of 2 blocks started, 1 workers"));
  }
  {  // nobody raises the flag
    ScopedEnv timeout("MOEJIT_HOST_SPIN_TIMEOUT_MS", "200");
    flag = 0;
    p.mode = 1;
    s = launch_test_kernel(*k, p, shape_of(1, 64, 0));
    REQUIRE_FALSE(s.ok());
    CHECK(contains(s.message(), "only spin in yield()"));
  }
}

TEST_CASE("host executor: a trap ends the launch with an error carrying its message") {
  auto k = build("hosttest/memory.cuh", "trap_at", 64, 0);
  if (!k) return;
  const std::uint32_t blocks = 6;
  std::vector<std::uint32_t> out(blocks * 64, 0);
  for (const char* workers : {"1", "4"}) {
    ScopedEnv env("MOEJIT_HOST_THREADS", workers);
    HostTestParams p{.out = out.data(), .mode = 2};
    Status s = launch_test_kernel(*k, p, shape_of(blocks, 64, 0));
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == Code::internal);
    CHECK(
        contains(s.message(), "trap in block (2,0,0) thread (37,0,0) (linear 37, warp 1 lane 5)"));
    CHECK(contains(s.message(), "thread 37 found a bad value"));
    // The trapping block never passed its barrier.
    for (std::uint32_t t = 0; t < 64; ++t) CHECK(out[2 * 64 + t] == 0);
  }
  HostTestParams thrower{.out = out.data(), .mode = 100};
  Status s = launch_test_kernel(*k, thrower, shape_of(1, 64, 0));
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "thread (5,0,0) (linear 5, warp 0 lane 5): the kernel threw a C++ "
                              "exception"));
  // The executor is intact after a trap.
  HostTestParams p{.out = out.data(), .mode = 99};
  s = launch_test_kernel(*k, p, shape_of(blocks, 64, 0));
  REQUIRE_MESSAGE(s.ok(), s.message());
  CHECK(std::all_of(out.begin(), out.end(), [](std::uint32_t v) { return v == 1; }));
}

TEST_CASE("host executor: launches from several threads at once are independent") {
  auto k = build("hosttest/barriers.cuh", "barrier_order", 64, 64 * 4);
  if (!k) return;
  ScopedEnv env("MOEJIT_HOST_THREADS", "2");
  constexpr int kCallers = 4;
  std::vector<std::vector<std::uint32_t>> outs(kCallers, std::vector<std::uint32_t>(7 * 64, kPoison));
  std::vector<std::uint32_t> counters(kCallers, 0);
  std::vector<Status> results(kCallers);
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&, c] {
      for (int rep = 0; rep < 5 && results[c].ok(); ++rep) {
        counters[c] = 0;
        HostTestParams p{.out = outs[c].data(), .flag = &counters[c]};
        results[c] = launch_test_kernel(*k, p, shape_of(1, 64, 64 * 4));
      }
    });
  for (auto& t : callers) t.join();
  for (int c = 0; c < kCallers; ++c) {
    CAPTURE(c);
    REQUIRE_MESSAGE(results[c].ok(), results[c].message());
    for (std::uint32_t t = 0; t < 64; ++t) CHECK(outs[c][(2 * 64 + t) * 2] == 64 * 3);
  }
}

TEST_CASE("host executor: thread and block coordinates of a 3-d launch") {
  auto k = build("hosttest/memory.cuh", "coordinates", 1024, 0);
  if (!k) return;
  HostLaunchShape shape;
  shape.grid = {3, 2, 2};
  shape.block = {5, 4, 3};
  const std::uint32_t threads = 60, blocks = 12;
  std::vector<std::uint32_t> out(blocks * threads * 2, kPoison);
  HostTestParams p{.out = out.data()};
  Status s = launch_test_kernel(*k, p, shape);
  REQUIRE_MESSAGE(s.ok(), s.message());
  for (std::uint32_t b = 0; b < blocks; ++b)
    for (std::uint32_t t = 0; t < threads; ++t) {
      CAPTURE(b);
      CAPTURE(t);
      CHECK(out[(b * threads + t) * 2] == (t % 5 | (t / 5 % 4) << 10 | (t / 20) << 20));
      CHECK(out[(b * threads + t) * 2 + 1] == (b % 3 | (b / 3 % 2) << 10 | (b / 6) << 20));
    }
}

TEST_CASE("host executor: one worker runs blocks in linear order, or reversed with MOEJIT_HOST_BLOCK_ORDER") {
  auto k = build("hosttest/memory.cuh", "block_turns", 64, 0);
  if (!k) return;
  HostLaunchShape shape;
  shape.grid = {3, 2, 2};
  shape.block = {64, 1, 1};
  const std::uint32_t blocks = 12;
  ScopedEnv one("MOEJIT_HOST_THREADS", "1");
  for (const char* order : {"", "forward", "reverse"}) {
    CAPTURE(order);
    ScopedEnv env("MOEJIT_HOST_BLOCK_ORDER", order);
    std::vector<std::uint32_t> out(blocks, kPoison);
    std::uint32_t flag = 0;
    HostTestParams p{.out = out.data(), .flag = &flag};
    Status s = launch_test_kernel(*k, p, shape);
    REQUIRE_MESSAGE(s.ok(), s.message());
    const bool reverse = std::string_view(order) == "reverse";
    for (std::uint32_t b = 0; b < blocks; ++b) CHECK(out[b] == (reverse ? blocks - 1 - b : b));
  }
  ScopedEnv bad("MOEJIT_HOST_BLOCK_ORDER", "backwards");
  std::uint32_t flag = 0;
  std::vector<std::uint32_t> out(blocks, kPoison);
  HostTestParams p{.out = out.data(), .flag = &flag};
  Status s = launch_test_kernel(*k, p, shape);
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "MOEJIT_HOST_BLOCK_ORDER = 'backwards': expected 'forward' or 'reverse'"));
  CHECK(flag == 0);  // nothing ran
}

TEST_CASE("host launch arguments are validated and errors name the argument") {
  auto k = build("hosttest/memory.cuh", "coordinates", 128, 256);
  if (!k) return;
  std::vector<std::uint32_t> out(1024);
  HostTestParams p{.out = out.data()};
  auto fails_with = [&](const HostLaunchShape& shape, std::string_view needle,
                        const void* params, std::size_t bytes) {
    Status s = launch_host_kernel(*k, params, bytes, shape);
    CAPTURE(needle);
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == Code::invalid_argument);
    CHECK_MESSAGE(contains(s.message(), needle), s.message());
  };
  fails_with(shape_of(1, 128, 256), "params is null", nullptr, sizeof p);
  fails_with(shape_of(1, 128, 256), "params_bytes = 8: expected 32", &p, 8);
  fails_with(shape_of(1, 0, 256), "shape.block = (0, 1, 1)", &p, sizeof p);
  fails_with(shape_of(0, 32, 256), "shape.grid = (0, 1, 1)", &p, sizeof p);
  HostLaunchShape big = shape_of(1, 32, 256);
  big.block = {32, 32, 2};
  fails_with(big, "is 2048 threads: expected 1 to 1024", &p, sizeof p);
  fails_with(shape_of(1, 256, 256), "at most the kernel's launch bounds, 128", &p, sizeof p);
  fails_with(shape_of(1, 128, 100), "shape.dynamic_shared_bytes = 100: expected at least the 256",
             &p, sizeof p);
  fails_with(shape_of(1, 128, 1u << 20), "expected at most the 232448 bytes", &p, sizeof p);
  ResolvedKernel device = *k;
  device.spec.backend = Backend::device;
  Status s = launch_host_kernel(device, &p, sizeof p, shape_of(1, 128, 256));
  REQUIRE_FALSE(s.ok());
  CHECK(contains(s.message(), "expected a host kernel"));
  CHECK(launch_test_kernel(*k, p, shape_of(1, 128, 256)).ok());
}
