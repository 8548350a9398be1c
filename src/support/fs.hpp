#pragma once
// File-system helpers shared by the store, the compiler's source dumps and the CLI. POSIX calls
// where durability matters (fsync of files and directories), std::filesystem elsewhere.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "support/status.hpp"

namespace moejit {

// Owns a file descriptor.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

Result<std::string> read_file(const std::string& path);

// Reads everything from an open descriptor, from offset 0.
Result<std::string> read_fd(int fd, const std::string& path_for_errors);

// Writes `data` fully (retrying short writes and EINTR).
Status write_all(int fd, std::string_view data, const std::string& path_for_errors);

// Creates `path` and its missing parents with mode 0700.
Status make_private_dirs(const std::string& path);

// fsync of a directory, so that a rename or unlink in it is durable.
Status fsync_dir(const std::string& dir);

// Publishes `data` at `path` atomically: a uniquely named temporary in the same directory
// (O_EXCL), fsync, rename onto `path`, fsync of the directory. Readers see the old file or the
// whole new one, never a part. The temporary is removed on failure.
Status write_file_atomic(const std::string& path, std::string_view data);

// A name unique to this process and call, for temporaries: "<pid>.<counter>.<random>".
std::string unique_suffix();

}  // namespace moejit
