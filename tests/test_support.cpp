#include "test_support.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "compile/nvrtc_library.hpp"

#ifndef MOEJIT_REQUIRE_TOOLCHAIN_DEFAULT
#define MOEJIT_REQUIRE_TOOLCHAIN_DEFAULT 0
#endif

extern char** environ;

namespace moejit::test {
namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string base = (fs::temp_directory_path() / "moejit-test-XXXXXX").string();
  if (::mkdtemp(base.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = base;
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

namespace {

std::vector<std::string> merged_environment(const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : extra) env[k] = v;
  std::vector<std::string> out;
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (auto& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

int spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
          int out_fd, int err_fd) {
  auto args = argv;
  auto envs = merged_environment(env);
  auto c_args = c_strings(args);
  auto c_env = c_strings(envs);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_fd, 2);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, c_args[0], &actions, nullptr, c_args.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("posix_spawn failed for " + argv[0]);
  return pid;
}

std::string drain(int fd) {
  std::string data;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) data.append(buf, static_cast<std::size_t>(n));
  return data;
}

}  // namespace

bool sanitizer_tracer_failed(const ProcessResult& r) {
  return r.exit_code != 0 && r.err.find("LeakSanitizer has encountered a fatal error") != std::string::npos;
}

namespace {

ProcessResult run_process_once(const std::vector<std::string>& argv,
                               const std::map<std::string, std::string>& env) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error("pipe failed");
  int pid = spawn(argv, env, out_pipe[1], err_pipe[1]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ProcessResult r;
  std::thread err_reader([&] { r.err = drain(err_pipe[0]); });
  r.out = drain(out_pipe[0]);
  err_reader.join();
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return r;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env) {
  ProcessResult r = run_process_once(argv, env);
  if (!sanitizer_tracer_failed(r)) return r;
  // LeakSanitizer's own failure at the child's exit (its tracer thread crashing while it
  // suspends the process, a known sanitizer issue on some kernels), not the program's: run it
  // once more and say so, where CI's log shows it.
  std::fprintf(stderr, "moejit tests: %s failed in LeakSanitizer itself (exit %d), running it once more; its stderr:\n%s\n",
               argv.empty() ? "?" : argv[0].c_str(), r.exit_code, r.err.c_str());
  return run_process_once(argv, env);
}

int spawn_process(const std::vector<std::string>& argv,
                  const std::map<std::string, std::string>& env) {
  int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  int pid = spawn(argv, env, null_fd, null_fd);
  ::close(null_fd);
  return pid;
}

LogCapture::LogCapture() {
  set_log_level(LogLevel::debug);
  set_log_sink([this](LogLevel level, std::string_view message) {
    std::lock_guard lock(mutex_);
    messages_.emplace_back(level, std::string(message));
  });
}

LogCapture::~LogCapture() {
  set_log_sink({});
  set_log_level(LogLevel::warn);
}

std::vector<std::string> LogCapture::messages(LogLevel at_most) const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [level, m] : messages_)
    if (static_cast<int>(level) <= static_cast<int>(at_most)) out.push_back(m);
  return out;
}

std::size_t LogCapture::count_containing(std::string_view needle) const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [level, m] : messages_) n += m.find(needle) != std::string::npos;
  return n;
}

store::StoreOptions store_options_in(const TempDir& dir) {
  store::StoreOptions o;
  o.dir = dir / "store";
  o.lock_dir = dir / "locks";
  o.max_bytes = 0;
  o.lock_timeout = std::chrono::milliseconds(60000);
  return o;
}

KernelResolver::Options resolver_options_in(const TempDir& dir) {
  KernelResolver::Options o;
  o.store = store_options_in(dir);
  o.compile_threads = 2;
  o.templates = codegen::TemplateSet::embedded();
  return o;
}

KernelSpec align_spec(std::uint32_t experts, std::uint16_t bm, std::uint16_t warps, Arch arch) {
  KernelSpec s{};
  s.op = Op::moe_align;
  s.arch = arch;
  s.backend = Backend::device;
  s.experts = experts;
  s.bm = bm;
  s.warps = warps;
  return s;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void set_mtime(const std::string& path, std::int64_t seconds) {
  struct timespec t[2] = {{seconds, 0}, {seconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), t, 0) == 0);
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

bool toolchain_required() {
  const char* v = std::getenv("MOEJIT_REQUIRE_TOOLCHAIN");
  if (v != nullptr && *v != '\0') return std::string_view(v) != "0";
  return MOEJIT_REQUIRE_TOOLCHAIN_DEFAULT != 0;
}

bool toolchain_missing(const std::string& why) {
  if (toolchain_required())
    FAIL_CHECK(why << " (MOEJIT_REQUIRE_TOOLCHAIN is on: a test that needs the toolchain fails without it)");
  else
    MESSAGE("skipped: " << why);
  return false;
}

bool nvrtc_or_skip() {
  auto nvrtc = NvrtcLibrary::get();
  if (nvrtc.ok()) return true;
  return toolchain_missing("NVRTC is not available here: " + nvrtc.status().message());
}

}  // namespace moejit::test
