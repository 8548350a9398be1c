// The test helper that runs child processes (the CLI, store workers, C programs): what it
// captures, and its one retry when LeakSanitizer itself fails at a child's exit.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>

#include "test_support.hpp"

namespace moejit::test {

TEST_CASE("run_process captures both streams and the exit status, and does not retry a program's own failure") {
  TempDir dir;
  // Counts its runs in a file, so a retry would show.
  const std::string script = "n=$(cat '" + dir / "runs" + "' 2>/dev/null || echo 0); echo $((n + 1)) > '" +
                             dir / "runs" + "'; echo out-$FOO; echo err-text >&2; exit 3";
  const ProcessResult r = run_process({"/bin/sh", "-c", script}, {{"FOO", "bar"}});
  CHECK(r.exit_code == 3);
  CHECK(r.out == "out-bar\n");
  CHECK(r.err == "err-text\n");
  CHECK(slurp(dir / "runs") == "1\n");
  CHECK_FALSE(sanitizer_tracer_failed(r));
}

TEST_CASE("run_process runs a child once more when LeakSanitizer itself failed at its exit, and only once") {
  TempDir dir;
  const std::string signature = "==1==LeakSanitizer has encountered a fatal error.";
  // Fails with LeakSanitizer's message on its first run only.
  const std::string flaky = "if [ -e '" + dir / "ran" + "' ]; then echo second; exit 0; fi; touch '" + dir / "ran" +
                            "'; echo first; echo 'Tracer caught signal 11' >&2; echo '" + signature + "' >&2; exit 1";
  ProcessResult r = run_process({"/bin/sh", "-c", flaky});
  CHECK(r.exit_code == 0);
  CHECK(r.out == "second\n");
  CHECK(r.err.empty());

  // Fails that way every time: two runs, the second's result.
  const std::string always = "n=$(cat '" + dir / "runs" + "' 2>/dev/null || echo 0); echo $((n + 1)) > '" +
                             dir / "runs" + "'; echo run-$((n + 1)); echo '" + signature + "' >&2; exit 23";
  r = run_process({"/bin/sh", "-c", always});
  CHECK(r.exit_code == 23);
  CHECK(r.out == "run-2\n");
  CHECK(sanitizer_tracer_failed(r));
  CHECK(slurp(dir / "runs") == "2\n");

  // The message on a successful exit is not a failure to retry.
  CHECK_FALSE(sanitizer_tracer_failed(ProcessResult{0, "", signature}));
}

}  // namespace moejit::test
