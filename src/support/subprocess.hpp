#pragma once
// Runs a program without a shell and captures what it prints: for the host kernel compiler,
// whose arguments must never be re-split or expanded.

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "support/status.hpp"

namespace moejit {

struct ProcessOutput {
  int exit_code = -1;  // -signal when the program was killed by a signal
  std::string output;  // stdout and stderr, interleaved as written; clipped (see RunLimits)
};

struct RunLimits {
  // Past this the program and everything it started (its process group) are killed and the
  // run is an error: a hung compiler must not hold a key lock and a compile slot for ever.
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};
  // Output kept: the first and the last half of it, with a line saying how much was dropped
  // between them, so that a compiler printing without end cannot exhaust memory.
  std::size_t max_output_bytes = std::size_t{1} << 20;
};

// Runs argv[0] (searched in PATH when it has no '/') with `argv` in directory `cwd` (the
// caller's when empty), stdin from /dev/null, the caller's environment, in a process group of
// its own. An error when the program could not be started (unavailable) or ran past
// `limits.timeout` (unavailable, the message says so); a failing program is a ProcessOutput
// with its exit code.
Result<ProcessOutput> run_captured(const std::vector<std::string>& argv,
                                   const std::string& cwd = {}, const RunLimits& limits = {});

// `text` cut to at most about `max_bytes`: its head and tail halves around a line that says how
// many bytes were left out. For compiler logs carried into error messages.
std::string clip_middle(std::string text, std::size_t max_bytes);

}  // namespace moejit
