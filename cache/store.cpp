#include "cache/store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

std::int64_t mtime_ms(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
}

bool is_entry_name(std::string_view name) {
  return name.size() == 32 + kEntrySuffix.size() && name.ends_with(kEntrySuffix) &&
         Hash128::from_hex(name.substr(0, 32)).has_value();
}

// Entry files of one root's entries/ directory: (path, stat).
std::vector<std::pair<std::string, struct stat>> scan_entries(const std::string& root) {
  std::vector<std::pair<std::string, struct stat>> out;
  std::error_code ec;
  fs::path dir = fs::path(root) / kEntriesDir;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::end(it); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (!is_entry_name(name)) continue;
    struct stat st {};
    if (::stat(it->path().c_str(), &st) == 0) out.emplace_back(it->path().string(), st);
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.first < b.first; });
  return out;
}

// True if `fd` still is the file at `path` (nobody replaced or removed it meanwhile).
bool same_file(int fd, const std::string& path) {
  struct stat a {}, b {};
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
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
  o.lock_timeout = std::chrono::milliseconds(timeout_ms);
  return o;
}

Store::Store(StoreOptions options) : options_(std::move(options)) {
  read_roots_ = options_.read_only;
  if (options_.dir.empty()) {
    memory_only_ = true;
  } else {
    std::string entries = (fs::path(options_.dir) / kEntriesDir).string();
    Status s = make_private_dirs(entries);
    if (s.ok()) s = probe_writable(entries);
    if (!s.ok()) {
      std::error_code ec;
      if (fs::is_directory(entries, ec)) read_roots_.push_back(options_.dir);
      degrade_to_memory_only(s.message());
    }
  }
  if (!options_.lock_dir.empty()) {
    if (Status s = make_private_dirs(options_.lock_dir); !s.ok()) {
      log(LogLevel::warn, "lock directory unusable ({}); processes may compile a kernel twice",
          s.message());
      options_.lock_dir.clear();
    }
  }
}

void Store::degrade_to_memory_only(const std::string& why) {
  memory_only_ = true;
  warn_once(warned_memory_only_,
            "kernel store '{}' is not writable ({}); compiled kernels are kept in memory only",
            options_.dir, why);
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
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno != ENOENT) log(LogLevel::warn, "cannot open store entry '{}': {}", path, std::strerror(errno));
    return std::nullopt;
  }
  // Shared lock while reading: prune takes it exclusively, so a loading entry is never evicted.
  while (::flock(fd.get(), LOCK_SH) != 0 && errno == EINTR) {
  }
  auto bytes = read_fd(fd.get(), path);
  if (!bytes.ok()) {
    log(LogLevel::warn, "{}", bytes.status().message());
    return std::nullopt;
  }
  auto entry = decode_entry(*bytes);
  Status bad;
  if (!entry.ok()) bad = entry.status();
  else if (entry->key != key || entry->key_material != material)
    bad = Status(Code::corrupt, "the entry holds another key's kernel");
  if (!bad.ok()) {
    counters_.corrupt++;
    if (writable && same_file(fd.get(), path) &&
        ::rename(path.c_str(), (path + std::string(kCorruptSuffix)).c_str()) == 0) {
      log(LogLevel::warn, "store entry '{}' failed verification ({}); moved aside to *{} and rebuilding",
          path, bad.message(), kCorruptSuffix);
    } else {
      log(LogLevel::warn, "store entry '{}' failed verification ({}); ignored", path, bad.message());
    }
    return std::nullopt;
  }
  if (writable) {
    // The last-use stamp for LRU eviction is the file's mtime, set explicitly on every hit.
    struct timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    ::futimens(fd.get(), times);
  }
  counters_.disk_hits++;
  return std::move(entry).value();
}

Status Store::publish(const Entry& entry) {
  if (memory_only())
    return error(Code::unavailable, "kernel store '{}' is memory-only", options_.dir);
  Status s = write_file_atomic(entry_path(options_.dir, entry.key), encode_entry(entry));
  if (!s.ok()) {
    counters_.publish_failures++;
    degrade_to_memory_only(s.message());
    return s;
  }
  counters_.published++;
  if (options_.max_bytes > 0) prune(options_.max_bytes);
  return {};
}

KeyLock Store::lock_key(const Hash128& key) {
  if (options_.lock_dir.empty()) return {};
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
      info.bytes = static_cast<std::uint64_t>(st.st_size);
      info.last_use_unix_ms = mtime_ms(st);
      auto bytes = read_file(path);
      if (!bytes.ok()) {
        info.entry = bytes.status();
      } else {
        info.entry = decode_entry(*bytes);
        auto stem = fs::path(path).filename().string().substr(0, 32);
        if (info.entry.ok() && info.entry->key.hex() != stem)
          info.entry = error(Code::corrupt, "file is named for key {} but holds key {}", stem,
                             info.entry->key.hex());
      }
      out.push_back(std::move(info));
    }
  };
  for (const auto& root : read_roots_) add_root(root, true);
  if (!memory_only()) add_root(options_.dir, false);
  return out;
}

PruneResult Store::prune(std::uint64_t max_bytes) {
  PruneResult r;
  if (memory_only()) return r;
  std::error_code ec;
  fs::path dir = fs::path(options_.dir) / kEntriesDir;
  auto now = std::chrono::system_clock::now();
  // Leftovers first: corrupt entries moved aside and temporaries of dead publishers.
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::end(it); it.increment(ec)) {
    std::string name = it->path().filename().string();
    struct stat st {};
    if (::stat(it->path().c_str(), &st) != 0) continue;
    bool corrupt = name.ends_with(kCorruptSuffix);
    auto age = now - std::chrono::system_clock::time_point(
                         std::chrono::milliseconds(mtime_ms(st)));
    bool stale_temp = name.starts_with('.') && name.ends_with(kTempSuffix) && age > kStaleTemporary;
    if ((corrupt || stale_temp) && ::unlink(it->path().c_str()) == 0) r.removed_other++;
  }

  auto entries = scan_entries(options_.dir);
  for (auto& e : entries) r.bytes_before += static_cast<std::uint64_t>(e.second.st_size);
  r.bytes_after = r.bytes_before;
  std::sort(entries.begin(), entries.end(),
            [](auto& a, auto& b) { return mtime_ms(a.second) < mtime_ms(b.second); });
  for (auto& [path, st] : entries) {
    if (r.bytes_after <= max_bytes) break;
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
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
