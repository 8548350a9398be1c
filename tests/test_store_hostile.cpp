// The kernel store against a hostile co-tenant, special files and races (issue 11): who may own
// what the store reads, lock and dump directories in shared places, FIFOs, devices and links at
// store paths, one bad path costing one key, eviction during a scan, and the empty variable.
//
// Files "of another user" are made by root with lchown to nobody (uid 65534): the state a second
// user leaves behind is the same. Those tests skip when not run as root, saying so.

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "cache/bundle.hpp"
#include "cache/store.hpp"
#include "compile/source_dump.hpp"
#include "support/fs.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

namespace {

constexpr uid_t kOtherUser = 65534;  // nobody

std::string random_text(std::size_t n) {
  static std::mt19937_64 rng{std::random_device{}()};
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>('a' + rng() % 26);
  return s;
}

store::Entry random_entry(std::size_t payload_bytes = 2048, const std::string& backend_line = "") {
  store::Entry e;
  e.key_material = "test-material " + random_text(16) + "\n" + backend_line;
  e.key = xxh3_128(e.key_material);
  e.meta.kernel_name = "_Z6kernelv";
  e.meta.compiler = "test-compiler 1.0";
  e.meta.created_unix_ms = 1700000000000;
  e.payload = random_text(payload_bytes);
  return e;
}

// Whether this process can make files owned by another user; if not, the test says why it skips.
bool can_act_as_other_user() {
  if (::geteuid() == 0) return true;
  MESSAGE("skipped: making files owned by another user needs root (lchown); running as uid " << ::geteuid());
  return false;
}

void give_to_other_user(const std::string& path) { REQUIRE(::lchown(path.c_str(), kOtherUser, kOtherUser) == 0); }

void make_fifo(const std::string& path) { REQUIRE(::mkfifo(path.c_str(), 0600) == 0); }

// Runs `body` in a child process that is killed after `seconds`: a hang fails the test
// instead of stalling the suite. The child's exit code is returned (-1: it hung).
template <typename F>
int within_seconds(int seconds, F&& body) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::alarm(static_cast<unsigned>(seconds));
    _exit(body() ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

// `timeout` (coreutils) around the CLI: exit 124 means it hung.
ProcessResult run_cli(const TempDir& dir, std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
  std::vector<std::string> argv = {"/usr/bin/timeout", "60", MOEJIT_CLI, "--json"};
  argv.insert(argv.end(), args.begin(), args.end());
  env.emplace("MOEJIT_LOCK_DIR", dir / "locks");
  return run_process(argv, env);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Item 1: code planted in a store another user controls is never loaded.

TEST_CASE("a writable root another user owns or can write is neither read nor written") {
  TempDir dir;
  // A genuine entry (checksums and all), as the other user would build with the same binary.
  store::Entry planted = random_entry();
  auto plant = [&](const std::string& root) {
    fs::create_directories(root + "/entries");
    write_text(root + "/entries/" + planted.key.hex() + ".mjk", store::encode_entry(planted));
  };
  store::StoreOptions o = store_options_in(dir);
  LogCapture logs;
  std::string expected_reason;

  SUBCASE("the store root is another user's") {
    if (!can_act_as_other_user()) return;
    plant(o.dir);
    ::chmod(o.dir.c_str(), 0755);
    for (auto p : {o.dir, o.dir + "/entries", o.dir + "/entries/" + planted.key.hex() + ".mjk"}) give_to_other_user(p);
    expected_reason = "owned by uid 65534";
  }
  SUBCASE("the store root is writable by everyone") {
    plant(o.dir);
    ::chmod(o.dir.c_str(), 0777);
    expected_reason = "writable by group or other";
  }
  SUBCASE("entries/ was made first by another user") {
    if (!can_act_as_other_user()) return;
    plant(o.dir);
    give_to_other_user(o.dir + "/entries");
    give_to_other_user(o.dir + "/entries/" + planted.key.hex() + ".mjk");
    expected_reason = "owned by uid 65534";
  }
  SUBCASE("entries/ is a link to a directory elsewhere") {
    plant(dir / "elsewhere");
    fs::create_directories(o.dir);
    fs::create_directory_symlink(dir / "elsewhere/entries", o.dir + "/entries");
    expected_reason = "symbolic link";
  }
  store::Store s(o);
  CHECK(s.memory_only());
  CHECK_FALSE(s.load(planted.key, planted.key_material).has_value());
  CHECK(s.list().empty());
  REQUIRE(s.problems().size() == 1);
  CHECK(s.problems()[0].find(expected_reason) != std::string::npos);
  CHECK(logs.count_containing(expected_reason) == 1);
  // Nothing is written there either, and clear reaches into nothing.
  CHECK_FALSE(s.publish(random_entry()).ok());
  CHECK(s.prune(0).removed_entries == 0);
  CHECK(fs::exists(s.entry_path(fs::exists(dir / "elsewhere") ? dir / "elsewhere" : o.dir, planted.key)));
}

TEST_CASE("read-only layers are used only when the user or root owns them and nobody else can write") {
  TempDir dir;
  store::Entry e = random_entry();
  std::string layer = dir / "layer";
  fs::create_directories(layer + "/entries");
  std::string entry = layer + "/entries/" + e.key.hex() + ".mjk";
  write_text(entry, store::encode_entry(e));
  ::chmod(layer.c_str(), 0755);
  ::chmod(entry.c_str(), 0644);
  store::StoreOptions o = store_options_in(dir);
  o.read_only = {layer};
  LogCapture logs;

  SUBCASE("own layer, not writable by others: used") {
    store::Store s(o);
    CHECK(s.problems().empty());
    CHECK(s.load(e.key, e.key_material).has_value());
  }
  SUBCASE("layer writable by everyone: not used") {
    ::chmod((layer + "/entries").c_str(), 0777);
    store::Store s(o);
    REQUIRE(s.problems().size() == 1);
    CHECK(s.problems()[0].find("writable by group or other") != std::string::npos);
    CHECK_FALSE(s.load(e.key, e.key_material).has_value());
  }
  SUBCASE("layer of another user: not used") {
    if (!can_act_as_other_user()) return;
    give_to_other_user(layer);
    store::Store s(o);
    REQUIRE(s.problems().size() == 1);
    CHECK(s.problems()[0].find("owned by uid 65534") != std::string::npos);
    CHECK_FALSE(s.load(e.key, e.key_material).has_value());
  }
  SUBCASE("an entry of another user in a trusted layer: skipped") {
    if (!can_act_as_other_user()) return;
    give_to_other_user(entry);
    store::Store s(o);
    CHECK(s.problems().empty());
    CHECK_FALSE(s.load(e.key, e.key_material).has_value());
    CHECK(logs.count_containing("owned by uid 65534") == 1);
    auto listed = s.list();
    REQUIRE(listed.size() == 1);
    CHECK_FALSE(listed[0].entry.ok());
  }
  SUBCASE("an entry writable by everyone: skipped") {
    ::chmod(entry.c_str(), 0666);
    store::Store s(o);
    CHECK_FALSE(s.load(e.key, e.key_material).has_value());
    CHECK(logs.count_containing("writable by group or other") == 1);
  }
}

TEST_CASE("moejit cache stat and verify report an untrusted store and verify fails") {
  TempDir dir;
  fs::create_directories(dir / "store/entries");
  ::chmod((dir / "store").c_str(), 0777);
  ProcessResult stat = run_cli(dir, {"--cache-dir", dir / "store", "cache", "stat"});
  REQUIRE(stat.exit_code == 0);
  auto doc = nlohmann::json::parse(stat.out);
  CHECK(doc["memory_only"] == true);
  REQUIRE(doc["problems"].size() == 1);
  CHECK(doc["problems"][0].get<std::string>().find("writable by group or other") != std::string::npos);
  ProcessResult verify = run_cli(dir, {"--cache-dir", dir / "store", "cache", "verify"});
  CHECK(verify.exit_code == 1);
  CHECK(nlohmann::json::parse(verify.out)["ok"] == false);
}

// ---------------------------------------------------------------------------------------------
// Item 2: lock and dump directories in shared places.

TEST_CASE("a lock directory another user made, or opened up, is not used and its links are not followed") {
  TempDir dir;
  store::Entry e = random_entry();
  std::string locks = dir / "locks";
  fs::create_directories(locks);
  std::string target = dir / "victim-file";
  fs::create_symlink(target, locks + "/" + e.key.hex() + ".lock");
  std::string expected;
  SUBCASE("mode 0777") {
    ::chmod(locks.c_str(), 0777);
    expected = "mode 0777";
  }
  SUBCASE("another user's") {
    if (!can_act_as_other_user()) return;
    give_to_other_user(locks);
    expected = "owned by uid 65534";
  }
  SUBCASE("a link to a directory") {
    fs::create_directories(dir / "real-locks");
    fs::rename(locks, dir / "real-locks/l");
    fs::create_directory_symlink(dir / "real-locks/l", locks);
    expected = "symbolic link";
  }
  store::StoreOptions o = store_options_in(dir);
  o.lock_dir = locks;
  LogCapture logs;
  store::Store s(o);
  REQUIRE(s.problems().size() == 1);
  CHECK(s.problems()[0].find(expected) != std::string::npos);
  store::KeyLock lock = s.lock_key(e.key);
  CHECK_FALSE(lock.held());
  CHECK_FALSE(fs::exists(target));
  // The store itself still works; only cross-process deduplication is off.
  CHECK(s.publish(e).ok());
}

TEST_CASE("a lock file that is a link or another user's is neither followed nor waited on") {
  TempDir dir;
  std::string target = dir / "created-through-link";
  std::string link = dir / "a.lock";
  fs::create_symlink(target, link);
  auto start = std::chrono::steady_clock::now();
  store::KeyLock through_link = store::KeyLock::acquire(link, std::chrono::milliseconds(5000));
  CHECK_FALSE(through_link.held());
  CHECK_FALSE(fs::exists(target));

  if (!can_act_as_other_user()) return;
  std::string theirs = dir / "b.lock";
  write_text(theirs, "");
  give_to_other_user(theirs);
  // Held by "them" the whole time: a waiter that trusted the file would wait the full 5 s.
  UniqueFd holder(::open(theirs.c_str(), O_RDONLY));
  REQUIRE(::flock(holder.get(), LOCK_EX) == 0);
  store::KeyLock other = store::KeyLock::acquire(theirs, std::chrono::milliseconds(5000));
  CHECK_FALSE(other.held());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
}

TEST_CASE("private directories in shared places are checked with lstat: owner, mode, no link") {
  TempDir dir;
  CHECK(make_private_dir_checked(dir / "fresh/locks").ok());
  struct stat st {};
  REQUIRE(::lstat((dir / "fresh/locks").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);

  fs::create_directories(dir / "open");
  ::chmod((dir / "open").c_str(), 0755);
  CHECK(make_private_dir_checked(dir / "open").message().find("expected a private directory (0700)") != std::string::npos);
  fs::create_directories(dir / "real");
  ::chmod((dir / "real").c_str(), 0700);
  fs::create_directory_symlink(dir / "real", dir / "link");
  CHECK(make_private_dir_checked(dir / "link").message().find("symbolic link") != std::string::npos);
  // An ancestor anyone can write (not sticky) spoils everything below it.
  fs::create_directories(dir / "shared/mine");
  ::chmod((dir / "shared").c_str(), 0777);
  ::chmod((dir / "shared/mine").c_str(), 0700);
  CHECK(make_private_dir_checked(dir / "shared/mine").message().find("writable by group or other") != std::string::npos);
  if (!can_act_as_other_user()) return;
  fs::create_directories(dir / "theirs");
  ::chmod((dir / "theirs").c_str(), 0700);
  give_to_other_user(dir / "theirs");
  CHECK(make_private_dir_checked(dir / "theirs").message().find("owned by uid 65534") != std::string::npos);
}

TEST_CASE("the default dump directory made first by another user is refused") {
  if (!can_act_as_other_user()) return;
  TempDir dir;
  ::unsetenv("MOEJIT_DUMP_DIR");
  const char* old_tmp = std::getenv("TMPDIR");
  std::string saved = old_tmp ? old_tmp : "";
  ::setenv("TMPDIR", dir.path().c_str(), 1);
  std::string root = dump_root();
  ::chmod(dir.path().c_str(), 0755);
  fs::create_directories(root);
  ::chmod(root.c_str(), 0777);
  give_to_other_user(root);
  codegen::GeneratedKernel kernel;
  kernel.source_name = "k.cu";
  kernel.source = "// " + random_text(40);
  auto dumped = dump_sources(kernel, *codegen::TemplateSet::embedded());
  if (old_tmp) ::setenv("TMPDIR", saved.c_str(), 1);
  else ::unsetenv("TMPDIR");
  REQUIRE_FALSE(dumped.ok());
  CHECK(dumped.status().message().find("owned by uid 65534") != std::string::npos);
  CHECK(fs::is_empty(root));
}

// ---------------------------------------------------------------------------------------------
// Item 3: FIFOs, devices and links at store paths and inputs never hang or read without end.

TEST_CASE("a FIFO or a link to /dev/zero at an entry path is reported bad, never waited on or read") {
  TempDir dir;
  store::StoreOptions o = store_options_in(dir);
  store::Entry e = random_entry();
  std::string path;
  {
    store::Store s(o);
    path = s.entry_path(o.dir, e.key);
  }
  SUBCASE("FIFO") { make_fifo(path); }
  SUBCASE("link to /dev/zero") { fs::create_symlink("/dev/zero", path); }
  SUBCASE("link to a genuine entry elsewhere") {
    write_text(dir / "genuine.mjk", store::encode_entry(e));
    fs::create_symlink(dir / "genuine.mjk", path);
  }
  int code = within_seconds(20, [&] {
    store::Store s(o);
    LogCapture logs;
    if (s.load(e.key, e.key_material).has_value()) return false;
    auto listed = s.list();
    return listed.size() == 0;  // moved aside by the load: the path is free again
  });
  CHECK(code == 0);
  // The load moved it aside; the key can be published and loaded again.
  store::Store s(o);
  CHECK(s.publish(e).ok());
  CHECK(s.load(e.key, e.key_material).has_value());
  CHECK(s.prune(UINT64_MAX).removed_other == 1);  // the thing moved aside
}

TEST_CASE("moejit cache verify, ls, stat and export finish with a FIFO at an entry path and verify repairs it") {
  TempDir dir;
  store::StoreOptions o = store_options_in(dir);
  store::Entry good = random_entry(), other = random_entry();
  std::string fifo;
  {
    store::Store s(o);
    REQUIRE(s.publish(good).ok());
    fifo = s.entry_path(o.dir, other.key);
  }
  make_fifo(fifo);
  for (const char* sub : {"ls", "stat"}) {
    ProcessResult r = run_cli(dir, {"--cache-dir", o.dir, "cache", sub});
    CAPTURE(sub);
    CHECK(r.exit_code == 0);
  }
  ProcessResult exp = run_cli(dir, {"--cache-dir", o.dir, "cache", "export", dir / "b.mjb"});
  CHECK(exp.exit_code == 1);  // a bad entry in the store: export refuses, names it
  CHECK(exp.out.find("FIFO") != std::string::npos);
  ProcessResult verify = run_cli(dir, {"--cache-dir", o.dir, "cache", "verify"});
  CHECK(verify.exit_code == 1);
  auto doc = nlohmann::json::parse(verify.out);
  REQUIRE(doc["bad"].size() == 1);
  CHECK(doc["bad"][0]["moved_aside"] == true);
  CHECK(doc["bad"][0]["error"].get<std::string>().find("a FIFO; expected a regular file") != std::string::npos);
  ProcessResult again = run_cli(dir, {"--cache-dir", o.dir, "cache", "verify"});
  CHECK(again.exit_code == 0);
  CHECK(run_cli(dir, {"--cache-dir", o.dir, "cache", "export", dir / "b.mjb"}).exit_code == 0);
}

TEST_CASE("inputs that are FIFOs, devices or too large are refused without waiting or reading them") {
  TempDir dir;
  make_fifo(dir / "fifo");
  fs::create_symlink("/dev/zero", dir / "zero");
  int code = within_seconds(20, [&] {
    auto fifo = read_file(dir / "fifo");
    auto zero = read_file(dir / "zero");
    return !fifo.ok() && fifo.status().message().find("a FIFO") != std::string::npos && !zero.ok() &&
           zero.status().message().find("a character device") != std::string::npos;
  });
  CHECK(code == 0);
  // A sparse file far over the cap is refused from its size, before any byte is read.
  {
    UniqueFd fd(::open((dir / "big").c_str(), O_WRONLY | O_CREAT, 0600));
    REQUIRE(::ftruncate(fd.get(), static_cast<off_t>(kMaxInputFileBytes) * 4) == 0);
  }
  auto big = read_file(dir / "big");
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().message().find("expected at most") != std::string::npos);
  // Links are refused where the caller says so (the store's own files).
  write_text(dir / "real", "x");
  fs::create_symlink(dir / "real", dir / "link");
  CHECK(read_file(dir / "link").ok());
  CHECK(read_file(dir / "link", kMaxInputFileBytes, Links::refuse).status().message().find("symbolic link") !=
        std::string::npos);

  // The CLI's inputs: a spec and a bundle that are a FIFO or /dev/zero.
  for (const std::string& input : {dir / "fifo", dir / "zero"}) {
    CAPTURE(input);
    ProcessResult compile = run_cli(dir, {"--cache-dir", dir / "store", "compile", "--spec", input});
    CHECK(compile.exit_code == 1);
    CHECK(compile.out.find("expected a regular file") != std::string::npos);
    ProcessResult import = run_cli(dir, {"--cache-dir", dir / "store", "cache", "import", input});
    CHECK(import.exit_code == 1);
    CHECK(import.out.find("expected a regular file") != std::string::npos);
  }
}

TEST_CASE("a huge file that starts like a bundle is rejected without reading it into memory") {
  TempDir dir;
  std::string path = dir / "huge.mjb";
  {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT, 0600));
    const char header[16] = {'M', 'O', 'E', 'J', 'I', 'T', 'B', 'N', 1, 0, 0, 0, 3, 0, 0, 0};
    REQUIRE(::write(fd.get(), header, sizeof header) == 16);
    // Entry 0 claims 2 GiB; the file is sparse, 3 GiB in all.
    const std::uint64_t length = 2ull << 30;
    REQUIRE(::write(fd.get(), &length, 8) == 8);
    REQUIRE(::ftruncate(fd.get(), static_cast<off_t>(3ull << 30)) == 0);
  }
  store::Store s(store_options_in(dir));
  auto start = std::chrono::steady_clock::now();
  auto r = store::import_bundle(s, path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("expected at most") != std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(s.list().empty());
}

// ---------------------------------------------------------------------------------------------
// Item 4: a directory at one entry path costs that key alone, and verify/clear repair it.

TEST_CASE("a directory at one entry path fails that key alone and verify or clear remove it") {
  TempDir dir;
  store::StoreOptions o = store_options_in(dir);
  store::Store s(o);
  store::Entry blocked = random_entry(), fine = random_entry();
  fs::create_directories(s.entry_path(o.dir, blocked.key) + "/inside");
  LogCapture logs;
  Status failed = s.publish(blocked);
  CHECK_FALSE(failed.ok());
  CHECK(failed.message().find("moejit cache verify") != std::string::npos);
  CHECK_FALSE(s.memory_only());
  CHECK(s.problems().empty());
  REQUIRE(s.publish(fine).ok());
  CHECK(s.load(fine.key, fine.key_material).has_value());
  CHECK(s.stats().publish_failures == 1);

  SUBCASE("verify moves it aside, then the key publishes") {
    auto listed = s.list();
    REQUIRE(listed.size() == 2);
    int bad = 0;
    for (const auto& info : listed) {
      if (info.entry.ok()) continue;
      ++bad;
      CHECK_FALSE(info.regular_file);
      CHECK(s.move_aside(info).ok());
    }
    CHECK(bad == 1);
    CHECK(s.publish(blocked).ok());
    CHECK(s.load(blocked.key, blocked.key_material).has_value());
    CHECK(s.prune(UINT64_MAX).removed_other == 1);
  }
  SUBCASE("clear removes it with everything else") {
    auto r = s.prune(0);
    CHECK(r.removed_entries == 1);
    CHECK(r.removed_other == 1);
    CHECK(fs::is_empty(o.dir + "/entries"));
  }
}

// ---------------------------------------------------------------------------------------------
// Item 7: entries evicted by another process while a scan runs are skipped, not reported bad.

TEST_CASE("entries that vanish during list, verify and export are skipped") {
  TempDir dir;
  store::StoreOptions o = store_options_in(dir);
  o.max_bytes = 0;
  store::Store s(o);
  std::vector<store::Entry> entries;
  for (int i = 0; i < 300; ++i) {
    entries.push_back(random_entry(256));
    REQUIRE(s.publish(entries.back()).ok());
  }
  std::atomic<bool> stop{false};
  std::thread evictor([&] {
    // Another process's eviction: entries disappear one by one while we scan.
    for (const auto& e : entries) {
      if (stop) break;
      ::unlink(s.entry_path(o.dir, e.key).c_str());
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  int bad = 0, export_failures = 0, rounds = 0;
  while (rounds < 400 && !fs::is_empty(o.dir + "/entries")) {
    for (const auto& info : s.list()) bad += info.entry.ok() ? 0 : 1;
    auto exported = store::export_bundle(s, dir / "b.mjb", std::nullopt);
    if (!exported.ok()) {
      ++export_failures;
      MESSAGE(exported.status().message());
    }
    ++rounds;
  }
  stop = true;
  evictor.join();
  CHECK(rounds > 1);
  CHECK(bad == 0);
  CHECK(export_failures == 0);
}

// ---------------------------------------------------------------------------------------------
// Item 8: an empty MOEJIT_CACHE_DIR is an error, not the user's real store.

TEST_CASE("MOEJIT_CACHE_DIR or MOEJIT_LOCK_DIR set but empty is an error") {
  for (const char* name : {"MOEJIT_CACHE_DIR", "MOEJIT_LOCK_DIR"}) {
    CAPTURE(name);
    const char* old = std::getenv(name);
    std::string saved = old ? old : "";
    ::setenv(name, "", 1);
    auto o = store::StoreOptions::from_environment();
    if (old) ::setenv(name, saved.c_str(), 1);
    else ::unsetenv(name);
    REQUIRE_FALSE(o.ok());
    CHECK(o.status().message().find(std::string(name) + " is set but empty") != std::string::npos);
  }
  TempDir dir;
  ProcessResult clear = run_process({MOEJIT_CLI, "--json", "cache", "clear"},
                                    {{"MOEJIT_CACHE_DIR", ""}, {"HOME", dir.path()}});
  CHECK(clear.exit_code == 1);
  CHECK(clear.out.find("MOEJIT_CACHE_DIR is set but empty") != std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Item 9: leftovers, links, bounds and kinds.

TEST_CASE("a hit through a linked entry is refused and does not stamp the link's target") {
  TempDir dir;
  store::StoreOptions o = store_options_in(dir);
  store::Store s(o);
  store::Entry e = random_entry();
  std::string target = dir / "target.mjk";
  write_text(target, store::encode_entry(e));
  struct timespec old_times[2] = {{1000000, 0}, {1000000, 0}};
  REQUIRE(::utimensat(AT_FDCWD, target.c_str(), old_times, 0) == 0);
  fs::create_symlink(target, s.entry_path(o.dir, e.key));
  CHECK_FALSE(s.load(e.key, e.key_material).has_value());
  struct stat st {};
  REQUIRE(::stat(target.c_str(), &st) == 0);
  CHECK(st.st_mtim.tv_sec == 1000000);
  CHECK(fs::exists(target));  // moved aside is the link, not its target
}

TEST_CASE("temporaries of dead publishers count toward the bound and go once their process is gone") {
  TempDir dir;
  store::StoreOptions o = store_options_in(dir);
  store::Store s(o);
  // A pid that is certainly dead: a child we reaped.
  pid_t child = ::fork();
  if (child == 0) _exit(0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  std::string dead = o.dir + fmt::format("/entries/.{}.mjk.{}.0.abcd.tmp", random_text(32), child);
  std::string dead_recent = o.dir + fmt::format("/entries/.{}.mjk.{}.1.abcd.tmp", random_text(32), child);
  std::string live = o.dir + fmt::format("/entries/.{}.mjk.{}.2.abcd.tmp", random_text(32), ::getpid());
  for (const auto& p : {dead, dead_recent, live}) write_text(p, random_text(1000));
  const std::int64_t two_minutes_ago = std::time(nullptr) - 120;
  for (const auto& p : {dead, live}) {
    struct timespec t[2] = {{two_minutes_ago, 0}, {two_minutes_ago, 0}};
    REQUIRE(::utimensat(AT_FDCWD, p.c_str(), t, 0) == 0);
  }
  auto r = s.prune(UINT64_MAX);
  CHECK(r.removed_other == 1);
  CHECK_FALSE(fs::exists(dead));
  CHECK(fs::exists(dead_recent));  // within the grace time: maybe another pid namespace's
  CHECK(fs::exists(live));
  CHECK(r.bytes_before == 2000);  // the two temporaries left count toward the bound
}

TEST_CASE("per-process temporaries of dead processes are removed, others kept") {
  TempDir dir;
  pid_t child = ::fork();
  if (child == 0) _exit(0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);
  fs::create_directories(dir / fmt::format("moejit-host-{}-abc/templates", child));
  write_text(dir / fmt::format("moejit-host-{}-kernel-xyz.so", child), "elf");
  fs::create_directories(dir / fmt::format("moejit-host-{}-def", ::getpid()));
  fs::create_directories(dir / "moejit-host-notapid");
  fs::create_directories(dir / "keep");
  fs::create_directory_symlink(dir / "keep", dir / fmt::format("moejit-host-{}-link", child));
  CHECK(remove_dead_process_temporaries(dir.path(), "moejit-host-") == 2);
  CHECK(fs::exists(dir / fmt::format("moejit-host-{}-def", ::getpid())));
  CHECK(fs::exists(dir / "moejit-host-notapid"));
  CHECK(fs::exists(dir / "keep"));
  if (!can_act_as_other_user()) return;
  fs::create_directories(dir / fmt::format("moejit-host-{}-theirs", child));
  give_to_other_user(dir / fmt::format("moejit-host-{}-theirs", child));
  CHECK(remove_dead_process_temporaries(dir.path(), "moejit-host-") == 0);
}

TEST_CASE("an entry whose payload kind does not match its backend is refused, in a bundle too") {
  store::Entry host_as_cubin = random_entry(512, "spec.backend=host\n");
  host_as_cubin.meta.kind = store::PayloadKind::cubin;
  auto d = store::decode_entry(store::encode_entry(host_as_cubin));
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().message().find("does not match backend 'host'") != std::string::npos);
  store::Entry device_ok = random_entry(512, "spec.backend=device\n");
  CHECK(store::decode_entry(store::encode_entry(device_ok)).ok());
  store::Entry device_as_so = device_ok;
  device_as_so.meta.kind = store::PayloadKind::host_shared_object;
  CHECK_FALSE(store::decode_entry(store::encode_entry(device_as_so)).ok());
}

TEST_CASE("a bundle holding one key twice is refused and adds nothing") {
  TempDir dir;
  store::Entry e = random_entry(), f = random_entry();
  std::string one = store::encode_entry(e), two = store::encode_entry(f);
  std::string bundle = "MOEJITBN";
  auto put32 = [&](std::uint32_t v) { bundle.append(reinterpret_cast<const char*>(&v), 4); };
  auto put64 = [&](std::uint64_t v) { bundle.append(reinterpret_cast<const char*>(&v), 8); };
  put32(1);
  put32(3);
  for (const std::string* entry : {&one, &two, &one}) {
    put64(entry->size());
    bundle += *entry;
  }
  put64(xxh3_64(bundle.data(), bundle.size()));
  write_text(dir / "dup.mjb", bundle);
  store::Store s(store_options_in(dir));
  auto r = store::import_bundle(s, dir / "dup.mjb");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("entry 2 repeats key " + e.key.hex()) != std::string::npos);
  CHECK(s.list().empty());
}
