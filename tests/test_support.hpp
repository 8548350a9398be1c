#pragma once
// Helpers shared by the test suites: temporary directories, child processes, log capture and
// spec builders.

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cache/store.hpp"
#include "runtime/kernel_resolver.hpp"
#include "spec/kernel_spec.hpp"
#include "support/log.hpp"

namespace moejit::test {

// A fresh directory under $TMPDIR, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

struct ProcessResult {
  int exit_code = -1;  // -signal when killed by a signal
  std::string out;
  std::string err;
};

// Runs `argv` with extra environment variables set, waits, and captures its output. A run that
// LeakSanitizer itself failed at exit (sanitizer_tracer_failed) is run once more, saying so on
// stderr; the second run's result is returned whatever it is.
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env = {});

// Whether a child's failure is LeakSanitizer's own ("LeakSanitizer has encountered a fatal
// error", e.g. its tracer thread crashing while it suspends the process), not the program's.
bool sanitizer_tracer_failed(const ProcessResult& r);

// Starts `argv` in the background with stdout/stderr sent to /dev/null; returns its pid.
int spawn_process(const std::vector<std::string>& argv,
                  const std::map<std::string, std::string>& env = {});

// Collects log messages for the lifetime of the object (replaces the sink).
class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  std::vector<std::string> messages(LogLevel at_most = LogLevel::warn) const;
  std::size_t count_containing(std::string_view needle) const;

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<LogLevel, std::string>> messages_;
};

// Store options rooted in `dir`: writable root dir/store, locks in dir/locks.
store::StoreOptions store_options_in(const TempDir& dir);

// Resolver options rooted in `dir`, embedded templates, two compile threads.
KernelResolver::Options resolver_options_in(const TempDir& dir);

// A valid moe_align spec for the device backend.
KernelSpec align_spec(std::uint32_t experts = 64, std::uint16_t bm = 16, std::uint16_t warps = 4,
                      Arch arch = Arch::sm_90a);

std::string slurp(const std::string& path);
void write_text(const std::string& path, const std::string& text);
// Sets a file's access and modification times (the store's last use) to `seconds` since 1970.
void set_mtime(const std::string& path, std::int64_t seconds);

// Tests that need a toolchain (NVRTC, the host C++ compiler) and do not find it skip, saying
// "skipped: <why>", or fail with <why> where the toolchain is required: CMake's
// MOEJIT_REQUIRE_TOOLCHAIN (on in CI) sets the default, the environment variable
// MOEJIT_REQUIRE_TOOLCHAIN=0/1 overrides it.
bool toolchain_required();
// Reports a missing toolchain as a skip or a failure; returns false, for `return` at the call.
bool toolchain_missing(const std::string& why);
// Whether NVRTC can be loaded; if not, toolchain_missing says so.
bool nvrtc_or_skip();

}  // namespace moejit::test
