#include "support/fs.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
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
// An io_error carrying `err` (Status::system_error).
Status errno_status(std::string_view what, const std::string& path, int err) {
  return Status(Code::io_error, fmt::format("{} '{}': {}", what, path, std::strerror(err)), err);
}
}  // namespace

Result<std::string> read_fd(int fd, const std::string& path_for_errors, std::uint64_t max_bytes) {
  std::string data;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
      return error(Code::invalid_argument, "'{}' holds {} bytes; expected at most {}", path_for_errors,
                   st.st_size, max_bytes);
    data.reserve(static_cast<std::size_t>(st.st_size));
  }
  char buf[1 << 16];
  off_t offset = 0;
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("cannot read", path_for_errors, errno);
    }
    if (n == 0) break;
    if (data.size() + static_cast<std::size_t>(n) > max_bytes)
      return error(Code::invalid_argument, "'{}' holds more than {} bytes; expected at most that",
                   path_for_errors, max_bytes);
    data.append(buf, static_cast<std::size_t>(n));
    offset += n;
  }
  return data;
}

namespace {
const char* file_type_name(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}
}  // namespace

Result<UniqueFd> open_regular_file(const std::string& path, Links links, struct stat* st_out) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | (links == Links::refuse ? O_NOFOLLOW : 0);
  UniqueFd fd(::open(path.c_str(), flags));
  if (!fd.valid()) {
    int err = errno;
    if (err == ENOENT) return error(Code::not_found, "no such file '{}'", path);
    if (err == ELOOP && links == Links::refuse)
      return error(Code::invalid_argument, "'{}' is a symbolic link; expected a regular file", path);
    return errno_status("cannot open", path, err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return errno_status("cannot stat", path, errno);
  if (!S_ISREG(st.st_mode))
    return error(Code::invalid_argument, "'{}' is {}; expected a regular file", path, file_type_name(st.st_mode));
  if (st_out != nullptr) *st_out = st;
  return fd;
}

Result<std::string> read_file(const std::string& path, std::uint64_t max_bytes, Links links) {
  MOEJIT_ASSIGN_OR_RETURN(UniqueFd fd, open_regular_file(path, links));
  return read_fd(fd.get(), path, max_bytes);
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
    const std::filesystem::path parent = partial;
    partial /= part;
    if (::mkdir(partial.c_str(), 0700) == 0) {
      // A new directory lasts a power loss only once its parent's entry for it is on disk:
      // otherwise the first entries published into it can vanish with it. Best effort.
      (void)fsync_dir(parent.empty() ? "." : parent.string());
    } else if (errno != EEXIST) {
      return errno_status("cannot create directory", partial.string(), errno);
    }
  }
  if (!std::filesystem::is_directory(p, ec))
    return error(Code::io_error, "'{}' exists but is not a directory", path);
  return {};
}

namespace {
// Why directory `st` (at `path`) is not trusted, or empty.
std::string distrust(const struct stat& st, const std::string& path) {
  const uid_t me = ::geteuid();
  if (!S_ISDIR(st.st_mode)) return fmt::format("'{}' is not a directory", path);
  if (st.st_uid != me && st.st_uid != 0)
    return fmt::format("'{}' is owned by uid {}, not by you (uid {}) or root", path, st.st_uid, me);
  const bool sticky_root = st.st_uid == 0 && (st.st_mode & S_ISVTX) != 0;
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !sticky_root)
    return fmt::format("'{}' is writable by group or other (mode {:04o})", path, st.st_mode & 07777);
  return {};
}
}  // namespace

Status check_trusted_dir(const std::string& path) {
  std::error_code ec;
  std::filesystem::path real = std::filesystem::canonical(path, ec);
  if (ec) return error(Code::io_error, "cannot resolve '{}': {}", path, ec.message());
  for (std::filesystem::path p = real;; p = p.parent_path()) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return errno_status("cannot stat", p.string(), errno);
    if (std::string why = distrust(st, p.string()); !why.empty())
      return error(Code::unavailable, "untrusted directory: {}", why);
    if (p == p.root_path() || p.parent_path() == p) break;
  }
  return {};
}

Result<std::string> trusted_temp_dir_for_code() {
  std::error_code ec;
  std::string dir = std::filesystem::temp_directory_path(ec).string();
  if (ec) dir = "/tmp";
  if (Status trusted = check_trusted_dir(dir); !trusted.ok())
    return error(Code::unavailable,
                 "'{}' (TMPDIR) is not safe for code: {}; expected a directory only you can "
                 "write, or a root-owned sticky one such as /tmp",
                 dir, trusted.message());
  return dir;
}

Status make_private_dir_checked(const std::string& path) {
  MOEJIT_TRY(make_private_dirs(path));
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno_status("cannot stat", path, errno);
  if (S_ISLNK(st.st_mode))
    return error(Code::unavailable, "'{}' is a symbolic link; expected a private directory", path);
  if (!S_ISDIR(st.st_mode)) return error(Code::unavailable, "'{}' is not a directory", path);
  if (st.st_uid != ::geteuid())
    return error(Code::unavailable, "'{}' is owned by uid {}; expected a private directory of yours (uid {})",
                 path, st.st_uid, ::geteuid());
  if ((st.st_mode & 077) != 0)
    return error(Code::unavailable, "'{}' has mode {:04o}; expected a private directory (0700)", path,
                 st.st_mode & 07777);
  return check_trusted_dir(path);
}

bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

std::size_t remove_dead_process_temporaries(const std::string& dir, std::string_view prefix) {
  std::size_t removed = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (!name.starts_with(prefix)) continue;
    std::string_view rest = std::string_view(name).substr(prefix.size());
    long pid = 0;
    auto [end, parse] = std::from_chars(rest.data(), rest.data() + rest.size(), pid);
    if (parse != std::errc() || end == rest.data() || end == rest.data() + rest.size() || *end != '-') continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || st.st_uid != ::geteuid() || S_ISLNK(st.st_mode)) continue;
    if (process_alive(pid)) continue;
    std::error_code rm;
    if (std::filesystem::remove_all(it->path(), rm) > 0 && !rm) ++removed;
  }
  return removed;
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

Result<AtomicFileWriter> AtomicFileWriter::create(const std::string& path) {
  std::filesystem::path target(path);
  std::string dir = target.parent_path().empty() ? "." : target.parent_path().string();
  std::string tmp = (std::filesystem::path(dir) /
                     fmt::format(".{}.{}.tmp", target.filename().string(), unique_suffix()))
                        .string();
  UniqueFd fd(::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return errno_status("cannot create", tmp, errno);
  return AtomicFileWriter(path, std::move(tmp), std::move(fd));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (!committed_ && !temporary_.empty()) ::unlink(temporary_.c_str());
}

Status AtomicFileWriter::write(std::string_view data) { return write_all(fd_.get(), data, temporary_); }

Status AtomicFileWriter::overwrite(std::uint64_t offset, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::pwrite(fd_.get(), data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("cannot write", temporary_, errno);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return {};
}

Status AtomicFileWriter::commit() {
  if (::fsync(fd_.get()) != 0) return errno_status("cannot fsync", temporary_, errno);
  fd_.reset();
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) return errno_status("cannot rename onto", path_, errno);
  committed_ = true;
  std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  return fsync_dir(parent.empty() ? "." : parent.string());
}

Status write_file_atomic(const std::string& path, std::string_view data) {
  MOEJIT_ASSIGN_OR_RETURN(AtomicFileWriter file, AtomicFileWriter::create(path));
  MOEJIT_TRY(file.write(data));
  return file.commit();
}

}  // namespace moejit
