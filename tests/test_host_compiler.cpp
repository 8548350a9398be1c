// The host compiler (src/compile/host_compiler.cpp): identity, key flags, diagnostics,
// scratch-directory cleanup, how the program is found and how long it may run; and the loading
// of what it builds (src/host/host_module.cpp).

#include <doctest/doctest.h>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "host/host_module.hpp"
#include "host_test_support.hpp"
#include "support/hash.hpp"
#include "support/subprocess.hpp"

using namespace moejit;
using namespace moejit::test;

TEST_CASE("host compiler identity and key flags name no path on disk") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  const std::string& id = compiler->identity();
  CHECK(id.find("; ") != std::string::npos);
  CHECK(id.find('\n') == std::string::npos);
  std::string flags = compiler->key_flags(host_test_spec());
  CHECK(flags.find("-Itemplates") != std::string::npos);
  CHECK(flags.find('/') == std::string::npos);
  // The sanitizer (test) build's kernels compile at -O1, a shipped library's at -O2.
#if MOEJIT_SANITIZE_ADDRESS
  CHECK(flags.find("-std=c++20 -O1 -fPIC -shared -ffp-contract=off -fno-fast-math") == 0);
  CHECK(flags.find("-fsanitize=address") != std::string::npos);
#else
  CHECK(flags.find("-std=c++20 -O2 -fPIC -shared -ffp-contract=off -fno-fast-math") == 0);
  CHECK(flags.find("-fsanitize") == std::string::npos);
#endif
}

TEST_CASE("a missing host compiler is an error naming MOEJIT_HOST_CXX") {
  auto c = HostCompiler::create({.cxx = "moejit-no-such-compiler"});
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == Code::unavailable);
  CHECK(contains(c.status().message(), "MOEJIT_HOST_CXX"));
  CHECK(contains(c.status().message(), "moejit-no-such-compiler"));
}

TEST_CASE("the generated host unit has the entry points and the device unit does not") {
  KernelSpec device = align_spec(64, 16, 2);
  KernelSpec host = device;
  host.backend = Backend::host;
  auto d = codegen::generate_kernel(device, *codegen::TemplateSet::embedded());
  auto h = codegen::generate_kernel(host, *codegen::TemplateSet::embedded());
  REQUIRE(d.ok());
  REQUIRE(h.ok());
  CHECK(d->source.find("moejit_host") == std::string::npos);
  CHECK(contains(h->source, "const moejit::host::Runtime* moejit_host_runtime = nullptr;"));
  CHECK(
      contains(h->source,
               "void moejit_host_kernel(const void* params) {\n  moejit::kernels::moe_align_kernel"
               "<moejit_generated::Spec>(*static_cast<const moejit::MoeAlignParams*>(params));"));
}

TEST_CASE(
    "a host compile error returns the compiler output and the dumped source and leaves no scratch "
    "files") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  TempDir tmp, dump;
  ScopedEnv tmpdir("TMPDIR", tmp.path());
  ScopedEnv dumpdir("MOEJIT_DUMP_DIR", dump.path());
  auto files = codegen::TemplateSet::embedded()->files();
  files["moe/align.cuh"] += "\nthis_is_not_cxx_code;\n";
  codegen::TemplateSet broken(files);
  KernelSpec spec = host_test_spec();
  auto g = codegen::generate_kernel(spec, broken);
  REQUIRE(g.ok());
  auto c = compiler->compile(*g, broken, spec);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == Code::compile_error);
  const std::string& msg = c.status().message();
  CHECK(contains(msg, "this_is_not_cxx_code"));
  auto at = msg.find("source: ");
  REQUIRE(at != std::string::npos);
  std::string path = msg.substr(at + 8);
  CHECK(path.starts_with(dump.path()));
  CHECK(slurp(path) == g->source);

  auto good = codegen::generate_kernel(spec, *codegen::TemplateSet::embedded());
  REQUIRE(good.ok());
  auto ok = compiler->compile(*good, *codegen::TemplateSet::embedded(), spec);
  REQUIRE_MESSAGE(ok.ok(), ok.status().message());
  CHECK(ok->lowered_name == "moejit_host_kernel");
  CHECK(ok->report.registers == 0);
  CHECK(ok->compile_ms > 0);
  // Both compiles left nothing in the temporary directory.
  CHECK(std::filesystem::is_empty(tmp.path()));
}

TEST_CASE("host binaries do not depend on where they were compiled") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  KernelSpec spec = host_test_spec();
  auto g = codegen::generate_kernel(spec, *codegen::TemplateSet::embedded());
  REQUIRE(g.ok());
  auto a = compiler->compile(*g, *codegen::TemplateSet::embedded(), spec);
  auto b = compiler->compile(*g, *codegen::TemplateSet::embedded(), spec);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->binary == b->binary);
}

namespace {

// Runs the test from `dir`, and goes back where it was when done.
class ScopedCwd {
 public:
  explicit ScopedCwd(const std::string& dir) : old_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  ~ScopedCwd() {
    std::error_code ec;
    std::filesystem::current_path(old_, ec);
  }

 private:
  std::filesystem::path old_;
};

}  // namespace

TEST_CASE("a host compiler named by a relative path is the one in the caller's directory") {
  // Compiles run in a scratch directory; the name must mean there what it meant to the caller.
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  CHECK(compiler->program().starts_with("/"));
  TempDir dir;
  std::filesystem::create_directories(dir / "bin");
  std::filesystem::create_symlink(compiler->program(), dir / "bin/c++");
  std::unique_ptr<HostCompiler> relative;
  {
    ScopedCwd cwd(dir.path());
    auto c = HostCompiler::create({.cxx = "bin/c++"});
    REQUIRE_MESSAGE(c.ok(), c.status().message());
    relative = std::move(c).value();
  }
  CHECK(relative->program() == dir / "bin/c++");
  KernelSpec spec = host_test_spec();
  auto g = codegen::generate_kernel(spec, *codegen::TemplateSet::embedded());
  REQUIRE(g.ok());
  auto built = relative->compile(*g, *codegen::TemplateSet::embedded(), spec);
  CHECK_MESSAGE(built.ok(), built.status().message());

  auto missing = HostCompiler::create({.cxx = "bin/c++"});  // not from here
  REQUIRE_FALSE(missing.ok());
  CHECK(contains(missing.status().message(), "not an executable file"));
}

TEST_CASE("a host compile past MOEJIT_HOST_COMPILE_TIMEOUT_MS is killed and reported") {
  TempDir dir, tmp;
  ScopedEnv tmpdir("TMPDIR", tmp.path());
  // Answers the probes like a compiler, then hangs on the compile.
  const std::string fake = dir / "hanging-c++";
  write_text(fake,
             "#!/bin/sh\ncase \"$1\" in\n  --version) echo 'fake c++ 1.0';;\n"
             "  -dumpmachine) echo x86_64-linux-gnu;;\n  *) sleep 30;;\nesac\n");
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  {
    ScopedEnv cxx("MOEJIT_HOST_CXX", fake);
    ScopedEnv timeout("MOEJIT_HOST_COMPILE_TIMEOUT_MS", "400");
    auto options = HostCompiler::options_from_environment();
    REQUIRE(options.ok());
    CHECK(options->timeout == std::chrono::milliseconds(400));
    auto c = HostCompiler::create(*options);
    REQUIRE_MESSAGE(c.ok(), c.status().message());
    KernelSpec spec = host_test_spec();
    auto g = codegen::generate_kernel(spec, *codegen::TemplateSet::embedded());
    REQUIRE(g.ok());
    const auto start = std::chrono::steady_clock::now();
    auto built = (*c)->compile(*g, *codegen::TemplateSet::embedded(), spec);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    REQUIRE_FALSE(built.ok());
    CHECK(built.status().code() == Code::unavailable);
    CHECK(contains(built.status().message(), "MOEJIT_HOST_COMPILE_TIMEOUT_MS = 400"));
    CHECK(contains(built.status().message(), "did not finish within 400 ms"));
  }
  CHECK(std::filesystem::is_empty(tmp.path()));  // the scratch directory went with the compile

  for (const char* bad : {"0", "86400001", "soon"}) {
    ScopedEnv timeout("MOEJIT_HOST_COMPILE_TIMEOUT_MS", bad);
    auto options = HostCompiler::options_from_environment();
    REQUIRE_FALSE(options.ok());
    CHECK(options.status().code() == Code::invalid_argument);
    CHECK(contains(options.status().message(), "MOEJIT_HOST_COMPILE_TIMEOUT_MS"));
  }
}

TEST_CASE("a host compiler that dies or lacks part of its toolchain is unavailable, not the spec's compile error") {
  // GCC's driver when the OOM killer takes cc1plus, Clang's when it takes the frontend, and a
  // driver killed itself: the next call must compile again, so none may read as compile_error
  // (which the resolver remembers per spec). A real rejection stays compile_error.
  TempDir dir, tmp, dumps;
  ScopedEnv tmpdir("TMPDIR", tmp.path());
  ScopedEnv dump_dir("MOEJIT_DUMP_DIR", dumps.path());
  struct Case {
    std::string what, on_compile;
    Code expected;
  };
  const std::vector<Case> cases = {
      {"gcc, cc1plus killed", "echo 'c++: fatal error: Killed signal terminated program cc1plus' >&2; exit 1",
       Code::unavailable},
      {"clang, frontend killed",
       "echo 'clang++: error: unable to execute command: Killed' >&2; "
       "echo 'clang++: error: clang frontend command failed due to signal (use -v to see invocation)' >&2; exit 1",
       Code::unavailable},
      {"driver killed", "kill -9 $$", Code::unavailable},
      // A toolchain with a part missing: no source compiles, so none is the spec's error.
      {"gcc, cc1plus missing",
       "echo \"c++: fatal error: cannot execute 'cc1plus': execvp: No such file or directory\" >&2; exit 1",
       Code::unavailable},
      {"gcc, assembler missing (UTF-8 quotes)",
       "printf 'c++: fatal error: cannot execute \\342\\200\\230as\\342\\200\\231: execvp: No such file\\n' >&2; exit 1",
       Code::unavailable},
      {"collect2, linker missing", "echo \"collect2: fatal error: cannot find 'ld'\" >&2; exit 1",
       Code::unavailable},
      {"source rejected", "echo \"unit.cu:1:1: error: 'x' was not declared in this scope\" >&2; exit 1",
       Code::compile_error},
  };
  int n = 0;
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const std::string fake = dir / fmt::format("dying-c++-{}", n++);
    write_text(fake, "#!/bin/sh\ncase \"$1\" in\n  --version) echo 'fake c++ 1.0';;\n"
                     "  -dumpmachine) echo x86_64-linux-gnu;;\n  *) " + c.on_compile + ";;\nesac\n");
    std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
    ScopedEnv cxx("MOEJIT_HOST_CXX", fake);
    auto options = HostCompiler::options_from_environment();
    REQUIRE(options.ok());
    auto compiler = HostCompiler::create(*options);
    REQUIRE_MESSAGE(compiler.ok(), compiler.status().message());
    KernelSpec spec = host_test_spec();
    auto g = codegen::generate_kernel(spec, *codegen::TemplateSet::embedded());
    REQUIRE(g.ok());
    auto built = (*compiler)->compile(*g, *codegen::TemplateSet::embedded(), spec);
    REQUIRE_FALSE(built.ok());
    CAPTURE(built.status().message());
    CHECK(built.status().code() == c.expected);
    CHECK(contains(built.status().message(), fake));
    // Sources are dumped for a rejection, which someone will read, not for a death.
    CHECK(std::filesystem::is_empty(dumps.path()) == (c.expected == Code::unavailable));
  }
  CHECK(std::filesystem::is_empty(tmp.path()));
}

TEST_CASE("a host shared object refused at load keeps its error, and a later kernel still loads") {
  // glibc finds an already loaded object by its path: were the refused object's descriptor
  // closed, the next kernel's memfd would reuse the number, and "/proc/self/fd/N" would open the
  // refused object again in its place.
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  TempDir dir;
  write_text(dir / "plain.cpp", "extern \"C\" int moejit_test_plain_object() { return 7; }\n");
  auto built = run_captured({compiler->program(), "-shared", "-fPIC", "-o", "plain.so",
                             "plain.cpp"},
                            dir.path());
  REQUIRE(built.ok());
  REQUIRE_MESSAGE(built->exit_code == 0, built->output);
  ResolvedKernel plain;
  plain.spec = host_test_spec();
  plain.key = xxh3_128(std::string("plain"));
  plain.meta.kind = store::PayloadKind::host_shared_object;
  plain.meta.kernel_name = HostCompiler::kEntrySymbol;
  plain.binary = slurp(dir / "plain.so");

  KernelSpec spec = host_test_spec();
  auto g = codegen::generate_kernel(spec, *codegen::TemplateSet::embedded());
  REQUIRE(g.ok());
  auto compiled = compiler->compile(*g, *codegen::TemplateSet::embedded(), spec);
  REQUIRE_MESSAGE(compiled.ok(), compiled.status().message());
  ResolvedKernel good;
  good.spec = spec;
  good.key = xxh3_128(g->source);
  good.meta.kind = store::PayloadKind::host_shared_object;
  good.meta.kernel_name = compiled->lowered_name;
  good.binary = compiled->binary;

  auto refused = host::load_host_module(plain);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().code() == Code::corrupt);
  CHECK(contains(refused.status().message(), "lacks moejit_host_kernel"));
  auto count_fds = [] {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
    return n;
  };
  const std::size_t fds = count_fds();
  auto again = host::load_host_module(plain);
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().message() == refused.status().message());
  CHECK(count_fds() == fds);  // not loaded a second time

  auto loaded = host::load_host_module(good);
  REQUIRE_MESSAGE(loaded.ok(), loaded.status().message());
  CHECK(static_cast<bool>((*loaded)->entry));
}

TEST_CASE("host compiles refuse a TMPDIR that other users could write") {
  // Another user could rename the compile directory away and put their own sources in its
  // place; what the compiler builds from them would run in this process.
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  TempDir dir;
  const std::string shared = dir / "shared";
  std::filesystem::create_directory(shared);
  std::filesystem::permissions(shared, std::filesystem::perms::all);  // 0777, not sticky
  ScopedEnv tmpdir("TMPDIR", shared);
  KernelSpec spec = host_test_spec();
  auto g = codegen::generate_kernel(spec, *codegen::TemplateSet::embedded());
  REQUIRE(g.ok());
  auto c = compiler->compile(*g, *codegen::TemplateSet::embedded(), spec);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == Code::unavailable);
  CHECK(contains(c.status().message(), "(TMPDIR)"));
  CHECK(contains(c.status().message(), shared));
  CHECK(std::filesystem::is_empty(shared));
}
