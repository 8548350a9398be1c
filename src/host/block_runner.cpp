#include "host/block_runner.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "support/log.hpp"

namespace moejit::host {

namespace {

constexpr u32 kBarrierCount = 16;
constexpr std::size_t kSharedAlignment = 128;
constexpr std::size_t kMaxDeadlockGroups = 24;

struct AsyncCopy {
  void* dst;
  const void* src;
  u32 dst_bytes;
  u32 src_bytes;
};

struct AsyncMma {
  const char* (*run)(void* ctx);
  std::vector<unsigned char> ctx;
};

void perform(const AsyncCopy& c) {
  if (c.src_bytes > 0) std::memcpy(c.dst, c.src, c.src_bytes);
  std::memset(static_cast<unsigned char*>(c.dst) + c.src_bytes, 0, c.dst_bytes - c.src_bytes);
}

std::string lane_list(u32 mask) {
  std::string out;
  for (u32 l = 0; l < 32; ++l) {
    if (!(mask >> l & 1u)) continue;
    u32 end = l;
    while (end + 1 < 32 && (mask >> (end + 1) & 1u)) ++end;
    if (!out.empty()) out += ',';
    out += end == l ? fmt::format("{}", l) : fmt::format("{}-{}", l, end);
    l = end;
  }
  return out.empty() ? "none" : out;
}

}  // namespace

enum class Wait : std::uint8_t { runnable, barrier, exchange, exited };

struct BlockRunner::Thread {
  ThreadState state{};  // what self() returns; first, so the kernel sees a stable address
  Fiber fiber;
  BlockRunner* runner = nullptr;
  u32 index = 0;  // linear thread index in the block
  Wait wait = Wait::runnable;
  u32 wait_barrier = 0;
  bool yielded = false;
  bool trapped = false;
  // The stack's ASan shadow is clean: fresh, or its last fiber returned from every frame.
  // Abandoned frames keep their redzones poisoned until the stack is unpoisoned for reuse.
  bool stack_clean = true;
  std::vector<AsyncCopy> uncommitted;
  std::deque<std::vector<AsyncCopy>> committed;  // oldest first
  std::vector<AsyncMma> mma_uncommitted;
  std::deque<std::vector<AsyncMma>> mma_committed;  // oldest first
  std::vector<unsigned char> scratch;  // thread_scratch: kept across blocks, zeroed when used
  bool scratch_used = false;
};

namespace {
thread_local BlockRunner::Thread* t_current = nullptr;
}  // namespace

// --- Construction and the scheduler ---------------------------------------------------------

BlockRunner::BlockRunner(LaunchState& launch) : launch_(launch), plan_(launch.plan()) {}

BlockRunner::~BlockRunner() { finish_block(); }

Result<std::unique_ptr<BlockRunner>> BlockRunner::create(LaunchState& launch) {
  std::unique_ptr<BlockRunner> r(new BlockRunner(launch));
  const u32 n = r->plan_.block_threads;
  MOEJIT_ASSIGN_OR_RETURN(r->stacks_, StackArena::create(n, r->plan_.stack_bytes));
  r->threads_.resize(n);
  r->warps_.resize((n + 31) / 32);
  for (u32 i = 0; i < n; ++i) {
    r->threads_[i].runner = r.get();
    r->threads_[i].index = i;
  }
  return r;
}

void BlockRunner::start_block(std::uint64_t linear_block) {
  const Dim3 g = plan_.grid, b = plan_.block;
  block_idx_ = {static_cast<u32>(linear_block % g.x), static_cast<u32>(linear_block / g.x % g.y),
                static_cast<u32>(linear_block / (std::uint64_t{g.x} * g.y))};
  // Exactly the launch's size, so that ASan reports an access past the end of shared memory
  // (the kernels have only dynamic shared memory). Poisoned with 0xFF bytes: NaN in every
  // floating type and -1 in every integer, so a read before any write shows.
  const std::size_t bytes = plan_.dynamic_shared_bytes;
  shared_ = static_cast<unsigned char*>(::operator new(bytes, std::align_val_t{kSharedAlignment}));
  std::memset(shared_, 0xFF, bytes);

  for (auto& bar : barriers_) bar = Barrier{};
  for (auto& w : warps_) w = Warp{};
  runnable_.clear();
  const u32 n = plan_.block_threads;
  for (u32 i = 0; i < n; ++i) {
    Thread& t = threads_[i];
    t.state = ThreadState{{i % b.x, i / b.x % b.y, i / (b.x * b.y)},
                          block_idx_, b, g, shared_, plan_.dynamic_shared_bytes};
    t.wait = Wait::runnable;
    t.yielded = false;
    t.trapped = false;
    t.uncommitted.clear();
    t.committed.clear();
    t.mma_uncommitted.clear();
    t.mma_committed.clear();
    if (t.scratch_used) std::fill(t.scratch.begin(), t.scratch.end(), 0);
    t.scratch_used = false;
    if (!t.stack_clean) stacks_.unpoison(i);
    t.stack_clean = false;
    t.fiber.prepare(&host_, stacks_.bottom(i), stacks_.stack_bytes(), &BlockRunner::thread_main,
                    &t);
    runnable_.push_back(i);
  }
  live_ = n;
  exited_ = 0;
  failed_ = false;
  yield_streak_ = 0;
  spinning_ = false;
}

void BlockRunner::finish_block() {
  if (shared_ != nullptr) {
    ::operator delete(shared_, std::align_val_t{kSharedAlignment});
    shared_ = nullptr;
  }
}

void BlockRunner::run(std::uint64_t linear_block) {
  start_block(linear_block);
  while (live_ > 0 && !failed_) {
    if (launch_.aborted()) break;  // another block failed: abandon this one
    if (runnable_.empty()) {
      fail(deadlock_status());
      break;
    }
    Thread& t = threads_[runnable_.front()];
    runnable_.pop_front();
    t_current = &t;
    t.fiber.resume();
    t_current = nullptr;
    if (t.yielded) {
      t.yielded = false;
      if (++yield_streak_ >= live_) check_spin();
    }
  }
  // Threads still waiting are abandoned with their stacks: the next block reuses them.
  finish_block();
}

void BlockRunner::thread_main(void* arg) {
  Thread& t = *static_cast<Thread*>(arg);
  BlockRunner& r = *t.runner;
  bool threw = false;
  try {
    r.plan_.entry(r.plan_.params);
  } catch (...) {
    // Trap only after the handler: a fiber abandoned inside one would leave the exception in
    // the worker thread's C++ runtime state.
    threw = true;
  }
  if (threw) r.trap(t, "the kernel threw a C++ exception");
  else r.exit_thread(t);
  t.stack_clean = !t.trapped;
  t.fiber.finish();
}

BlockRunner::Thread& BlockRunner::current() {
  if (t_current == nullptr) {
    // A kernel entry called outside the executor: there is no thread to run as.
    std::fputs("moejit host executor: a runtime call came from outside a host kernel launch\n",
               stderr);
    std::abort();
  }
  return *t_current;
}

void BlockRunner::wait(Thread& t) {
  t.fiber.suspend();
  // Resumed only once made runnable again, or never (the block failed).
}

void BlockRunner::progressed() {
  yield_streak_ = 0;
  spinning_ = false;
  launch_.note_progress();
}

void BlockRunner::fail(Status status) {
  failed_ = true;
  launch_.fail(std::move(status));
}

// --- Barriers ----------------------------------------------------------------------------------

bool BlockRunner::barrier_complete(const Barrier& b) const {
  // Threads that have exited count as arrived at a whole-block barrier (bar.sync with no count,
  // __syncthreads): the device does not wait for exited threads either, and kernels rely on it
  // when surplus threads return early. A barrier with an explicit count waits for that many
  // arrivals.
  const u32 need = b.threads != 0 ? b.threads : plan_.block_threads - exited_;
  return b.arrived >= need;
}

void BlockRunner::release(Barrier& b, const Thread* caller) {
  std::sort(b.waiting.begin(), b.waiting.end());
  for (u32 i : b.waiting) {
    Thread& w = threads_[i];
    if (&w == caller) continue;
    w.wait = Wait::runnable;
    runnable_.push_back(i);
  }
  b = Barrier{};
  progressed();
}

void BlockRunner::barrier(Thread& t, u32 id, u32 threads) {
  if (id >= kBarrierCount)
    return trap(t, fmt::format("bar.sync {}: barrier ids are 0 to {}", id, kBarrierCount - 1));
  if (threads != 0 && (threads % 32 != 0 || threads > plan_.block_threads))
    return trap(
        t, fmt::format("bar.sync {}, {}: the thread count must be a multiple of 32 and at most "
                       "the block's {} threads",
                       id, threads, plan_.block_threads));
  Barrier& b = barriers_[id];
  if (b.arrived > 0 && b.threads != threads)
    return trap(t, fmt::format("bar.sync {} with a count of {} while {} threads wait at it with a "
                               "count of {} (0: the whole block)",
                               id, threads, b.arrived, b.threads));
  b.threads = threads;
  b.arrived++;
  b.waiting.push_back(t.index);
  yield_streak_ = 0;
  if (barrier_complete(b)) {
    release(b, &t);
    return;
  }
  t.wait = Wait::barrier;
  t.wait_barrier = id;
  wait(t);
}

// --- Warp collectives --------------------------------------------------------------------------

u32 BlockRunner::lanes_present(u32 warp) const {
  const u32 n = plan_.block_threads - warp * 32;
  return n >= 32 ? 0xffffffffu : (1u << n) - 1u;
}

void BlockRunner::warp_exchange(Thread& t, u32 mask, const void* in, void* out, u32 bytes) {
  const u32 lane = t.index % 32, w = t.index / 32, bit = 1u << lane;
  Warp& warp = warps_[w];
  if (bytes > kMaxExchangeBytes)
    return trap(t, fmt::format("warp_exchange of {} bytes: at most {}", bytes, kMaxExchangeBytes));
  if (bytes > 0 && (in == nullptr || out == nullptr))
    return trap(t, fmt::format("warp_exchange of {} bytes with a null {} buffer", bytes,
                               in == nullptr ? "input" : "output"));
  if (!(mask & bit))
    return trap(t, fmt::format("warp collective with mask 0x{:08x}, which does not include the "
                               "calling lane {}",
                               mask, lane));
  if (u32 absent = mask & ~lanes_present(w))
    return trap(
        t, fmt::format("warp collective with mask 0x{:08x} names lanes {} of warp {}, which do "
                       "not exist: the block has {} threads",
                       mask, lane_list(absent), w, plan_.block_threads));
  if (u32 gone = mask & warp.exited)
    return trap(
        t, fmt::format("warp collective with mask 0x{:08x} names lanes {} of warp {}, which have "
                       "exited: it would never complete",
                       mask, lane_list(gone), w));

  // The lane joins the oldest collective of its warp that names the same mask and still waits
  // for it. Overlapping masks may legitimately be in flight at once (lanes 16-31 finishing a
  // collective of their own before joining lanes 0-15 in a full-warp one), so a mismatch of
  // masks shows only as a collective that never completes: a deadlock, or a trap when a lane
  // it waits for exits. Without program counters, two lanes at different call sites with the
  // same mask and size are indistinguishable from two at the same one.
  auto it = std::find_if(warp.pending.begin(), warp.pending.end(), [&](const Exchange& e) {
    return e.mask == mask && !(e.arrived & bit);
  });
  if (it != warp.pending.end() && it->bytes != bytes)
    return trap(t, fmt::format("warp collective with mask 0x{:08x} exchanging {} bytes while "
                               "lanes {} of warp {} wait for it in one exchanging {} bytes: "
                               "the lanes of a mask are at different collectives",
                               mask, bytes, lane_list(it->arrived), w, it->bytes));
  if (it == warp.pending.end()) {
    warp.pending.emplace_back();
    it = std::prev(warp.pending.end());
    it->mask = mask;
    it->bytes = bytes;
  }
  Exchange& e = *it;
  if (bytes > 0) std::memcpy(e.slots[lane], in, bytes);
  e.out[lane] = out;
  e.arrived |= bit;
  yield_streak_ = 0;
  if (e.arrived != mask) {
    t.wait = Wait::exchange;
    wait(t);
    return;  // the last lane to arrive has filled `out`
  }

  // Complete: every participant's `out` gets the 32 slots, zero for lanes outside the mask.
  if (bytes > 0) {
    unsigned char all[32 * kMaxExchangeBytes];
    for (u32 l = 0; l < 32; ++l) {
      if (mask >> l & 1u) std::memcpy(all + l * bytes, e.slots[l], bytes);
      else std::memset(all + l * bytes, 0, bytes);
    }
    for (u32 l = 0; l < 32; ++l)
      if (mask >> l & 1u) std::memcpy(e.out[l], all, 32 * bytes);
  }
  for (u32 l = 0; l < 32; ++l) {
    if (!(mask >> l & 1u) || l == lane) continue;
    const u32 i = w * 32 + l;
    threads_[i].wait = Wait::runnable;
    runnable_.push_back(i);
  }
  warp.pending.erase(it);
  progressed();
}

void BlockRunner::yield(Thread& t) {
  t.yielded = true;
  runnable_.push_back(t.index);
  t.fiber.suspend();
}

// --- cp.async ------------------------------------------------------------------------------------

void BlockRunner::cp_async(Thread& t, void* dst, const void* src, u32 dst_bytes, u32 src_bytes) {
  if (dst_bytes != 4 && dst_bytes != 8 && dst_bytes != 16)
    return trap(t,
                fmt::format("cp.async of {} bytes: the copy size must be 4, 8 or 16", dst_bytes));
  if (src_bytes > dst_bytes)
    return trap(t, fmt::format("cp.async with src-size {} larger than its copy size {}", src_bytes,
                               dst_bytes));
  const auto d = reinterpret_cast<std::uintptr_t>(dst), s = reinterpret_cast<std::uintptr_t>(src);
  const auto lo = reinterpret_cast<std::uintptr_t>(shared_);
  if (d < lo || d + dst_bytes > lo + plan_.dynamic_shared_bytes)
    return trap(
        t, fmt::format("cp.async destination {} (+{} bytes) is outside the block's {} bytes of "
                       "shared memory at {}",
                       dst, dst_bytes, plan_.dynamic_shared_bytes, static_cast<void*>(shared_)));
  if (d % dst_bytes != 0 || (src_bytes > 0 && s % dst_bytes != 0))
    return trap(t,
                fmt::format("cp.async of {} bytes from {} to {}: both addresses must be aligned to "
                            "the copy size",
                            dst_bytes, src, dst));
  t.uncommitted.push_back({dst, src, dst_bytes, src_bytes});
}

void BlockRunner::cp_async_commit(Thread& t) {
  t.committed.push_back(std::move(t.uncommitted));
  t.uncommitted.clear();
}

void BlockRunner::cp_async_wait(Thread& t, u32 pending) {
  while (t.committed.size() > pending) {
    for (const AsyncCopy& c : t.committed.front()) perform(c);
    t.committed.pop_front();
  }
}

// --- wgmma.mma_async -----------------------------------------------------------------------------

void BlockRunner::mma_async(Thread& t, const char* (*run)(void* ctx), const void* ctx,
                            u32 ctx_bytes) {
  const auto* bytes = static_cast<const unsigned char*>(ctx);
  t.mma_uncommitted.push_back({run, std::vector<unsigned char>(bytes, bytes + ctx_bytes)});
}

void* BlockRunner::thread_scratch(Thread& t, u32 bytes) {
  if (t.scratch_used && t.scratch.size() != bytes) {
    trap(t, fmt::format("thread_scratch of {} bytes after a call for {}: the size must not change", bytes,
                        t.scratch.size()));
    return nullptr;
  }
  if (t.scratch.size() != bytes) t.scratch.assign(bytes, 0);
  t.scratch_used = true;
  return t.scratch.data();
}

void BlockRunner::mma_async_commit(Thread& t) {
  t.mma_committed.push_back(std::move(t.mma_uncommitted));
  t.mma_uncommitted.clear();
}

void BlockRunner::mma_async_wait(Thread& t, u32 pending) {
  while (t.mma_committed.size() > pending) {
    for (AsyncMma& op : t.mma_committed.front())
      if (const char* failed = op.run(op.ctx.data()); failed != nullptr) return trap(t, failed);
    t.mma_committed.pop_front();
  }
}

// --- Exit, trap, failure reports -------------------------------------------------------------

void BlockRunner::exit_thread(Thread& t) {
  const u32 lane = t.index % 32, w = t.index / 32;
  Warp& warp = warps_[w];
  for (const Exchange& e : warp.pending)
    if (e.mask >> lane & 1u)
      return trap(
          t, fmt::format("exits while lanes {} of warp {} wait for it in a warp collective with "
                         "mask 0x{:08x}",
                         lane_list(e.arrived), w, e.mask));
  std::size_t mma_pending = t.mma_uncommitted.size();
  for (const auto& group : t.mma_committed) mma_pending += group.size();
  if (mma_pending > 0)
    return trap(t, fmt::format("exits with {} wgmma.mma_async operation(s) not waited for "
                               "(wgmma.wait_group): their results would be lost",
                               mma_pending));
  // Copies never waited for are dropped: on the device they would land at some unknown time,
  // so whatever read them was racing.
  t.uncommitted.clear();
  t.committed.clear();
  t.wait = Wait::exited;
  warp.exited |= 1u << lane;
  live_--;
  exited_++;
  for (Barrier& b : barriers_)
    if (b.arrived > 0 && b.threads == 0 && barrier_complete(b)) release(b, nullptr);
  progressed();
}

void BlockRunner::trap(Thread& t, std::string_view message) {
  fail(error(Code::internal, "host kernel {}: trap in {} {}: {}", plan_.kernel_label,
             block_name(), thread_name(t), message));
  t.trapped = true;
  t.wait = Wait::exited;
}

void BlockRunner::leave_if_trapped(Thread& t) {
  // Only here, in a frame that owns nothing: whatever the failing call had allocated has been
  // released by returning, since the abandoned frames are never unwound.
  if (t.trapped) t.fiber.finish();
}

void BlockRunner::check_spin() {
  yield_streak_ = 0;
  const auto now = std::chrono::steady_clock::now();
  const std::uint64_t progress = launch_.progress();
  if (!spinning_ || progress != spin_progress_) {
    spinning_ = true;
    spin_progress_ = progress;
    spin_since_ = now;
    return;
  }
  if (now - spin_since_ < plan_.spin_timeout) return;
  fail(error(Code::internal,
             "host kernel {}: {} made no progress for {} ms: its live threads only spin in "
             "yield(), and no thread of the launch passed a barrier, completed a warp "
             "collective or exited meanwhile ({} of {} blocks started, {} workers; a spin-wait "
             "on another block needs that block running; MOEJIT_HOST_SPIN_TIMEOUT_MS sets the "
             "limit). Threads: {}",
             plan_.kernel_label, block_name(), plan_.spin_timeout.count(),
             launch_.blocks_taken(), plan_.blocks, plan_.workers, waits_summary()));
}

std::string BlockRunner::block_name() const {
  return fmt::format("block ({},{},{})", block_idx_.x, block_idx_.y, block_idx_.z);
}

std::string BlockRunner::thread_name(const Thread& t) const {
  const Dim3& i = t.state.thread_idx;
  return fmt::format("thread ({},{},{}) (linear {}, warp {} lane {})", i.x, i.y, i.z, t.index,
                     t.index / 32, t.index % 32);
}

std::string BlockRunner::wait_description(const Thread& t) const {
  switch (t.wait) {
    case Wait::runnable: return "runnable";
    case Wait::exited: return "exited";
    case Wait::barrier: {
      const Barrier& b = barriers_[t.wait_barrier];
      if (b.threads == 0)
        return fmt::format("wait at bar.sync {} for the whole block ({} arrived, {} exited)",
                           t.wait_barrier, b.arrived, exited_);
      return fmt::format("wait at bar.sync {} for {} threads ({} arrived)", t.wait_barrier,
                         b.threads, b.arrived);
    }
    case Wait::exchange:
      for (const Exchange& e : warps_[t.index / 32].pending)
        if (e.mask >> (t.index % 32) & 1u)
          return fmt::format("wait in a warp collective of warp {} with mask 0x{:08x} for lanes {}",
                             t.index / 32, e.mask, lane_list(e.mask & ~e.arrived));
      return "wait in a warp collective";
  }
  return "?";
}

std::string BlockRunner::waits_summary() const {
  std::string groups;
  std::size_t count = 0;
  const u32 n = plan_.block_threads;
  for (u32 i = 0; i < n;) {
    std::string what = wait_description(threads_[i]);
    u32 end = i;
    while (end + 1 < n && wait_description(threads_[end + 1]) == what) ++end;
    if (count++ < kMaxDeadlockGroups)
      fmt::format_to(std::back_inserter(groups), "{}{}: {}", groups.empty() ? "" : "; ",
                     i == end ? fmt::format("thread {}", i) : fmt::format("threads {}-{}", i, end),
                     what);
    i = end + 1;
  }
  if (count > kMaxDeadlockGroups)
    fmt::format_to(std::back_inserter(groups), "; ... {} more groups", count - kMaxDeadlockGroups);
  return groups;
}

Status BlockRunner::deadlock_status() const {
  return error(Code::internal,
               "host kernel {}: deadlock in {}: no live thread can proceed. {}. (Exited threads "
               "count as arrived at whole-block barriers only, never at a barrier with a thread "
               "count or in a warp collective.)",
               plan_.kernel_label, block_name(), waits_summary());
}

// --- The Runtime table's entry points -------------------------------------------------------

ThreadState* BlockRunner::rt_self() { return &current().state; }

void BlockRunner::rt_barrier(u32 id, u32 threads) {
  Thread& t = current();
  t.runner->barrier(t, id, threads);
  leave_if_trapped(t);
}

void BlockRunner::rt_warp_exchange(u32 mask, const void* in, void* out, u32 bytes) {
  Thread& t = current();
  t.runner->warp_exchange(t, mask, in, out, bytes);
  leave_if_trapped(t);
}

void BlockRunner::rt_yield() {
  Thread& t = current();
  t.runner->yield(t);
  leave_if_trapped(t);
}

void BlockRunner::rt_cp_async(void* dst, const void* src, u32 dst_bytes, u32 src_bytes) {
  Thread& t = current();
  t.runner->cp_async(t, dst, src, dst_bytes, src_bytes);
  leave_if_trapped(t);
}

void BlockRunner::rt_cp_async_commit() {
  Thread& t = current();
  t.runner->cp_async_commit(t);
  leave_if_trapped(t);
}

void BlockRunner::rt_cp_async_wait(u32 pending) {
  Thread& t = current();
  t.runner->cp_async_wait(t, pending);
  leave_if_trapped(t);
}

void BlockRunner::rt_mma_async(const char* (*run)(void* ctx), const void* ctx, u32 ctx_bytes) {
  Thread& t = current();
  t.runner->mma_async(t, run, ctx, ctx_bytes);
  leave_if_trapped(t);
}

void* BlockRunner::rt_thread_scratch(u32 bytes) {
  Thread& t = current();
  void* scratch = t.runner->thread_scratch(t, bytes);
  leave_if_trapped(t);
  return scratch;
}

void BlockRunner::rt_mma_async_commit() {
  Thread& t = current();
  t.runner->mma_async_commit(t);
  leave_if_trapped(t);
}

void BlockRunner::rt_mma_async_wait(u32 pending) {
  Thread& t = current();
  t.runner->mma_async_wait(t, pending);
  leave_if_trapped(t);
}

void BlockRunner::rt_trap(const char* message) {
  Thread& t = current();
  t.runner->trap(t, message != nullptr ? message : "(no message)");
  leave_if_trapped(t);
  std::abort();  // unreachable: a trapped thread never returns
}

}  // namespace moejit::host
