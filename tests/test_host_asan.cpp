// Under AddressSanitizer (MOEJIT_SANITIZE=address) host kernels are instrumented too, so an
// out-of-bounds access of a kernel to a caller's buffer is reported. The report ends the
// process, so the launch runs in a forked child.

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host_test_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

const char* kOutOfBounds = R"(#pragma once
#include "common/platform.cuh"
#include "hosttest/params.cuh"
namespace moejit::kernels {
// Each thread writes its word of out[0, n); mode 1: thread 0 also writes out[n].
template <class Spec>
MOEJIT_GLOBAL void out_of_bounds(hosttest::Params p) {
  const moejit::u32 tid = moejit::prim::thread_x();
  p.out[tid] = tid;
  if (p.mode == 1 && tid == 0) p.out[p.n] = 1;
}
}  // namespace moejit::kernels
)";

struct ChildResult {
  int status = 0;
  std::string err;
};

// Forks; the child launches and exits 0 on success, 3 on an error Status, and whatever ASan
// decides on a report. The child's stderr comes back.
ChildResult launch_in_child(const ResolvedKernel& k, std::uint32_t mode, std::uint32_t n) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    ::dup2(fds[1], 2);
    std::vector<std::uint32_t> out(n, 0);  // exactly n words: out[n] is past the allocation
    HostTestParams p{.out = out.data(), .mode = mode, .n = n};
    Status s = launch_test_kernel(k, p, shape_of(1, n, 0));
    if (!s.ok()) ::write(2, s.message().data(), s.message().size());
    ::_exit(s.ok() ? 0 : 3);
  }
  ::close(fds[1]);
  ChildResult r;
  char buf[4096];
  ssize_t got;
  while ((got = ::read(fds[0], buf, sizeof buf)) > 0)
    r.err.append(buf, static_cast<std::size_t>(got));
  ::close(fds[0]);
  ::waitpid(pid, &r.status, 0);
  return r;
}

}  // namespace

TEST_CASE("ASan reports an out-of-bounds global write of a host kernel") {
#if !MOEJIT_SANITIZE_ADDRESS
  MESSAGE("skipped: this build is not instrumented with AddressSanitizer, so host kernels are "
          "not either; configure with -DMOEJIT_SANITIZE=address to run this test");
  return;
#else
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  auto k = build_host_test_kernel(*compiler, {{"hosttest/oob.cuh", kOutOfBounds}},
                                  "hosttest/oob.cuh", "out_of_bounds", 64, 0);
  REQUIRE_MESSAGE(k.ok(), k.status().message());

  ChildResult fine = launch_in_child(*k, 0, 64);
  CHECK_MESSAGE(WIFEXITED(fine.status), fine.err);
  CHECK_MESSAGE(WEXITSTATUS(fine.status) == 0, fine.err);

  ChildResult bad = launch_in_child(*k, 1, 64);
  CHECK_FALSE((WIFEXITED(bad.status) && WEXITSTATUS(bad.status) == 0));
  CHECK_MESSAGE(contains(bad.err, "ERROR: AddressSanitizer: heap-buffer-overflow"), bad.err);
  CHECK_MESSAGE(contains(bad.err, "WRITE of size 4"), bad.err);
  CHECK_MESSAGE(contains(bad.err, "0 bytes to the right of 256-byte region"), bad.err);
#endif
}
