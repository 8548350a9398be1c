// A memory hit allocates nothing. Its own binary: it replaces the global operator new to count.

#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "compile/nvrtc_library.hpp"
#include "test_support.hpp"

namespace {
std::atomic<long> g_allocations{0};
}

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using namespace moejit;
using namespace moejit::test;

TEST_CASE("a memory hit performs no heap allocation") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  auto r = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(r.ok());
  KernelSpec spec = align_spec(64, 16, 2);
  REQUIRE((*r)->resolve(spec).ok());  // miss: compiles, allocates freely

  long before = g_allocations.load();
  bool all_memory = true;
  for (int i = 0; i < 10000; ++i) {
    auto hit = (*r)->resolve(spec);
    all_memory &= hit.ok() && hit->source == KernelSource::memory;
  }
  long after = g_allocations.load();
  CHECK(all_memory);
  CHECK(after - before == 0);
  // The counter works: a miss of a new spec allocates.
  REQUIRE((*r)->resolve(align_spec(64, 32, 2)).ok());
  CHECK(g_allocations.load() > after);
}
