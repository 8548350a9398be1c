// run_captured (src/support/subprocess.cpp): what a program prints, its exit status, and the
// limits that keep a hung or endlessly printing compiler from stalling or exhausting the caller.

#include <doctest/doctest.h>

#include <chrono>

#include "support/subprocess.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace std::chrono_literals;

TEST_CASE("run_captured returns the exit status and both streams") {
  auto r = run_captured({"sh", "-c", "echo out; echo err >&2; exit 3"});
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  CHECK(r->exit_code == 3);
  CHECK(r->output.find("out\n") != std::string::npos);
  CHECK(r->output.find("err\n") != std::string::npos);

  auto killed = run_captured({"sh", "-c", "kill -9 $$"});
  REQUIRE(killed.ok());
  CHECK(killed->exit_code == -9);

  auto missing = run_captured({"moejit-no-such-program"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == Code::unavailable);
}

TEST_CASE("a program past its timeout is killed with everything it started") {
  // The grandchild keeps the output pipe open: killing only the program would leave the read
  // waiting for the grandchild.
  const auto start = std::chrono::steady_clock::now();
  auto r = run_captured({"sh", "-c", "echo started; sleep 30 & sleep 30"}, {}, {.timeout = 300ms});
  const auto took = std::chrono::steady_clock::now() - start;
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == Code::unavailable);
  CHECK(r.status().message().find("did not finish within 300 ms") != std::string::npos);
  CHECK(r.status().message().find("started") != std::string::npos);
  CHECK(took < 10s);

  // A program that closes its output and lingers is bounded too.
  auto lingering = run_captured({"sh", "-c", "exec >/dev/null 2>&1; sleep 30"}, {},
                                {.timeout = 300ms});
  REQUIRE_FALSE(lingering.ok());
  CHECK(lingering.status().message().find("did not finish") != std::string::npos);

  auto zero = run_captured({"true"}, {}, {.timeout = 0ms});
  REQUIRE_FALSE(zero.ok());
  CHECK(zero.status().code() == Code::invalid_argument);
}

TEST_CASE("output past the limit keeps its head and tail and says how much was left out") {
  // 300000 bytes: "head" first, "tail" last, dots between.
  auto r = run_captured({"sh", "-c",
                         "printf head; head -c 299992 /dev/zero | tr '\\000' .; printf tail"},
                        {}, {.max_output_bytes = 1000});
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  CHECK(r->exit_code == 0);
  CHECK(r->output.size() < 1100);
  CHECK(r->output.starts_with("head"));
  CHECK(r->output.ends_with("tail"));
  CHECK(r->output.find("[... 299000 bytes left out ...]") != std::string::npos);

  auto small = run_captured({"printf", "short"}, {}, {.max_output_bytes = 1000});
  REQUIRE(small.ok());
  CHECK(small->output == "short");
}

TEST_CASE("clip_middle keeps short text and cuts long text around a count") {
  CHECK(clip_middle("abcdef", 6) == "abcdef");
  CHECK(clip_middle("abcdefgh", 4) == "ab\n[... 4 bytes left out ...]\ngh");
  CHECK(clip_middle(std::string(10, 'x'), 3) == "x\n[... 8 bytes left out ...]\nx");
}
