#include "cache/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "support/log.hpp"

namespace moejit::store {

KeyLock::~KeyLock() = default;

KeyLock KeyLock::acquire(const std::string& path, std::chrono::milliseconds timeout) {
  KeyLock lock;
  // Never through a link (it could point anywhere, and O_CREAT would create the target), and
  // only a file of our own: waiting on another user's lock would let them stall every compile.
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    log(LogLevel::warn, "cannot open lock file '{}': {}; compiling without it", path, std::strerror(errno));
    return lock;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
    log(LogLevel::warn, "lock file '{}' is not a regular file of yours; compiling without it", path);
    return lock;
  }
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) break;
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) {
      log(LogLevel::debug, "cannot lock '{}': {}", path, std::strerror(errno));
      return lock;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      lock.timed_out_ = true;
      lock.waited_ms_ = std::chrono::duration<double, std::milli>(
                            std::chrono::steady_clock::now() - start).count();
      return lock;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  lock.waited_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  lock.fd_ = std::move(fd);
  return lock;
}

}  // namespace moejit::store
