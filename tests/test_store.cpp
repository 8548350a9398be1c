// The kernel store (DESIGN §4): format, verification, layers, degradation, eviction, copies.

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <random>

#include "cache/bundle.hpp"
#include "cache/store.hpp"
#include "compile/nvrtc_library.hpp"
#include "support/fs.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

namespace {

std::mt19937_64& rng() {
  static std::mt19937_64 r{std::random_device{}()};
  return r;
}

std::string random_bytes(std::size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng()());
  return s;
}

// A synthetic entry with a random key material and payload.
store::Entry random_entry(std::size_t payload_bytes = 4096) {
  store::Entry e;
  e.key_material = "test-material " + random_bytes(16);
  e.key = xxh3_128(e.key_material);
  e.meta.kernel_name = "_Z6kernelv";
  e.meta.compiler = "test-compiler 1.0";
  e.meta.registers = static_cast<std::uint32_t>(rng()() % 255);
  e.meta.dynamic_shared_bytes = 1234;
  e.meta.block_threads = 128;
  e.meta.compile_ms = 12.5;
  e.meta.created_unix_ms = 1700000000000;
  e.payload = random_bytes(payload_bytes);
  return e;
}

}  // namespace

TEST_CASE("entry encode/decode round-trips every field") {
  store::Entry e = random_entry();
  auto d = store::decode_entry(store::encode_entry(e));
  REQUIRE(d.ok());
  CHECK(d->key == e.key);
  CHECK(d->key_material == e.key_material);
  CHECK(d->payload == e.payload);
  CHECK(d->meta.kernel_name == e.meta.kernel_name);
  CHECK(d->meta.compiler == e.meta.compiler);
  CHECK(d->meta.registers == e.meta.registers);
  CHECK(d->meta.dynamic_shared_bytes == 1234);
  CHECK(d->meta.block_threads == 128);
  CHECK(d->meta.compile_ms == 12.5);
  CHECK(d->meta.created_unix_ms == 1700000000000);
}

TEST_CASE("every truncation and every flipped byte of an entry is detected") {
  store::Entry e = random_entry(512);
  std::string bytes = store::encode_entry(e);
  for (std::size_t len = 0; len < bytes.size(); ++len) {
    CAPTURE(len);
    CHECK_FALSE(store::decode_entry(std::string_view(bytes).substr(0, len)).ok());
  }
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    CAPTURE(i);
    std::string flipped = bytes;
    flipped[i] = static_cast<char>(flipped[i] ^ (1 << (i % 8)));
    CHECK_FALSE(store::decode_entry(flipped).ok());
  }
}

TEST_CASE("publish then load and a different material for the same key is refused") {
  TempDir dir;
  store::Store s(store_options_in(dir));
  REQUIRE_FALSE(s.memory_only());
  store::Entry e = random_entry();
  REQUIRE(s.publish(e).ok());
  auto loaded = s.load(e.key, e.key_material);
  REQUIRE(loaded.has_value());
  CHECK(loaded->payload == e.payload);
  CHECK(s.stats().disk_hits == 1);
  CHECK_FALSE(s.load(xxh3_128("other"), "other").has_value());
  CHECK(s.stats().disk_misses == 1);
  // Directories are private to the user.
  struct stat st {};
  REQUIRE(::stat((dir / "store").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
}

TEST_CASE("bad entries are detected on load and moved aside and counted") {
  TempDir dir;
  LogCapture logs;
  store::Store s(store_options_in(dir));
  store::Entry a = random_entry(), b = random_entry();
  REQUIRE(s.publish(a).ok());
  REQUIRE(s.publish(b).ok());
  std::string path_a = s.entry_path(dir / "store", a.key);
  std::string path_b = s.entry_path(dir / "store", b.key);
  std::string bytes_a = slurp(path_a), bytes_b = slurp(path_b);

  SUBCASE("truncated") { write_text(path_a, bytes_a.substr(0, bytes_a.size() / 2)); }
  SUBCASE("flipped payload byte") {
    bytes_a[bytes_a.size() - 100] = static_cast<char>(bytes_a[bytes_a.size() - 100] ^ 0x10);
    write_text(path_a, bytes_a);
  }
  SUBCASE("another spec's entry under this key's name") { write_text(path_a, bytes_b); }

  CHECK_FALSE(s.load(a.key, a.key_material).has_value());
  CHECK(s.stats().corrupt == 1);
  CHECK_FALSE(fs::exists(path_a));
  CHECK(fs::exists(path_a + ".corrupt"));
  CHECK(logs.count_containing("failed verification") == 1);
  // Rebuilt: a fresh publish replaces it and loads again; the good neighbour is untouched.
  REQUIRE(s.publish(a).ok());
  CHECK(s.load(a.key, a.key_material).has_value());
  CHECK(s.load(b.key, b.key_material).has_value());
  // prune clears the moved-aside file.
  CHECK(s.prune(UINT64_MAX).removed_other == 1);
  CHECK_FALSE(fs::exists(path_a + ".corrupt"));
}

TEST_CASE("a corrupt entry is rebuilt through the resolver") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  LogCapture logs;
  KernelSpec spec = align_spec(32, 16, 2);
  std::string path;
  {
    auto r = KernelResolver::create(resolver_options_in(dir));
    REQUIRE(r.ok());
    auto res = (*r)->resolve(spec);
    REQUIRE(res.ok());
    CHECK(res->source == KernelSource::compiled);
    path = (*r)->store().entry_path(dir / "store", res->kernel->key);
  }
  std::string bytes = slurp(path);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0xff);
  write_text(path, bytes);
  auto r = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(r.ok());
  auto res = (*r)->resolve(spec);
  REQUIRE(res.ok());
  CHECK(res->source == KernelSource::compiled);
  CHECK((*r)->stats().store.corrupt == 1);
  CHECK((*r)->stats().compiles == 1);
  CHECK(fs::exists(path + ".corrupt"));
  CHECK(store::decode_entry(slurp(path)).ok());  // the rebuilt entry is good
}

TEST_CASE("read-only layers are searched first and never written") {
  TempDir dir;
  store::Entry e = random_entry();
  store::Entry shipped = e;
  shipped.meta.kernel_name = "_Z7shippedv";  // same key, recognisably the layer's copy
  {
    store::StoreOptions ro_opts = store_options_in(dir);
    ro_opts.dir = dir / "shipped";
    store::Store ro(ro_opts);
    REQUIRE(ro.publish(shipped).ok());
  }
  store::StoreOptions o = store_options_in(dir);
  o.read_only = {dir / "shipped"};
  store::Store s(o);
  REQUIRE(s.publish(e).ok());
  auto loaded = s.load(e.key, e.key_material);
  REQUIRE(loaded.has_value());
  CHECK(loaded->meta.kernel_name == "_Z7shippedv");
  // A bad read-only entry is skipped (not moved: the layer is read-only) and the writable copy used.
  std::string ro_path = s.entry_path(dir / "shipped", e.key);
  write_text(ro_path, "garbage");
  loaded = s.load(e.key, e.key_material);
  REQUIRE(loaded.has_value());
  CHECK(loaded->meta.kernel_name == "_Z6kernelv");
  CHECK(fs::exists(ro_path));
  CHECK(s.stats().corrupt == 1);
}

TEST_CASE("an unusable store directory degrades to memory-only with one warning") {
  TempDir dir;
  LogCapture logs;
  write_text(dir / "not-a-dir", "x");
  store::StoreOptions o = store_options_in(dir);
  o.dir = dir / "not-a-dir/store";  // cannot be created, even by root
  store::Store s(o);
  CHECK(s.memory_only());
  store::Entry e = random_entry();
  CHECK_FALSE(s.publish(e).ok());
  CHECK_FALSE(s.publish(random_entry()).ok());
  CHECK_FALSE(s.load(e.key, e.key_material).has_value());
  CHECK(logs.count_containing("kept in memory only") == 1);
}

TEST_CASE("the resolver works memory-only when the store is unusable") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  LogCapture logs;
  write_text(dir / "not-a-dir", "x");
  auto o = resolver_options_in(dir);
  o.store.dir = dir / "not-a-dir/store";
  auto r = KernelResolver::create(o);
  REQUIRE(r.ok());
  KernelSpec a = align_spec(16, 16, 1), b = align_spec(16, 32, 1);
  REQUIRE((*r)->resolve(a).ok());
  REQUIRE((*r)->resolve(b).ok());
  auto again = (*r)->resolve(a);
  REQUIRE(again.ok());
  CHECK(again->source == KernelSource::memory);
  CHECK(logs.count_containing("kept in memory only") == 1);
}

TEST_CASE("a failed atomic write carries the errno behind it, which the store's publish decides by") {
  TempDir dir;
  const Status missing = write_file_atomic(dir / "no-such-dir/file", random_bytes(64));
  CHECK(missing.code() == Code::io_error);
  CHECK(missing.system_error() == ENOENT);
  const std::string file = dir / "a-file";
  REQUIRE(write_file_atomic(file, random_bytes(64)).ok());
  const Status under_a_file = write_file_atomic(file + "/child", random_bytes(64));
  CHECK(under_a_file.system_error() == ENOTDIR);
  CHECK(under_a_file.message().find(std::strerror(ENOTDIR)) != std::string::npos);
  // Failures that are no system call's carry none.
  CHECK(error(Code::io_error, "not a system call's").system_error() == 0);
  CHECK(Status{}.system_error() == 0);
}

TEST_CASE("a full disk during publish degrades to memory-only with one warning") {
  // RLIMIT_FSIZE makes writes past 64 KB fail with EFBIG, as a full disk would; in a child
  // process so the limit does not outlive the test.
  TempDir dir;
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    LogCapture logs;
    store::Store s(store_options_in(dir));
    struct rlimit lim = {64 * 1024, 64 * 1024};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    bool small_ok = s.publish(random_entry(1024)).ok();
    bool big_failed = !s.publish(random_entry(1 << 20)).ok();
    bool degraded = s.memory_only();
    bool later_refused = !s.publish(random_entry(1024)).ok();
    bool one_warning = logs.count_containing("kept in memory only") == 1;
    bool no_leftovers = true;
    for (auto& p : fs::directory_iterator(dir / "store/entries"))
      no_leftovers &= !p.path().filename().string().ends_with(".tmp");
    ::_exit(small_ok && big_failed && degraded && later_refused && one_warning && no_leftovers ? 0 : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("running out of descriptors fails one publish and leaves the store on disk") {
  // EMFILE passes when the process closes files; unlike a full disk it must not turn the store
  // memory-only for the rest of the process. In a child, so that its limit stays there.
  TempDir dir;
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    LogCapture logs;
    store::Store s(store_options_in(dir));
    bool first_ok = s.publish(random_entry(1024)).ok();
    struct rlimit old {};
    ::getrlimit(RLIMIT_NOFILE, &old);
    struct rlimit lim = old;
    lim.rlim_cur = 256;
    ::setrlimit(RLIMIT_NOFILE, &lim);
    std::vector<int> fillers;  // every descriptor up to the limit
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers.push_back(fd);
    bool emfile = errno == EMFILE;
    store::Entry e = random_entry(1024);
    Status failed = s.publish(e);
    bool still_on_disk = !s.memory_only();
    for (int fd : fillers) ::close(fd);
    ::setrlimit(RLIMIT_NOFILE, &old);
    bool later_ok = s.publish(e).ok() && s.load(e.key, e.key_material).has_value();
    bool warned = logs.count_containing("not stored, this time") == 1 &&
                  logs.count_containing("kept in memory only") == 0;
    bool counted = s.stats().publish_failures == 1;
    ::_exit(first_ok && emfile && !failed.ok() && still_on_disk && later_ok && warned && counted
                ? 0
                : 1);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("a store or lock directory removed while the process runs is made again, not given up") {
  // A cache cleared by hand or a tmpfiles clean of /tmp while a server runs: the next publish
  // and the next compile's lock make their directories again, with the usual checks.
  TempDir dir;
  LogCapture logs;
  store::Store s(store_options_in(dir));
  store::Entry first = random_entry(1024), second = random_entry(1024);
  REQUIRE(s.publish(first).ok());
  fs::remove_all(dir / "store");
  fs::remove_all(dir / "locks");
  CHECK_FALSE(s.load(first.key, first.key_material).has_value());
  store::KeyLock lock = s.lock_key(second.key);
  CHECK(lock.held());
  CHECK(s.publish(second).ok());
  CHECK_FALSE(s.memory_only());
  CHECK(s.problems().empty());
  CHECK(s.load(second.key, second.key_material).has_value());
  CHECK(logs.count_containing("had been removed; made it again") == 2);
  CHECK(logs.count_containing("kept in memory only") == 0);
  for (const char* made : {"store", "store/entries", "locks"}) {
    CAPTURE(made);
    CHECK((fs::status(dir / made).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
  }
  CHECK(s.stats().publish_failures == 0);
  CHECK(s.stats().published == 2);
}

TEST_CASE("size bound evicts least-recently-used entries first") {
  TempDir dir;
  store::Store s(store_options_in(dir));
  std::vector<store::Entry> entries;
  for (int i = 0; i < 6; ++i) {
    entries.push_back(random_entry(10000));
    REQUIRE(s.publish(entries.back()).ok());
    set_mtime(s.entry_path(dir / "store", entries.back().key), 1000000 + i * 10);
  }
  // A load refreshes the stamp: entry 0 becomes the most recently used.
  REQUIRE(s.load(entries[0].key, entries[0].key_material).has_value());
  const std::uint64_t entry_bytes = fs::file_size(s.entry_path(dir / "store", entries[0].key));
  auto r = s.prune(entry_bytes * 3);
  CHECK(r.removed_entries == 3);
  CHECK(r.bytes_after <= entry_bytes * 3);
  CHECK(s.load(entries[0].key, entries[0].key_material).has_value());
  CHECK_FALSE(s.load(entries[1].key, entries[1].key_material).has_value());
  CHECK_FALSE(s.load(entries[2].key, entries[2].key_material).has_value());
  CHECK_FALSE(s.load(entries[3].key, entries[3].key_material).has_value());
  CHECK(s.load(entries[4].key, entries[4].key_material).has_value());
  CHECK(s.load(entries[5].key, entries[5].key_material).has_value());
  CHECK(s.stats().evicted == 3);
}

TEST_CASE("publish enforces the configured size bound") {
  TempDir dir;
  store::StoreOptions o = store_options_in(dir);
  o.max_bytes = 50000;
  store::Store s(o);
  for (int i = 0; i < 10; ++i) REQUIRE(s.publish(random_entry(10000)).ok());
  std::uint64_t total = 0;
  for (const auto& info : s.list()) total += info.bytes;
  CHECK(total <= 50000);
  CHECK(s.stats().evicted >= 5);
}

TEST_CASE("an entry being loaded is never evicted") {
  TempDir dir;
  store::Store s(store_options_in(dir));
  store::Entry busy = random_entry(), idle = random_entry();
  REQUIRE(s.publish(busy).ok());
  REQUIRE(s.publish(idle).ok());
  std::string busy_path = s.entry_path(dir / "store", busy.key);
  set_mtime(busy_path, 1000);  // the oldest: first in line for eviction
  // Hold the shared lock a loader holds while it reads (here from another open file
  // description, as another process would).
  UniqueFd loader(::open(busy_path.c_str(), O_RDONLY));
  REQUIRE(::flock(loader.get(), LOCK_SH) == 0);
  auto r = s.prune(0);
  CHECK(r.skipped_in_use == 1);
  CHECK(r.removed_entries == 1);
  CHECK(fs::exists(busy_path));
  loader.reset();
  CHECK(s.prune(0).removed_entries == 1);
  CHECK_FALSE(fs::exists(busy_path));
}

TEST_CASE("prune removes stale temporaries of dead publishers and keeps fresh ones") {
  TempDir dir;
  store::Store s(store_options_in(dir));
  std::string stale = dir / "store/entries/.abc.mjk.1.2.3.tmp";
  std::string fresh = dir / "store/entries/.def.mjk.4.5.6.tmp";
  write_text(stale, "partial");
  write_text(fresh, "partial");
  set_mtime(stale, 1000);
  CHECK(s.prune(UINT64_MAX).removed_other == 1);
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(fresh));
}

TEST_CASE("a store copied to another directory hits") {
  if (!nvrtc_or_skip()) return;
  TempDir a, b;
  KernelSpec spec = align_spec(128, 32, 4, Arch::sm_80);
  Hash128 key;
  {
    auto r = KernelResolver::create(resolver_options_in(a));
    REQUIRE(r.ok());
    auto res = (*r)->resolve(spec);
    REQUIRE(res.ok());
    CHECK(res->source == KernelSource::compiled);
    key = res->kernel->key;
  }
  fs::copy(a / "store", b / "store", fs::copy_options::recursive);
  auto r = KernelResolver::create(resolver_options_in(b));
  REQUIRE(r.ok());
  auto res = (*r)->resolve(spec);
  REQUIRE(res.ok());
  CHECK(res->source == KernelSource::disk);
  CHECK(res->kernel->key == key);
  CHECK((*r)->stats().compiles == 0);
}

TEST_CASE("bundles export and import and damaged bundles are refused") {
  TempDir dir;
  store::StoreOptions src_opts = store_options_in(dir);
  src_opts.dir = dir / "src";
  store::Store src(src_opts);
  std::vector<store::Entry> entries;
  for (int i = 0; i < 4; ++i) {
    entries.push_back(random_entry(3000));
    REQUIRE(src.publish(entries.back()).ok());
  }
  auto all = store::export_bundle(src, dir / "all.mjb", std::nullopt);
  REQUIRE(all.ok());
  CHECK(all->entries == 4);
  auto some = store::export_bundle(src, dir / "some.mjb", std::vector<Hash128>{entries[1].key});
  REQUIRE(some.ok());
  CHECK(some->entries == 1);
  CHECK_FALSE(store::export_bundle(src, dir / "x.mjb", std::vector<Hash128>{xxh3_128("nope")}).ok());

  store::StoreOptions dst_opts = store_options_in(dir);
  dst_opts.dir = dir / "dst";
  store::Store dst(dst_opts);
  auto imported = store::import_bundle(dst, dir / "all.mjb");
  REQUIRE(imported.ok());
  CHECK(imported->entries == 4);
  for (const auto& e : entries) CHECK(dst.load(e.key, e.key_material).has_value());

  // A damaged bundle is refused as a whole; nothing of it is published.
  std::string bytes = slurp(dir / "all.mjb");
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 1);
  write_text(dir / "bad.mjb", bytes);
  store::StoreOptions fresh_opts = store_options_in(dir);
  fresh_opts.dir = dir / "fresh";
  store::Store fresh(fresh_opts);
  auto bad = store::import_bundle(fresh, dir / "bad.mjb");
  CHECK_FALSE(bad.ok());
  CHECK(bad.status().code() == Code::corrupt);
  CHECK(fresh.list().empty());
  // A bundle whose own checksum is intact but which carries a damaged entry is refused too.
  std::string inner = slurp(dir / "all.mjb");
  inner[inner.size() - 200] = static_cast<char>(inner[inner.size() - 200] ^ 1);
  std::uint64_t trailer = xxh3_64(inner.data(), inner.size() - 8);
  std::memcpy(inner.data() + inner.size() - 8, &trailer, 8);
  write_text(dir / "inner.mjb", inner);
  auto inner_bad = store::import_bundle(fresh, dir / "inner.mjb");
  CHECK_FALSE(inner_bad.ok());
  CHECK(inner_bad.status().message().find("entry 3") != std::string::npos);
  CHECK(fresh.list().empty());
  write_text(dir / "short.mjb", slurp(dir / "all.mjb").substr(0, 100));
  CHECK_FALSE(store::import_bundle(fresh, dir / "short.mjb").ok());
  CHECK_FALSE(store::import_bundle(fresh, dir / "missing.mjb").ok());
}
