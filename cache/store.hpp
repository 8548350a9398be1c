#pragma once
// The kernel store (DESIGN §4; on-disk format in cache/README.md). Keys and bytes only: the
// store knows nothing of specs or compilers.
//
// Layers: read-only roots (shipped bundles, copied stores) are searched first, in order, then
// the writable root. Entries live in <root>/entries/<key hex>.mjk. A writable root that cannot
// be created or written degrades the store to memory-only (its existing entries stay readable)
// with one warning; so does a publish that fails (full disk). Nothing here fails a caller that
// could go on without the disk.
//
// The store holds code (CUBINs, shared objects the host backend dlopens), so it trusts only
// what the effective user or root controls: a root or layer whose directories another user owns
// or can write is not used at all (one warning says why), and an entry file is read only if it
// is a regular file, reached without a symbolic link, owned by the effective user (or root, in
// a read-only layer) and writable by nobody else. Checksums prove integrity, not authorship.

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/entry_format.hpp"
#include "cache/file_lock.hpp"
#include "support/status.hpp"

namespace moejit::store {

struct StoreOptions {
  std::string dir;                     // writable root; empty: memory-only
  std::vector<std::string> read_only;  // read-only roots, searched first, in this order
  std::string lock_dir;                // node-local lock directory; empty: no cross-process locks
  std::uint64_t max_bytes = 0;         // size bound of the writable root; 0: unbounded
  std::chrono::milliseconds lock_timeout{60000};

  // MOEJIT_CACHE_DIR, MOEJIT_CACHE_READONLY (':'-separated), MOEJIT_LOCK_DIR,
  // MOEJIT_CACHE_MAX_BYTES (default 4G), MOEJIT_LOCK_TIMEOUT_MS (default 60000).
  // MOEJIT_CACHE_DIR or MOEJIT_LOCK_DIR set but empty is an error: a script whose variable is
  // unset must not fall back to (and then clear) the user's real store.
  static Result<StoreOptions> from_environment();
};

// $MOEJIT_CACHE_DIR, else $XDG_CACHE_HOME/moejit, else ~/.cache/moejit.
std::string default_store_dir();
// $MOEJIT_LOCK_DIR, else $XDG_RUNTIME_DIR/moejit/locks, else <tmp>/moejit-<uid>/locks.
std::string default_lock_dir();

struct StoreStats {
  std::uint64_t disk_hits = 0;
  std::uint64_t disk_misses = 0;
  std::uint64_t corrupt = 0;           // entries that failed verification on load
  std::uint64_t published = 0;
  std::uint64_t publish_failures = 0;
  std::uint64_t evicted = 0;
  std::uint64_t lock_waits = 0;        // lock acquisitions that had to wait
  std::uint64_t lock_timeouts = 0;
  double lock_wait_ms = 0;
};

struct EntryInfo {
  std::string path;
  bool read_only = false;        // found in a read-only layer
  bool regular_file = true;      // false: a directory, FIFO, link... at an entry's path
  std::uint64_t bytes = 0;
  std::int64_t last_use_unix_ms = 0;
  // Decoded and verified (payload dropped: Store::list), or why not; io_error: it could not be
  // read (out of descriptors, a permission), which says nothing about the entry.
  Result<Entry> entry = Status(Code::internal, "not read");
  dev_t device = 0;  // the file listed (move_aside moves that one only)
  ino_t inode = 0;
};

struct PruneResult {
  std::uint64_t bytes_before = 0;
  std::uint64_t bytes_after = 0;
  std::uint64_t removed_entries = 0;
  std::uint64_t removed_other = 0;   // dead publishers' temporaries, moved-aside entries, and
                                     // anything not a regular file at an entry's path
  std::uint64_t skipped_in_use = 0;  // entries being loaded, left in place
};

class Store {
 public:
  explicit Store(StoreOptions options);
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // The verified entry for `key` whose key material is `material`, from the first layer that
  // has one. A bad entry is counted and logged, moved aside to *.corrupt (writable root only),
  // and the search goes on as if it were absent.
  std::optional<Entry> load(const Hash128& key, std::string_view material);

  // Atomic publish into the writable root; then (unless `after` says otherwise: an import
  // prunes once, at its end) evicts least-recently-used entries down to the size bound. A
  // failure switches the store to memory-only (one warning) and is returned.
  enum class AfterPublish { prune, keep };
  Status publish(const Entry& entry, AfterPublish after = AfterPublish::prune);

  // The cross-process lock for `key` (not held if locking is off, failed or timed out).
  KeyLock lock_key(const Hash128& key);

  // Every entry in every layer, read-only layers first; each decoded and verified (or why
  // not), its payload then dropped (one entry's code at a time is read). Something at an
  // entry's path that is not a regular file is listed as bad; an entry removed meanwhile
  // (evicted by another process) is left out.
  std::vector<EntryInfo> list() const;

  // Moves a bad entry of the writable root aside to *.corrupt (prune removes it), whatever it
  // is: a damaged file, a directory, a FIFO, a link; the very file listed, not one published at
  // its path since. Entries of read-only layers are refused.
  Status move_aside(const EntryInfo& info);

  // Least-recently-used entries of the writable root are removed until it holds at most
  // `max_bytes` (temporaries of publishes in progress count); entries being loaded are never
  // removed. First removes moved-aside entries, anything at an entry's path that is not a
  // regular file, and temporaries of publishers that died (their process is gone, or they are
  // over an hour old).
  PruneResult prune(std::uint64_t max_bytes);

  StoreStats stats() const;
  bool memory_only() const { return memory_only_.load(); }
  // Why a layer, the writable root or the lock directory is not in use (each also logged once
  // as a warning); empty when all is well. `moejit cache stat` and `verify` report these.
  std::vector<std::string> problems() const;
  // The refusal to `doing` (e.g. "warm") a memory-only store, saying what made it so.
  Status memory_only_error(std::string_view doing) const;
  const StoreOptions& options() const { return options_; }
  std::string entry_path(const std::string& root, const Hash128& key) const;

 private:
  std::optional<Entry> load_from(const std::string& root, bool writable, const Hash128& key,
                                 std::string_view material);
  void degrade_to_memory_only(const std::string& why);
  void add_problem(std::string what);

  StoreOptions options_;
  std::atomic<bool> memory_only_{false};
  std::atomic<bool> warned_memory_only_{false};
  std::vector<std::string> read_roots_;  // read_only plus an unwritable but readable dir
  mutable std::mutex problems_mutex_;
  std::vector<std::string> problems_;
  std::string memory_only_why_;  // under problems_mutex_

  struct Counters {
    std::atomic<std::uint64_t> disk_hits{0}, disk_misses{0}, corrupt{0}, published{0},
        publish_failures{0}, evicted{0}, lock_waits{0}, lock_timeouts{0}, lock_wait_us{0};
  };
  mutable Counters counters_;
};

}  // namespace moejit::store
