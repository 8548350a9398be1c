#include "support/fs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

namespace moejit {

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

namespace {
Status errno_status(std::string_view what, const std::string& path, int err) {
  return error(Code::io_error, "{} '{}': {}", what, path, std::strerror(err));
}
}  // namespace

Result<std::string> read_fd(int fd, const std::string& path_for_errors) {
  std::string data;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) data.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  off_t offset = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("cannot read", path_for_errors, errno);
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
    offset += n;
  }
  return data;
}

Result<std::string> read_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    int err = errno;
    if (err == ENOENT) return error(Code::not_found, "no such file '{}'", path);
    return errno_status("cannot open", path, err);
  }
  return read_fd(fd.get(), path);
}

Status write_all(int fd, std::string_view data, const std::string& path_for_errors) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("cannot write", path_for_errors, errno);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

Status make_private_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p(path);
  std::filesystem::path partial;
  for (const auto& part : p) {
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) != 0 && errno != EEXIST)
      return errno_status("cannot create directory", partial.string(), errno);
  }
  if (!std::filesystem::is_directory(p, ec))
    return error(Code::io_error, "'{}' exists but is not a directory", path);
  return {};
}

Status fsync_dir(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return errno_status("cannot open directory", dir, errno);
  if (::fsync(fd.get()) != 0) return errno_status("cannot fsync directory", dir, errno);
  return {};
}

std::string unique_suffix() {
  static std::atomic<std::uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}.{}.{:08x}", ::getpid(), counter.fetch_add(1),
                     static_cast<std::uint32_t>(rng()));
}

Status write_file_atomic(const std::string& path, std::string_view data) {
  std::filesystem::path target(path);
  std::string dir = target.parent_path().empty() ? "." : target.parent_path().string();
  std::string tmp = (std::filesystem::path(dir) /
                     fmt::format(".{}.{}.tmp", target.filename().string(), unique_suffix()))
                        .string();
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return errno_status("cannot create", tmp, errno);
  Status s = write_all(fd.get(), data, tmp);
  if (s.ok() && ::fsync(fd.get()) != 0) s = errno_status("cannot fsync", tmp, errno);
  fd.reset();
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = errno_status("cannot rename onto", path, errno);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return fsync_dir(dir);
}

}  // namespace moejit
