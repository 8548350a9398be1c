// The host compiler (src/compile/host_compiler.cpp): identity, key flags, diagnostics and
// scratch-directory cleanup.

#include <doctest/doctest.h>

#include <filesystem>

#include "host_test_support.hpp"

using namespace moejit;
using namespace moejit::test;

TEST_CASE("host compiler identity and key flags name no path on disk") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  const std::string& id = compiler->identity();
  CHECK(id.find("; ") != std::string::npos);
  CHECK(id.find('\n') == std::string::npos);
  std::string flags = compiler->key_flags(host_test_spec());
  CHECK(flags.find("-std=c++20 -O2 -fPIC -shared -ffp-contract=off -fno-fast-math") == 0);
  CHECK(flags.find("-Itemplates") != std::string::npos);
  CHECK(flags.find('/') == std::string::npos);
#if MOEJIT_SANITIZE_ADDRESS
  CHECK(flags.find("-fsanitize=address") != std::string::npos);
#else
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
