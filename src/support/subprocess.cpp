#include "support/subprocess.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "support/fs.hpp"

extern char** environ;

namespace moejit {
namespace {

// posix_spawn_file_actions_t with cleanup on every path.
struct FileActions {
  posix_spawn_file_actions_t actions;
  FileActions() { posix_spawn_file_actions_init(&actions); }
  ~FileActions() { posix_spawn_file_actions_destroy(&actions); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
};

}  // namespace

Result<ProcessOutput> run_captured(const std::vector<std::string>& argv, const std::string& cwd) {
  if (argv.empty() || argv[0].empty())
    return error(Code::invalid_argument, "run_captured: argv is empty; expected a program name");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return error(Code::io_error, "pipe for the output of '{}': {}", argv[0], std::strerror(errno));
  UniqueFd read_end(fds[0]), write_end(fds[1]);

  FileActions fa;
  posix_spawn_file_actions_addopen(&fa.actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa.actions, write_end.get(), 1);
  posix_spawn_file_actions_adddup2(&fa.actions, write_end.get(), 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa.actions, cwd.c_str());

  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &fa.actions, nullptr, args.data(), environ);
  write_end.reset();  // the child holds its copy; EOF on read_end comes when it exits
  if (rc != 0)
    return error(Code::unavailable, "cannot run '{}': {}", argv[0], std::strerror(rc));

  ProcessOutput out;
  char buf[8192];
  for (;;) {
    ssize_t n = ::read(read_end.get(), buf, sizeof buf);
    if (n > 0) {
      out.output.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      return error(Code::internal, "waitpid for '{}' (pid {}): {}", argv[0], pid,
                   std::strerror(errno));
  }
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return out;
}

}  // namespace moejit
