#include "cache/store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "support/env.hpp"
#include "support/fs.hpp"
#include "support/log.hpp"

namespace moejit::store {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kEntriesDir = "entries";
constexpr std::string_view kCorruptSuffix = ".corrupt";
constexpr std::string_view kTempSuffix = ".tmp";
// A temporary older than this belongs to a publisher that died; prune removes it.
constexpr auto kStaleTemporary = std::chrono::hours(1);
// A temporary whose publisher's pid is not alive here is removed after this grace time, in case
// the publisher lives in another pid namespace sharing the directory (a publish takes far less).
constexpr auto kDeadPublisherGrace = std::chrono::minutes(1);

std::int64_t mtime_ms(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

bool is_entry_name(std::string_view name) {
  return name.size() == 32 + kEntrySuffix.size() && name.ends_with(kEntrySuffix) &&
         Hash128::from_hex(name.substr(0, 32)).has_value();
}

// Things at entry paths of one root's entries/ directory: (path, lstat). Links are not
// followed: whatever sits at the path is what is listed.
std::vector<std::pair<std::string, struct stat>> scan_entries(const std::string& root) {
  std::vector<std::pair<std::string, struct stat>> out;
  std::error_code ec;
  fs::path dir = fs::path(root) / kEntriesDir;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::end(it); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (!is_entry_name(name)) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0) out.emplace_back(it->path().string(), st);
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.first < b.first; });
  return out;
}

// True if `fd` still is the file at `path` (nobody replaced or removed it meanwhile).
bool same_file(int fd, const std::string& path) {
  struct stat a {}, b {};
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

// Whether the directory accepts new files: the check a publish would need.
Status probe_writable(const std::string& dir) {
  std::string probe = (fs::path(dir) / (".probe." + unique_suffix() + std::string(kTempSuffix))).string();
  UniqueFd fd(::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd.valid()) return error(Code::io_error, "cannot create files in '{}': {}", dir, std::strerror(errno));
  fd.reset();
  ::unlink(probe.c_str());
  return {};
}

// Whether a layer's directories may be trusted with code (store.hpp): the root and its
// ancestors (check_trusted_dir), and entries/ itself a real directory (not a link to elsewhere,
// which clear and eviction would then reach into) that nobody else can write. A missing
// entries/ is fine: the layer is empty.
Status check_layer(const std::string& root) {
  MOEJIT_TRY(check_trusted_dir(root));
  std::string entries = (fs::path(root) / kEntriesDir).string();
  struct stat st {};
  if (::lstat(entries.c_str(), &st) != 0) {
    if (errno == ENOENT) return {};
    return error(Code::io_error, "cannot stat '{}': {}", entries, std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode))
    return error(Code::unavailable, "'{}' is a symbolic link; expected the store's own directory", entries);
  return check_trusted_dir(entries);
}

// Why an opened entry file must not be used, or ok: who may have written it. A read-only layer
// may hold root's files (an administrator's shared store); the writable root only the user's.
Status check_entry_owner(const struct stat& st, const std::string& path, bool read_only) {
  const uid_t me = ::geteuid();
  if (st.st_uid != me && !(read_only && st.st_uid == 0))
    return error(Code::unavailable, "entry '{}' is owned by uid {}; expected your own (uid {}){}", path,
                 st.st_uid, me, read_only ? " or root's" : "");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0)
    return error(Code::unavailable, "entry '{}' is writable by group or other (mode {:04o})", path,
                 st.st_mode & 07777);
  return {};
}

// Opens an entry file for reading: a regular file, not through a link, without blocking, from
// a trusted owner, within the size cap. not_found: nothing there (or it vanished).
Result<UniqueFd> open_entry(const std::string& path, bool read_only, struct stat& st) {
  MOEJIT_ASSIGN_OR_RETURN(UniqueFd fd, open_regular_file(path, Links::refuse, &st));
  MOEJIT_TRY(check_entry_owner(st, path, read_only));
  if (static_cast<std::uint64_t>(st.st_size) > kMaxEntryBytes)
    return error(Code::corrupt, "entry '{}' holds {} bytes; expected at most {}", path, st.st_size, kMaxEntryBytes);
  return fd;
}

// The pid in a temporary's name ".<name>.<pid>.<n>.<random>.tmp" (fs.cpp unique_suffix), or 0.
long temporary_pid(std::string_view name) {
  if (!name.ends_with(kTempSuffix)) return 0;
  name.remove_suffix(kTempSuffix.size());
  for (int i = 0; i < 2; ++i) {
    auto dot = name.rfind('.');
    if (dot == std::string_view::npos) return 0;
    name = name.substr(0, dot);
  }
  auto dot = name.rfind('.');
  if (dot == std::string_view::npos) return 0;
  long pid = 0;
  auto digits = name.substr(dot + 1);
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  return ec == std::errc() && end == digits.data() + digits.size() ? pid : 0;
}

}  // namespace

std::string default_store_dir() {
  if (auto dir = env_string("MOEJIT_CACHE_DIR")) return *dir;
  if (auto xdg = env_string("XDG_CACHE_HOME")) return (fs::path(*xdg) / "moejit").string();
  if (auto home = env_string("HOME")) return (fs::path(*home) / ".cache" / "moejit").string();
  return {};  // no home: memory-only
}

std::string default_lock_dir() {
  if (auto dir = env_string("MOEJIT_LOCK_DIR")) return *dir;
  if (auto run = env_string("XDG_RUNTIME_DIR")) return (fs::path(*run) / "moejit" / "locks").string();
  std::error_code ec;
  fs::path tmp = fs::temp_directory_path(ec);
  if (ec) tmp = "/tmp";
  return (tmp / fmt::format("moejit-{}", ::getuid()) / "locks").string();
}

Result<StoreOptions> StoreOptions::from_environment() {
  for (const char* name : {"MOEJIT_CACHE_DIR", "MOEJIT_LOCK_DIR"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value == '\0')
      return error(Code::invalid_argument,
                   "{} is set but empty; expected a directory (unset it to use the default)", name);
  }
  StoreOptions o;
  o.dir = default_store_dir();
  if (auto ro = env_string("MOEJIT_CACHE_READONLY")) {
    std::string_view rest = *ro;
    while (!rest.empty()) {
      auto colon = rest.find(':');
      auto part = rest.substr(0, colon);
      if (!part.empty()) o.read_only.emplace_back(part);
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  o.lock_dir = default_lock_dir();
  MOEJIT_ASSIGN_OR_RETURN(o.max_bytes, env_u64("MOEJIT_CACHE_MAX_BYTES", 4ull << 30));
  MOEJIT_ASSIGN_OR_RETURN(std::uint64_t timeout_ms, env_u64("MOEJIT_LOCK_TIMEOUT_MS", 60000));
  // Past a day no one is waiting on purpose; larger values would overflow the deadline.
  constexpr std::uint64_t kMaxLockTimeoutMs = 24ull * 3600 * 1000;
  if (timeout_ms > kMaxLockTimeoutMs)
    return error(Code::invalid_argument, "MOEJIT_LOCK_TIMEOUT_MS = {}: expected at most {} (a day)", timeout_ms,
                 kMaxLockTimeoutMs);
  o.lock_timeout = std::chrono::milliseconds(timeout_ms);
  return o;
}

Store::Store(StoreOptions options) : options_(std::move(options)) {
  for (const auto& root : options_.read_only) {
    if (Status s = check_layer(root); s.ok()) read_roots_.push_back(root);
    else add_problem(fmt::format("read-only kernel store layer '{}' is not used: {}", root, s.message()));
  }
  if (options_.dir.empty()) {
    memory_only_ = true;
  } else {
    std::string entries = (fs::path(options_.dir) / kEntriesDir).string();
    Status s = make_private_dirs(entries);
    // An untrusted root is neither written nor read: its entries could be anyone's code.
    Status trusted = s.ok() ? check_layer(options_.dir) : Status();
    if (s.ok() && trusted.ok()) s = probe_writable(entries);
    if (!trusted.ok()) {
      degrade_to_memory_only(trusted.message());
    } else if (!s.ok()) {
      std::error_code ec;
      if (fs::is_directory(entries, ec) && check_layer(options_.dir).ok()) read_roots_.push_back(options_.dir);
      degrade_to_memory_only(s.message());
    }
  }
  if (!options_.lock_dir.empty()) {
    if (Status s = make_private_dir_checked(options_.lock_dir); !s.ok()) {
      add_problem(fmt::format("lock directory unusable ({}); processes may compile a kernel twice",
                              s.message()));
      options_.lock_dir.clear();
    }
  }
}

void Store::add_problem(std::string what) {
  log(LogLevel::warn, "{}", what);
  std::lock_guard lock(problems_mutex_);
  problems_.push_back(std::move(what));
}

std::vector<std::string> Store::problems() const {
  std::lock_guard lock(problems_mutex_);
  return problems_;
}

void Store::degrade_to_memory_only(const std::string& why) {
  if (!memory_only_.exchange(true)) {
    std::lock_guard lock(problems_mutex_);
    problems_.push_back(fmt::format("kernel store '{}' is memory-only: {}", options_.dir, why));
    memory_only_why_ = why;
  }
  warn_once(warned_memory_only_,
            "kernel store '{}' cannot be used on disk ({}); compiled kernels are kept in memory only",
            options_.dir, why);
}

Status Store::memory_only_error(std::string_view doing) const {
  std::lock_guard lock(problems_mutex_);
  return error(Code::io_error, "cannot {} kernel store '{}': {}", doing, options_.dir,
               memory_only_why_.empty() ? std::string("it has no directory, memory only") : memory_only_why_);
}

std::string Store::entry_path(const std::string& root, const Hash128& key) const {
  return (fs::path(root) / kEntriesDir / (key.hex() + std::string(kEntrySuffix))).string();
}

std::optional<Entry> Store::load(const Hash128& key, std::string_view material) {
  for (const auto& root : read_roots_)
    if (auto e = load_from(root, /*writable=*/false, key, material)) return e;
  if (!memory_only())
    if (auto e = load_from(options_.dir, /*writable=*/true, key, material)) return e;
  counters_.disk_misses++;
  return std::nullopt;
}

std::optional<Entry> Store::load_from(const std::string& root, bool writable, const Hash128& key,
                                      std::string_view material) {
  std::string path = entry_path(root, key);
  struct stat st {};
  auto fd = open_entry(path, !writable, st);
  Status bad;
  std::optional<Entry> entry;
  if (!fd.ok()) {
    if (fd.status().code() == Code::not_found) return std::nullopt;
    bad = fd.status();
  } else {
    // A shared lock while reading keeps prune (which tries for an exclusive one) from choosing a
    // hot entry; never waited for: whoever holds it exclusively (a prune for an instant, or
    // anyone who can open a shared layer's files) cannot stall a load, and the open descriptor
    // reads the whole file even if it is unlinked meanwhile. Read-only layers are never pruned.
    if (writable) ::flock(fd->get(), LOCK_SH | LOCK_NB);
    auto bytes = read_fd(fd->get(), path, kMaxEntryBytes);
    if (!bytes.ok()) {
      bad = bytes.status();
    } else if (auto decoded = decode_entry(*bytes); !decoded.ok()) {
      bad = decoded.status();
    } else if (decoded->key != key || decoded->key_material != material) {
      bad = Status(Code::corrupt, "the entry holds another key's kernel");
    } else {
      entry = std::move(decoded).value();
    }
  }
  if (bad.code() == Code::io_error) {
    // No verdict on the entry (out of descriptors, EIO, a permission): a miss. The publish that
    // follows replaces the file if it is really bad; moving it aside would take a good entry
    // from every process on the host.
    log(LogLevel::warn, "cannot read store entry '{}' ({}); treated as a miss", path, bad.message());
    return std::nullopt;
  }
  if (!bad.ok()) {
    counters_.corrupt++;
    // Whatever is at the path (a damaged file, a directory, a FIFO, a link) goes aside, so that
    // one bad path costs one rebuild and the publish that follows succeeds.
    bool still_there = fd.ok() ? same_file(fd->get(), path) : true;
    if (writable && still_there &&
        ::rename(path.c_str(), (path + std::string(kCorruptSuffix)).c_str()) == 0) {
      log(LogLevel::warn, "store entry '{}' failed verification ({}); moved aside to *{} and rebuilding", path,
          bad.message(), kCorruptSuffix);
    } else {
      log(LogLevel::warn, "store entry '{}' failed verification ({}); ignored", path, bad.message());
    }
    return std::nullopt;
  }
  if (writable) {
    // The last-use stamp for LRU eviction is the file's mtime, set explicitly on every hit.
    struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    ::futimens(fd->get(), times);
  }
  counters_.disk_hits++;
  return entry;
}

Status Store::publish(const Entry& entry, AfterPublish after) {
  if (memory_only())
    return error(Code::unavailable, "kernel store '{}' is memory-only", options_.dir);
  std::string path = entry_path(options_.dir, entry.key);
  // Something other than a file at this key's path (a directory, say) fails this key alone;
  // the rest of the store stays on disk. verify, clear and prune remove it.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    counters_.publish_failures++;
    Status s = error(Code::io_error,
                     "cannot publish '{}': something other than a regular file is at that path; "
                     "`moejit cache verify` moves it aside",
                     path);
    log(LogLevel::warn, "{}", s.message());
    return s;
  }
  const std::string bytes = encode_entry(entry);
  Status s = write_file_atomic(path, bytes);
  if (!s.ok() && s.system_error() == ENOENT) {
    // The directory was removed under a running process (a cache cleared by hand, a deployment
    // replacing it): made again, with the checks the constructor makes, and written once more.
    const std::string entries = (fs::path(options_.dir) / kEntriesDir).string();
    Status made = make_private_dirs(entries);
    if (made.ok()) made = check_layer(options_.dir);
    if (made.ok()) {
      s = write_file_atomic(path, bytes);
      if (s.ok()) log(LogLevel::warn, "kernel store directory '{}' had been removed; made it again", entries);
    } else {
      s = error(made.code(), "{}; making the removed directory again failed: {}", s.message(), made.message());
    }
  }
  if (!s.ok()) {
    counters_.publish_failures++;
    // Out of descriptors or memory passes; the store stays on disk for the next kernel. Any
    // other failure (full disk, quota, read-only, permissions, I/O error, a removed directory
    // that could not be made again) would fail every later publish too.
    const int cause = s.system_error();
    if (cause == EMFILE || cause == ENFILE || cause == ENOMEM || cause == ENOBUFS ||
        cause == EAGAIN || cause == EINTR) {
      log(LogLevel::warn, "kernel {} not stored, this time: {}", entry.key.hex(), s.message());
      return s;
    }
    degrade_to_memory_only(s.message());
    return s;
  }
  counters_.published++;
  if (after == AfterPublish::prune && options_.max_bytes > 0) prune(options_.max_bytes);
  return {};
}

KeyLock Store::lock_key(const Hash128& key) {
  if (options_.lock_dir.empty()) return {};
  // A lock directory removed while the process runs (tmpfiles cleaning /tmp, a cleared cache)
  // is made again; a compile costs far more than this stat.
  struct stat st {};
  if (::lstat(options_.lock_dir.c_str(), &st) != 0 && errno == ENOENT) {
    if (Status s = make_private_dir_checked(options_.lock_dir); s.ok())
      log(LogLevel::warn, "lock directory '{}' had been removed; made it again", options_.lock_dir);
  }
  std::string path = (fs::path(options_.lock_dir) / (key.hex() + ".lock")).string();
  KeyLock lock = KeyLock::acquire(path, options_.lock_timeout);
  if (lock.waited_ms() > 1.0) {
    counters_.lock_waits++;
    counters_.lock_wait_us += static_cast<std::uint64_t>(lock.waited_ms() * 1000);
    log(LogLevel::info, "waited {:.0f} ms for another process compiling {}", lock.waited_ms(),
        key.hex());
  }
  if (lock.timed_out()) {
    counters_.lock_timeouts++;
    log(LogLevel::warn,
        "gave up waiting for the lock of {} after {:.0f} ms (MOEJIT_LOCK_TIMEOUT_MS); compiling "
        "without it",
        key.hex(), lock.waited_ms());
  }
  return lock;
}

std::vector<EntryInfo> Store::list() const {
  std::vector<EntryInfo> out;
  auto add_root = [&](const std::string& root, bool read_only) {
    for (auto& [path, st] : scan_entries(root)) {
      EntryInfo info;
      info.path = path;
      info.read_only = read_only;
      info.regular_file = S_ISREG(st.st_mode);
      info.bytes = info.regular_file ? static_cast<std::uint64_t>(st.st_size) : 0;
      info.last_use_unix_ms = mtime_ms(st);
      struct stat opened {};
      auto fd = open_entry(path, read_only, opened);
      if (!fd.ok() && fd.status().code() == Code::not_found) continue;  // evicted meanwhile
      const struct stat& examined = fd.ok() ? opened : st;
      info.device = examined.st_dev;
      info.inode = examined.st_ino;
      auto bytes = fd.ok() ? read_fd(fd->get(), path, kMaxEntryBytes) : Result<std::string>(fd.status());
      if (!bytes.ok()) {
        info.entry = bytes.status();
      } else {
        info.entry = decode_entry(*bytes);
        auto stem = fs::path(path).filename().string().substr(0, 32);
        if (info.entry.ok() && info.entry->key.hex() != stem)
          info.entry = error(Code::corrupt, "file is named for key {} but holds key {}", stem,
                             info.entry->key.hex());
        // Verified; the code itself is not kept: a listing of the whole store (every layer)
        // would otherwise hold all of it in memory at once.
        if (info.entry.ok()) std::string().swap(info.entry->payload);
      }
      out.push_back(std::move(info));
    }
  };
  for (const auto& root : read_roots_) add_root(root, true);
  if (!memory_only()) add_root(options_.dir, false);
  return out;
}

Status Store::move_aside(const EntryInfo& info) {
  if (info.read_only || memory_only())
    return error(Code::unavailable, "'{}' is in a read-only layer; only the writable root is repaired",
                 info.path);
  // The file listed, not one published at its path since (the listing may have taken long).
  struct stat now {};
  if (::lstat(info.path.c_str(), &now) != 0) return {};  // gone already
  if (now.st_dev != info.device || now.st_ino != info.inode)
    return error(Code::unavailable, "'{}' was replaced since it was listed; left in place", info.path);
  std::string aside = info.path + std::string(kCorruptSuffix);
  if (::rename(info.path.c_str(), aside.c_str()) != 0 && errno != ENOENT)
    return error(Code::io_error, "cannot move '{}' aside: {}", info.path, std::strerror(errno));
  return {};
}

PruneResult Store::prune(std::uint64_t max_bytes) {
  PruneResult r;
  if (memory_only()) return r;
  std::error_code ec;
  fs::path dir = fs::path(options_.dir) / kEntriesDir;
  auto now = std::chrono::system_clock::now();
  std::uint64_t temporary_bytes = 0;
  // Leftovers first: entries moved aside, non-files at entry paths, dead publishers' temporaries.
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::end(it); it.increment(ec)) {
    std::string name = it->path().filename().string();
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0) continue;
    bool aside = name.ends_with(kCorruptSuffix);
    bool not_a_file = is_entry_name(name) && !S_ISREG(st.st_mode);
    bool temporary = name.starts_with('.') && name.ends_with(kTempSuffix);
    auto age = now - std::chrono::system_clock::time_point(std::chrono::milliseconds(mtime_ms(st)));
    // A temporary whose publisher is gone will never be renamed; the age limit covers a pid
    // reused since (and publishers on other hosts, if the store is shared over the network).
    bool dead_temporary =
        temporary && (age > kStaleTemporary ||
                      (age > kDeadPublisherGrace && !process_alive(temporary_pid(name))));
    if (aside || not_a_file || dead_temporary) {
      std::error_code rm;
      // remove_all never follows links: a link is removed, not what it points to.
      if (fs::remove_all(it->path(), rm) > 0 && !rm) r.removed_other++;
    } else if (temporary && S_ISREG(st.st_mode)) {
      temporary_bytes += static_cast<std::uint64_t>(st.st_size);
    }
  }

  auto entries = scan_entries(options_.dir);
  std::erase_if(entries, [](auto& e) { return !S_ISREG(e.second.st_mode); });
  r.bytes_before = temporary_bytes;
  for (auto& e : entries) r.bytes_before += static_cast<std::uint64_t>(e.second.st_size);
  r.bytes_after = r.bytes_before;
  std::sort(entries.begin(), entries.end(),
            [](auto& a, auto& b) { return mtime_ms(a.second) < mtime_ms(b.second); });
  for (auto& [path, st] : entries) {
    if (r.bytes_after <= max_bytes) break;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!fd.valid()) continue;
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      r.skipped_in_use++;  // a loader holds it
      continue;
    }
    if (!same_file(fd.get(), path)) continue;  // replaced meanwhile; leave the new one
    if (::unlink(path.c_str()) == 0) {
      r.bytes_after -= static_cast<std::uint64_t>(st.st_size);
      r.removed_entries++;
      counters_.evicted++;
    }
  }
  return r;
}

StoreStats Store::stats() const {
  StoreStats s;
  s.disk_hits = counters_.disk_hits;
  s.disk_misses = counters_.disk_misses;
  s.corrupt = counters_.corrupt;
  s.published = counters_.published;
  s.publish_failures = counters_.publish_failures;
  s.evicted = counters_.evicted;
  s.lock_waits = counters_.lock_waits;
  s.lock_timeouts = counters_.lock_timeouts;
  s.lock_wait_ms = static_cast<double>(counters_.lock_wait_us.load()) / 1000.0;
  return s;
}

}  // namespace moejit::store
