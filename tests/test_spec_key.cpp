// KernelSpec and key (DESIGN §3): every field, the template closure, the compiler identity and
// the flags reach the key; paths on disk do not.

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <set>

#include "codegen/template_set.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "compile/nvrtc_library.hpp"
#include "spec/key.hpp"
#include "spec/spec_fields.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;
namespace fs = std::filesystem;

namespace {

// A spec with every field set to a random legal-for-its-width, non-zero value.
KernelSpec random_full_spec(std::mt19937& rng) {
  KernelSpec s{};
  for (const auto& f : spec_fields()) {
    std::uint32_t hi = f.is_enum() ? static_cast<std::uint32_t>(f.value_names.size() - 1) : f.max_value;
    f.set(s, std::uniform_int_distribution<std::uint32_t>(1, hi)(rng));
  }
  return s;
}

const KeyContext kContext{"0123456789abcdef0123456789abcdef", "nvrtc 13.0 V13.0.88 CL-1",
                          "-std=c++17 -arch=sm_90a"};

}  // namespace

TEST_CASE("every KernelSpec field changes the key") {
  std::mt19937 rng(std::random_device{}());
  KernelSpec base = random_full_spec(rng);
  const Hash128 base_key = make_kernel_key(base, kContext).hash;
  std::set<std::string> seen{base_key.hex()};
  for (const auto& f : spec_fields()) {
    CAPTURE(f.name);
    KernelSpec changed = base;
    std::uint32_t v = f.get(base);
    std::uint32_t hi = f.is_enum() ? static_cast<std::uint32_t>(f.value_names.size() - 1) : f.max_value;
    f.set(changed, v == hi ? v - 1 : v + 1);
    CHECK_FALSE(changed == base);
    Hash128 k = make_kernel_key(changed, kContext).hash;
    CHECK(k != base_key);
    CHECK(seen.insert(k.hex()).second);
    // Also the value 0 (unset) differs from any set value.
    KernelSpec zero = base;
    f.set(zero, 0);
    CHECK(make_kernel_key(zero, kContext).hash != base_key);
  }
  // The table covers the whole struct: setting every field through it reproduces the bytes.
  KernelSpec rebuilt{};
  for (const auto& f : spec_fields()) f.set(rebuilt, f.get(base));
  CHECK(rebuilt == base);
}

TEST_CASE("every byte of KernelSpec is reachable from the field table") {
  // Flip one bit in each byte of the POD; some field must see the change, or the key could
  // miss a field that the in-memory table distinguishes.
  std::mt19937 rng(std::random_device{}());
  KernelSpec base = random_full_spec(rng);
  for (std::size_t byte = 0; byte < sizeof(KernelSpec); ++byte) {
    CAPTURE(byte);
    KernelSpec flipped = base;
    reinterpret_cast<unsigned char*>(&flipped)[byte] ^= 0x01;
    bool differs = false;
    for (const auto& f : spec_fields()) differs |= f.get(flipped) != f.get(base);
    CHECK(differs);
  }
}

TEST_CASE("template hash and compiler identity and flags and schema are all in the key") {
  KernelSpec s = align_spec();
  const Hash128 base = make_kernel_key(s, kContext).hash;
  KeyContext other_template = kContext;
  other_template.template_hash = "ffffffffffffffffffffffffffffffff";
  KeyContext other_compiler = kContext;
  other_compiler.compiler = "nvrtc 12.9 V12.9.86 CL-1";
  KeyContext other_build = kContext;
  other_build.compiler = "nvrtc 13.0 V13.0.88 CL-2";
  KeyContext other_flags = kContext;
  other_flags.flags = "-std=c++17 -arch=sm_90a -lineinfo";
  CHECK(make_kernel_key(s, other_template).hash != base);
  CHECK(make_kernel_key(s, other_compiler).hash != base);
  CHECK(make_kernel_key(s, other_build).hash != base);
  CHECK(make_kernel_key(s, other_flags).hash != base);
  CHECK(make_kernel_key(s, kContext).material.starts_with(
      "moejit-key-schema=" + std::to_string(kKeySchemaVersion) + "\n"));
}

TEST_CASE("the resolver's key names the NVRTC version and build in use") {
  if (!nvrtc_or_skip()) return;
  auto nvrtc = NvrtcLibrary::get();
  TempDir dir;
  auto resolver = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(resolver.ok());
  auto key = (*resolver)->key_of(align_spec());
  REQUIRE(key.ok());
  std::string expected = "compiler=nvrtc " + std::to_string((*nvrtc)->major()) + "." +
                         std::to_string((*nvrtc)->minor()) + " ";
  CHECK(key->material.find(expected) != std::string::npos);
  CHECK(key->material.find("compiler=" + (*nvrtc)->identity() + "\n") != std::string::npos);
}

TEST_CASE("templates from two different checkout paths give the embedded closure hash") {
  TempDir a, b;
  auto embedded = codegen::TemplateSet::embedded();
  for (const auto* root : {&a, &b}) {
    for (const auto& [path, content] : embedded->files()) {
      fs::path target = fs::path(root->path()) / "templates" / path;
      fs::create_directories(target.parent_path());
      write_text(target.string(), content);
    }
  }
  auto set_a = codegen::TemplateSet::from_directory(a / "templates");
  auto set_b = codegen::TemplateSet::from_directory(b / "templates");
  REQUIRE(set_a.ok());
  REQUIRE(set_b.ok());
  auto ha = (*set_a)->closure_hash("moe/align.cuh");
  auto hb = (*set_b)->closure_hash("moe/align.cuh");
  auto he = embedded->closure_hash("moe/align.cuh");
  REQUIRE(ha.ok());
  REQUIRE(hb.ok());
  REQUIRE(he.ok());
  CHECK(*ha == *hb);
  CHECK(*ha == *he);
}

TEST_CASE("changing one byte of an included header changes the key") {
  TempDir dir;
  auto embedded = codegen::TemplateSet::embedded();
  auto closure = embedded->include_closure("moe/align.cuh");
  REQUIRE(closure.ok());
  REQUIRE(closure->size() > 1);
  std::mt19937 rng(std::random_device{}());
  for (const auto& header : *closure) {
    if (header == "moe/align.cuh") continue;
    CAPTURE(header);
    auto files = embedded->files();
    std::string& content = files.at(header);
    // Any byte but a line break or one of an #include line (a changed include may name no
    // header at all).
    auto in_include_line = [&](std::size_t i) {
      const std::size_t start = i == 0 ? 0 : (content.rfind('\n', i - 1) == std::string::npos ? 0 : content.rfind('\n', i - 1) + 1);
      return content.compare(start, 8, "#include") == 0;
    };
    std::size_t at = 0;
    do {
      at = std::uniform_int_distribution<std::size_t>(0, content.size() - 1)(rng);
    } while (content[at] == '\n' || in_include_line(at));
    content[at] = static_cast<char>(content[at] ^ 0x20);
    codegen::TemplateSet changed(files);
    auto h = changed.closure_hash("moe/align.cuh");
    REQUIRE(h.ok());
    CHECK(*h != *embedded->closure_hash("moe/align.cuh"));
    KeyContext a = kContext, b = kContext;
    std::string ha = embedded->closure_hash("moe/align.cuh")->hex(), hb = h->hex();
    a.template_hash = ha;
    b.template_hash = hb;
    CHECK(make_kernel_key(align_spec(), a).hash != make_kernel_key(align_spec(), b).hash);
  }
}

TEST_CASE("a header outside the closure does not change the key") {
  auto embedded = codegen::TemplateSet::embedded();
  auto files = embedded->files();
  files["unrelated/extra.cuh"] = "#pragma once\n// not included by anything\n";
  codegen::TemplateSet extended(files);
  CHECK(*extended.closure_hash("moe/align.cuh") == *embedded->closure_hash("moe/align.cuh"));
}

TEST_CASE("KernelSpecHash and equality agree with the bytes") {
  KernelSpec a = align_spec(64, 16, 4), b = align_spec(64, 16, 4), c = align_spec(64, 32, 4);
  CHECK(a == b);
  CHECK(KernelSpecHash{}(a) == KernelSpecHash{}(b));
  CHECK_FALSE(a == c);
  CHECK(KernelSpecHash{}(a) != KernelSpecHash{}(c));
}

TEST_CASE("NVRTC keys with exactly the options that change the CUBIN") {
  if (!nvrtc_or_skip()) return;
  KernelSpec s = align_spec();
  s.arch = Arch::sm_120a;
  for (bool lineinfo : {false, true}) {
    CAPTURE(lineinfo);
    NvrtcOptions o;
    o.lineinfo = lineinfo;
    o.use_pch = true;
    auto compiler = NvrtcCompiler::create(o);
    REQUIRE_MESSAGE(compiler.ok(), compiler.status().message());
    const NvrtcCommandLine command = (*compiler)->command_line(s);
    const std::string flags = (*compiler)->key_flags(s);
    // Each option that changes the binary is in the key, in the order compiled.
    std::string joined;
    for (const auto& option : command.binary) joined += (joined.empty() ? "" : " ") + option;
    CHECK(flags == joined);
    CHECK(flags.find("-arch=sm_120a") != std::string::npos);
    CHECK((flags.find("-lineinfo") != std::string::npos) == lineinfo);
    // The report and PCH options change nothing in the CUBIN and stay out of it, so turning PCH
    // on or off keeps every key.
    CHECK(std::count(command.other.begin(), command.other.end(), "-Xptxas=-v") == 1);
    CHECK(flags.find("-Xptxas") == std::string::npos);
    CHECK(flags.find("-pch") == std::string::npos);
  }
}
