// The kernel store stays available and keeps what it holds: a lock someone else holds on an
// entry never stalls a load, an entry that cannot be read for a passing reason is not taken from
// the other processes, a listing does not hold the store's code in memory, an import is not
// evicted by itself, and a repair moves only the file it examined.

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <random>

#include "cache/bundle.hpp"
#include "cache/store.hpp"
#include "support/fs.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

namespace {

store::Entry random_entry(std::size_t payload_bytes = 2048) {
  static std::mt19937_64 rng{std::random_device{}()};
  store::Entry e;
  e.key_material = "availability-test " + std::to_string(rng()) + "\n";
  e.key = xxh3_128(e.key_material);
  e.meta.kernel_name = "_Z6kernelv";
  e.meta.compiler = "test-compiler 1.0";
  e.meta.created_unix_ms = 1700000000000;
  e.payload.resize(payload_bytes);
  for (auto& c : e.payload) c = static_cast<char>(rng());
  return e;
}

// Loads `e` on another thread while this one holds an exclusive flock on `path` from its own
// open file description (as another process, or another user of a shared layer, can). A load
// that waits for the lock fails the test after 10 s; the lock is then dropped so it finishes.
void load_while_locked(store::Store& s, const store::Entry& e, const std::string& path) {
  UniqueFd holder(::open(path.c_str(), O_RDONLY));
  REQUIRE(holder.valid());
  REQUIRE(::flock(holder.get(), LOCK_EX) == 0);
  auto loaded = std::async(std::launch::async, [&] { return s.load(e.key, e.key_material).has_value(); });
  const bool finished = loaded.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  holder.reset();
  CHECK_MESSAGE(finished, "the load waited for a lock another process held");
  CHECK(loaded.get());
}

}  // namespace

TEST_CASE("an exclusive lock on an entry never stalls its load") {
  TempDir dir;
  store::Entry e = random_entry();
  SUBCASE("in a read-only layer (anyone who can read the files can lock them)") {
    store::StoreOptions publisher = store_options_in(dir);
    publisher.dir = dir / "layer";
    {
      store::Store s(publisher);
      REQUIRE(s.publish(e).ok());
    }
    store::StoreOptions o = store_options_in(dir);
    o.read_only = {dir / "layer"};
    store::Store s(o);
    REQUIRE(s.problems().empty());
    load_while_locked(s, e, s.entry_path(dir / "layer", e.key));
  }
  SUBCASE("in the writable root") {
    store::Store s(store_options_in(dir));
    REQUIRE(s.publish(e).ok());
    load_while_locked(s, e, s.entry_path(dir / "store", e.key));
  }
}

TEST_CASE("an entry that cannot be opened for want of descriptors is a miss, not moved aside") {
  TempDir dir;
  store::Store s(store_options_in(dir));
  store::Entry e = random_entry();
  REQUIRE(s.publish(e).ok());
  const std::string path = s.entry_path(dir / "store", e.key);
  // In a child: no descriptor left to open the entry with (EMFILE), then a load.
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::alarm(30);
    int lowest = ::open("/dev/null", O_RDONLY);
    if (lowest < 0) _exit(3);
    ::close(lowest);
    struct rlimit limit {static_cast<rlim_t>(lowest), static_cast<rlim_t>(lowest)};
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(4);
    if (::open(path.c_str(), O_RDONLY) >= 0) _exit(5);  // the limit holds
    _exit(s.load(e.key, e.key_material).has_value() ? 6 : 0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(fs::exists(path));
  CHECK_FALSE(fs::exists(path + ".corrupt"));
  CHECK(s.load(e.key, e.key_material).has_value());
}

TEST_CASE("a listing verifies every entry without holding their code") {
  TempDir dir;
  store::Store s(store_options_in(dir));
  std::vector<store::Entry> entries;
  for (int i = 0; i < 3; ++i) {
    entries.push_back(random_entry(50000));
    REQUIRE(s.publish(entries.back()).ok());
  }
  auto listed = s.list();
  REQUIRE(listed.size() == 3);
  for (const auto& info : listed) {
    REQUIRE(info.entry.ok());
    CHECK(info.entry->payload.empty());
    CHECK(info.entry->meta.kernel_name == "_Z6kernelv");
    CHECK(info.bytes > 50000);
  }
}

TEST_CASE("a bundle is imported whole or, past the size bound, not at all") {
  TempDir dir;
  store::StoreOptions src_opts = store_options_in(dir);
  src_opts.dir = dir / "src";
  store::Store src(src_opts);
  std::vector<store::Entry> entries;
  for (int i = 0; i < 4; ++i) {
    entries.push_back(random_entry(3000));
    REQUIRE(src.publish(entries.back()).ok());
  }
  REQUIRE(store::export_bundle(src, dir / "all.mjb", std::nullopt).ok());

  SUBCASE("a bound that holds the bundle: every entry stays, older ones make room") {
    store::StoreOptions o = store_options_in(dir);
    const std::uint64_t entry_bytes = store::encode_entry(entries[0]).size();
    o.max_bytes = 4 * entry_bytes + entry_bytes / 2;  // the four entries, not one more
    store::Store dst(o);
    store::Entry old = random_entry(3000);
    REQUIRE(dst.publish(old).ok());
    set_mtime(dst.entry_path(dir / "store", old.key), 1000);  // the least recently used
    auto imported = store::import_bundle(dst, dir / "all.mjb");
    REQUIRE_MESSAGE(imported.ok(), imported.status().message());
    CHECK(imported->entries == 4);
    for (const auto& e : entries) CHECK(dst.load(e.key, e.key_material).has_value());
    CHECK_FALSE(dst.load(old.key, old.key_material).has_value());
  }
  SUBCASE("a bound smaller than the bundle: refused, naming both sizes") {
    store::StoreOptions o = store_options_in(dir);
    o.max_bytes = 10000;
    store::Store dst(o);
    auto imported = store::import_bundle(dst, dir / "all.mjb");
    REQUIRE_FALSE(imported.ok());
    CHECK(imported.status().message().find("keeps at most 10000 (MOEJIT_CACHE_MAX_BYTES)") != std::string::npos);
    CHECK(dst.list().empty());
  }
  SUBCASE("a memory-only store: refused, saying why") {
    store::StoreOptions o = store_options_in(dir);
    fs::create_directories(dir / "open");
    ::chmod((dir / "open").c_str(), 0777);  // writable by others: not trusted
    o.dir = dir / "open";
    store::Store dst(o);
    REQUIRE(dst.memory_only());
    auto imported = store::import_bundle(dst, dir / "all.mjb");
    REQUIRE_FALSE(imported.ok());
    CHECK(imported.status().message().find("writable by group or other") != std::string::npos);
  }
}

TEST_CASE("exporting chosen keys is not blocked by a bad entry elsewhere") {
  TempDir dir;
  store::Store s(store_options_in(dir));
  store::Entry good = random_entry(), damaged = random_entry();
  REQUIRE(s.publish(good).ok());
  REQUIRE(s.publish(damaged).ok());
  const std::string damaged_path = s.entry_path(dir / "store", damaged.key);
  std::string bytes = slurp(damaged_path);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 1);
  write_text(damaged_path, bytes);

  auto chosen = store::export_bundle(s, dir / "good.mjb", std::vector<Hash128>{good.key});
  REQUIRE_MESSAGE(chosen.ok(), chosen.status().message());
  CHECK(chosen->entries == 1);
  // The bad one itself, or everything, is still refused, naming the bad file.
  for (const auto& keys : {std::optional<std::vector<Hash128>>{{damaged.key}}, std::optional<std::vector<Hash128>>{}}) {
    auto refused = store::export_bundle(s, dir / "bad.mjb", keys);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().message().find(damaged_path) != std::string::npos);
  }
}

TEST_CASE("a repair moves aside only the file it examined") {
  TempDir dir;
  store::Store s(store_options_in(dir));
  store::Entry e = random_entry();
  REQUIRE(s.publish(e).ok());
  const std::string path = s.entry_path(dir / "store", e.key);
  write_text(path, "damaged");
  auto listed = s.list();
  REQUIRE(listed.size() == 1);
  REQUIRE_FALSE(listed[0].entry.ok());
  // Rebuilt and published again by another process between the listing and the repair.
  REQUIRE(s.publish(e).ok());
  Status moved = s.move_aside(listed[0]);
  CHECK_FALSE(moved.ok());
  CHECK(moved.message().find("replaced since it was listed") != std::string::npos);
  CHECK(s.load(e.key, e.key_material).has_value());
  // The file listed, still there, is moved.
  write_text(path + ".tmp-damage", "damaged");
  fs::rename(path + ".tmp-damage", path);
  listed = s.list();
  REQUIRE(listed.size() == 1);
  CHECK(s.move_aside(listed[0]).ok());
  CHECK(fs::exists(path + ".corrupt"));
}

TEST_CASE("MOEJIT_LOCK_TIMEOUT_MS past a day is refused, not overflowed") {
  const char* old = std::getenv("MOEJIT_LOCK_TIMEOUT_MS");
  const std::string saved = old ? old : "";
  ::setenv("MOEJIT_LOCK_TIMEOUT_MS", "10000000000000", 1);
  auto o = store::StoreOptions::from_environment();
  ::setenv("MOEJIT_LOCK_TIMEOUT_MS", "86400000", 1);
  auto day = store::StoreOptions::from_environment();
  if (old) ::setenv("MOEJIT_LOCK_TIMEOUT_MS", saved.c_str(), 1);
  else ::unsetenv("MOEJIT_LOCK_TIMEOUT_MS");
  REQUIRE_FALSE(o.ok());
  CHECK(o.status().message().find("MOEJIT_LOCK_TIMEOUT_MS = 10000000000000: expected at most 86400000") !=
        std::string::npos);
  REQUIRE(day.ok());
  CHECK(day->lock_timeout == std::chrono::milliseconds(86400000));
}
