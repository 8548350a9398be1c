#pragma once
// File-system helpers shared by the store, the compiler's source dumps and the CLI. POSIX calls
// where durability matters (fsync of files and directories), std::filesystem elsewhere.

#include <sys/stat.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

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

// The largest input file (a spec, a model config, a usage manifest) read unless a caller says
// otherwise: far above any real one, far below what would exhaust memory.
inline constexpr std::uint64_t kMaxInputFileBytes = 64ull << 20;

// Whether opening a path may follow a symbolic link at its last component. Users' inputs may
// (a Hugging Face snapshot's config.json is a link into its blob store); the store's own files
// may not.
enum class Links { follow, refuse };

// Opens an existing regular file for reading. Never blocks: a FIFO, socket or device at `path`
// is refused with a message instead of being waited on or read without end. `st`, if given,
// receives the opened file's fstat.
Result<UniqueFd> open_regular_file(const std::string& path, Links links, struct stat* st = nullptr);

// The whole of a regular file of at most `max_bytes` (opened as above).
Result<std::string> read_file(const std::string& path, std::uint64_t max_bytes = kMaxInputFileBytes,
                              Links links = Links::follow);

// Reads everything from an open descriptor, from offset 0; more than `max_bytes` is an error
// (a file that grows while read is caught too).
Result<std::string> read_fd(int fd, const std::string& path_for_errors,
                            std::uint64_t max_bytes = kMaxInputFileBytes);

// Writes `data` fully (retrying short writes and EINTR).
Status write_all(int fd, std::string_view data, const std::string& path_for_errors);

// Creates `path` and its missing parents with mode 0700.
Status make_private_dirs(const std::string& path);

// Whether a directory can be trusted by the effective user with what it holds (git's
// safe.directory rule, stricter): `path` resolved, and each of its ancestors, is a directory
// owned by the effective user or by root, and writable by nobody else - except a root-owned
// sticky directory such as /tmp, in which only owners can rename or remove. The message names
// the first directory that fails and why.
Status check_trusted_dir(const std::string& path);

// The temporary directory (TMPDIR, else /tmp) for files that become code in this process: it
// must pass check_trusted_dir, or another user could rename our files away and put theirs in
// their place. Refused with Code::unavailable, naming the directory and TMPDIR.
Result<std::string> trusted_temp_dir_for_code();

// Creates (0700, parents too) or checks a directory that must be private to the effective user:
// checked with lstat (a real directory, not a symbolic link), owned by the effective user, no
// access for group or other, and every ancestor trusted as in check_trusted_dir. For lock and
// dump directories in shared places such as /tmp, where another user could have made the path
// first.
Status make_private_dir_checked(const std::string& path);

// Whether process `pid` on this host is alive (a dead publisher's temporaries may go).
bool process_alive(long pid);

// Per-process temporaries in the shared temporary directory are named "<prefix><pid>-...", so
// that the leftovers of a killed process can be told from a live one's. This removes those in
// `dir` that belong to the effective user and whose process is gone; links are never followed.
// Returns how many were removed.
std::size_t remove_dead_process_temporaries(const std::string& dir, std::string_view prefix);

// fsync of a directory, so that a rename or unlink in it is durable.
Status fsync_dir(const std::string& dir);

// A file written in pieces and published atomically at `path` on commit(): a uniquely named
// temporary in the same directory (O_EXCL), fsync, rename, fsync of the directory. Destroyed
// without commit(), the temporary is removed and `path` is untouched.
class AtomicFileWriter {
 public:
  static Result<AtomicFileWriter> create(const std::string& path);
  AtomicFileWriter(AtomicFileWriter&& o) noexcept
      : path_(std::move(o.path_)), temporary_(std::exchange(o.temporary_, {})), fd_(std::move(o.fd_)),
        committed_(o.committed_) {}
  AtomicFileWriter& operator=(AtomicFileWriter&&) = delete;
  ~AtomicFileWriter();

  Status write(std::string_view data);
  // Rewrites bytes already written (a count known only at the end).
  Status overwrite(std::uint64_t offset, std::string_view data);
  // The temporary's descriptor, open for reading and writing (to hash what was written).
  int fd() const { return fd_.get(); }
  const std::string& temporary_path() const { return temporary_; }
  Status commit();

 private:
  AtomicFileWriter(std::string path, std::string temporary, UniqueFd fd)
      : path_(std::move(path)), temporary_(std::move(temporary)), fd_(std::move(fd)) {}
  std::string path_, temporary_;
  UniqueFd fd_;
  bool committed_ = false;
};

// Publishes `data` at `path` atomically: a uniquely named temporary in the same directory
// (O_EXCL), fsync, rename onto `path`, fsync of the directory. Readers see the old file or the
// whole new one, never a part. The temporary is removed on failure.
Status write_file_atomic(const std::string& path, std::string_view data);

// A name unique to this process and call, for temporaries: "<pid>.<counter>.<random>".
std::string unique_suffix();

}  // namespace moejit
