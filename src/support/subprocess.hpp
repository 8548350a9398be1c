#pragma once
// Runs a program without a shell and captures what it prints: for the host kernel compiler,
// whose arguments must never be re-split or expanded.

#include <string>
#include <vector>

#include "support/status.hpp"

namespace moejit {

struct ProcessOutput {
  int exit_code = -1;  // -signal when the program was killed by a signal
  std::string output;  // stdout and stderr, interleaved as written
};

// Runs argv[0] (searched in PATH when it has no '/') with `argv` in directory `cwd` (the
// caller's when empty), stdin from /dev/null, and the caller's environment. An error only when
// the program could not be started; a failing program is a ProcessOutput with its exit code.
Result<ProcessOutput> run_captured(const std::vector<std::string>& argv,
                                   const std::string& cwd = {});

}  // namespace moejit
