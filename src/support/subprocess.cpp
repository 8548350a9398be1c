#include "support/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "support/fs.hpp"

extern char** environ;

namespace moejit {
namespace {

using Clock = std::chrono::steady_clock;

// posix_spawn_file_actions_t / posix_spawnattr_t with cleanup on every path.
struct FileActions {
  posix_spawn_file_actions_t actions;
  FileActions() { posix_spawn_file_actions_init(&actions); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
};
struct SpawnAttributes {
  posix_spawnattr_t attributes;
  SpawnAttributes() { posix_spawnattr_init(&attributes); }
  ~SpawnAttributes() { posix_spawnattr_destroy(&attributes); }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
};

std::string omitted_line(std::size_t bytes) {
  return fmt::format("\n[... {} bytes left out ...]\n", bytes);
}

// Output kept as a head and a rolling tail, each at most half the limit.
class ClippedOutput {
 public:
  explicit ClippedOutput(std::size_t max_bytes) : half_(std::max<std::size_t>(max_bytes / 2, 1)) {}
  void append(const char* data, std::size_t n) {
    std::size_t to_head = std::min(n, half_ - std::min(half_, head_.size()));
    head_.append(data, to_head);
    data += to_head;
    n -= to_head;
    if (n == 0) return;
    tail_.append(data, n);
    if (tail_.size() > 2 * half_) {  // trim in bulk: amortized linear
      std::size_t cut = tail_.size() - half_;
      tail_.erase(0, cut);
      dropped_ += cut;
    }
  }
  std::string take() {
    if (tail_.size() > half_) {
      dropped_ += tail_.size() - half_;
      tail_.erase(0, tail_.size() - half_);
    }
    if (dropped_ > 0) head_ += omitted_line(dropped_);
    return head_ + tail_;
  }

 private:
  std::size_t half_;
  std::string head_, tail_;
  std::size_t dropped_ = 0;
};

// Kills the program's whole process group (a compiler driver's cc1plus and as included) and
// reaps the program.
void kill_and_reap(pid_t pid) {
  ::kill(-pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

int poll_ms(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
}

}  // namespace

std::string clip_middle(std::string text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t half = max_bytes / 2;
  std::size_t dropped = text.size() - 2 * half;
  return text.substr(0, half) + omitted_line(dropped) + text.substr(text.size() - half);
}

Result<ProcessOutput> run_captured(const std::vector<std::string>& argv, const std::string& cwd,
                                   const RunLimits& limits) {
  if (argv.empty() || argv[0].empty())
    return error(Code::invalid_argument, "run_captured: argv is empty; expected a program name");
  if (limits.timeout.count() <= 0)
    return error(Code::invalid_argument, "run_captured: timeout = {} ms; expected at least 1",
                 limits.timeout.count());
  const Clock::time_point deadline = Clock::now() + limits.timeout;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return error(Code::io_error, "pipe for the output of '{}': {}", argv[0], std::strerror(errno));
  UniqueFd read_end(fds[0]), write_end(fds[1]);

  FileActions fa;
  posix_spawn_file_actions_addopen(&fa.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa.actions, write_end.get(), 1);
  posix_spawn_file_actions_adddup2(&fa.actions, write_end.get(), 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa.actions, cwd.c_str());
  // A process group of its own, so that a timeout can kill what the program started as well.
  SpawnAttributes sa;
  posix_spawnattr_setflags(&sa.attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&sa.attributes, 0);

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &fa.actions, &sa.attributes, args.data(), environ);
  write_end.reset();  // the child holds its copy; EOF on read_end comes when it exits
  if (rc != 0)
    return error(Code::unavailable, "cannot run '{}': {}", argv[0], std::strerror(rc));

  ClippedOutput output(limits.max_output_bytes);
  auto timed_out = [&] {
    kill_and_reap(pid);
    return error(Code::unavailable,
                 "'{}' did not finish within {} ms and was killed; it printed:\n{}", argv[0],
                 limits.timeout.count(), output.take());
  };
  char buf[8192];
  for (;;) {
    pollfd p{read_end.get(), POLLIN, 0};
    int ready = ::poll(&p, 1, poll_ms(deadline));
    if (ready < 0 && errno != EINTR) {
      int e = errno;
      kill_and_reap(pid);
      return error(Code::internal, "poll on the output of '{}': {}", argv[0], std::strerror(e));
    }
    if (ready <= 0) {
      if (Clock::now() >= deadline) return timed_out();
      continue;
    }
    ssize_t n = ::read(read_end.get(), buf, sizeof buf);
    if (n > 0) {
      output.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  // The output is closed; the program may still linger (it closed its descriptors early).
  int status = 0;
  for (auto pause = std::chrono::microseconds(100);;) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) {
      int e = errno;
      return error(Code::internal, "waitpid for '{}' (pid {}): {}", argv[0], pid,
                   std::strerror(e));
    }
    if (Clock::now() >= deadline) return timed_out();
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(std::chrono::milliseconds(20)));
  }
  ProcessOutput out;
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  out.output = output.take();
  return out;
}

}  // namespace moejit
