// Templates, code generation and the NVRTC compiler.

#include <doctest/doctest.h>

#include <filesystem>

#include "codegen/generate.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "compile/ptxas_report.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

// NVRTC compiler, or null (after toolchain_missing: a skip, or a failure where the toolchain is
// required) when NVRTC is missing.
std::unique_ptr<NvrtcCompiler> nvrtc_compiler_or_skip() {
  auto c = NvrtcCompiler::create({});
  if (!c.ok()) {
    toolchain_missing("NVRTC is not available here: " + c.status().message());
    return nullptr;
  }
  return std::move(c).value();
}

}  // namespace

TEST_CASE("quoted includes are found and other lines ignored") {
  auto inc = codegen::quoted_includes(
      "#pragma once\n#include \"a/b.cuh\"\n  #  include   \"c.cuh\" // x\n#include <cstdint>\n"
      "int x; // #include \"not.cuh\"\n#define include \"no\"\n");
  REQUIRE(inc.size() == 2);
  CHECK(inc[0] == "a/b.cuh");
  CHECK(inc[1] == "c.cuh");
}

TEST_CASE("the align template's include closure") {
  auto closure = codegen::TemplateSet::embedded()->include_closure("moe/align.cuh");
  REQUIRE(closure.ok());
  for (const char* expected : {"moe/align.cuh", "moe/align_params.cuh", "common/types.cuh",
                               "common/platform.cuh", "common/warp.cuh", "common/sync.cuh",
                               "common/atomic.cuh"}) {
    CAPTURE(expected);
    CHECK(std::find(closure->begin(), closure->end(), expected) != closure->end());
  }
}

TEST_CASE("an include that is not a template is an error naming both files") {
  codegen::TemplateSet set(std::map<std::string, std::string>{{"moe/x.cuh", "#include \"common/missing.cuh\"\n"}});
  auto closure = set.include_closure("moe/x.cuh");
  REQUIRE_FALSE(closure.ok());
  CHECK(closure.status().message().find("moe/x.cuh") != std::string::npos);
  CHECK(closure.status().message().find("common/missing.cuh") != std::string::npos);
}

TEST_CASE("generated translation unit has includes first then Spec then the explicit instantiation") {
  auto g = codegen::generate_kernel(align_spec(256, 32, 8), *codegen::TemplateSet::embedded());
  REQUIRE(g.ok());
  const std::string& src = g->source;
  auto include_at = src.find("#include \"moe/align.cuh\"");
  auto spec_at = src.find("struct Spec {");
  auto inst_at = src.find("template MOEJIT_GLOBAL void moejit::kernels::moe_align_kernel<"
                          "moejit_generated::Spec>(moejit::MoeAlignParams);");
  REQUIRE(include_at != std::string::npos);
  REQUIRE(spec_at != std::string::npos);
  REQUIRE(inst_at != std::string::npos);
  CHECK(include_at < spec_at);
  CHECK(spec_at < inst_at);
  CHECK(src.find("static constexpr int experts = 256;") != std::string::npos);
  CHECK(src.find("static constexpr int block_size = 32;") != std::string::npos);
  CHECK(src.find("static constexpr int warps = 8;") != std::string::npos);
  CHECK(g->block_threads == 256);
  CHECK(g->dynamic_shared_bytes == (8 * 256 + 256 + 1) * 4);
  CHECK(g->name_expression == "moejit::kernels::moe_align_kernel<moejit_generated::Spec>");
}

TEST_CASE("ptxas report parsing") {
  const char* log =
      "ptxas info    : 4 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z5otherv' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z5otherv\n"
      "ptxas         .     8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 0 barriers\n"
      "ptxas info    : Compiling entry function '_Z1kv' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z1kv\n"
      "ptxas         .     16 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 2 barriers, 1024 bytes smem, 400 bytes cmem[0]\n";
  auto r = parse_ptxas_report(log, "_Z1kv");
  REQUIRE(r.ok());
  CHECK(r->registers == 40);
  CHECK(r->barriers == 2);
  CHECK(r->static_shared_bytes == 1024);
  CHECK(r->stack_bytes == 16);
  CHECK(r->spill_store_bytes == 4);
  CHECK(r->spill_load_bytes == 12);
  CHECK_FALSE(r->wgmma_serialized);
  CHECK_FALSE(parse_ptxas_report(log, "_Z7missingv").ok());
}

TEST_CASE("ptxas report parsing: wgmma's serialized, as ptxas 13.0 says it, for the named kernel only") {
  const char* log =
      "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are serialized due to "
      "insufficient register resources for the wgmma pipeline in the function '_Z1kv'\n"
      "ptxas info    : 577 bytes gmem\n"
      "ptxas info    : Compiling entry function '_Z1kv' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z1kv\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 117 registers, used 1 barriers\n"
      "ptxas info    : Compiling entry function '_Z1kvv' for 'sm_90a'\n"
      "ptxas info    : Function properties for _Z1kvv\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 90 registers, used 1 barriers\n";
  auto r = parse_ptxas_report(log, "_Z1kv");
  REQUIRE(r.ok());
  CHECK(r->wgmma_serialized);
  CHECK(r->wgmma_serialization == "C7511: insufficient register resources for the wgmma pipeline");
  CHECK(r->registers == 117);
  auto other = parse_ptxas_report(log, "_Z1kvv");  // a name that has the first as its prefix
  REQUIRE(other.ok());
  CHECK_FALSE(other->wgmma_serialized);
  CHECK(other->wgmma_serialization.empty());
}

TEST_CASE("the align kernel compiles for every target arch with no spills") {
  auto compiler = nvrtc_compiler_or_skip();
  if (!compiler) return;
  auto templates = codegen::TemplateSet::embedded();
  for (Arch arch : default_target_archs()) {
    for (auto [experts, warps] : {std::pair{8u, 1}, std::pair{512u, 16}}) {
      KernelSpec spec = align_spec(experts, 64, static_cast<std::uint16_t>(warps), arch);
      CAPTURE(to_string(arch));
      CAPTURE(experts);
      auto g = codegen::generate_kernel(spec, *templates);
      REQUIRE(g.ok());
      auto c = compiler->compile(*g, *templates, spec);
      REQUIRE_MESSAGE(c.ok(), c.status().message());
      CHECK(c->binary.substr(0, 4) == "\x7f" "ELF");
      CHECK(c->lowered_name.find("moe_align_kernel") != std::string::npos);
      CHECK(c->report.registers > 0);
      CHECK(c->report.spill_store_bytes == 0);
      CHECK(c->report.spill_load_bytes == 0);
      CHECK(c->compile_ms > 0);
    }
  }
}

TEST_CASE("an arch this NVRTC cannot target is refused before compiling") {
  auto compiler = nvrtc_compiler_or_skip();
  if (!compiler) return;
  // Every arch moejit knows should be supported by NVRTC 13; report clearly if not.
  for (const auto& info : all_archs()) {
    KernelSpec spec = align_spec(8, 16, 1, info.arch);
    auto g = codegen::generate_kernel(spec, *codegen::TemplateSet::embedded());
    REQUIRE(g.ok());
    auto c = compiler->compile(*g, *codegen::TemplateSet::embedded(), spec);
    if (!c.ok()) {
      CHECK(c.status().code() == Code::unsupported);
      CHECK(c.status().message().find(std::string(info.name)) != std::string::npos);
    }
  }
}

TEST_CASE("a compile error returns the NVRTC log and the path of the dumped source") {
  auto compiler = nvrtc_compiler_or_skip();
  if (!compiler) return;
  TempDir dump;
  ::setenv("MOEJIT_DUMP_DIR", dump.path().c_str(), 1);
  auto files = codegen::TemplateSet::embedded()->files();
  files["moe/align.cuh"] += "\nthis_is_not_cuda_code;\n";
  codegen::TemplateSet broken(files);
  KernelSpec spec = align_spec();
  auto g = codegen::generate_kernel(spec, broken);
  REQUIRE(g.ok());
  auto c = compiler->compile(*g, broken, spec);
  ::unsetenv("MOEJIT_DUMP_DIR");
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().code() == Code::compile_error);
  const std::string& msg = c.status().message();
  CHECK(msg.find("this_is_not_cuda_code") != std::string::npos);  // the log quotes the line
  auto at = msg.find("source: ");
  REQUIRE(at != std::string::npos);
  std::string path = msg.substr(at + 8);
  CHECK(path.starts_with(dump.path()));
  CHECK(std::filesystem::exists(path));
  CHECK(slurp(path) == g->source);
  // The closure is dumped beside it, so the compile can be reproduced with `nvcc -I <dir>`.
  auto dir = std::filesystem::path(path).parent_path();
  CHECK(slurp((dir / "moe/align.cuh").string()) == files["moe/align.cuh"]);
  CHECK(std::filesystem::exists(dir / "common/types.cuh"));
}

TEST_CASE("precompiled headers never carry one template version into another") {
  // NVRTC matches automatic PCH files by the directives before the first declaration, not by
  // the bytes of in-memory headers; the generated closure-hash macro must keep them apart.
  auto created = NvrtcCompiler::create({.use_pch = true, .lineinfo = false});
  if (!created.ok()) {
    toolchain_missing("NVRTC is not available here: " + created.status().message());
    return;
  }
  auto& compiler = *created;
  REQUIRE(compiler->options().use_pch);
  auto embedded = codegen::TemplateSet::embedded();
  KernelSpec spec = align_spec(48, 16, 2);
  auto good = codegen::generate_kernel(spec, *embedded);
  REQUIRE(good.ok());
  REQUIRE(compiler->compile(*good, *embedded, spec).ok());  // creates the PCH
  auto files = embedded->files();
  files["common/types.cuh"] += "\nstatic_assert(sizeof(int) == 3, \"edited header seen\");\n";
  codegen::TemplateSet edited(files);
  auto g = codegen::generate_kernel(spec, edited);
  REQUIRE(g.ok());
  auto c = compiler->compile(*g, edited, spec);
  REQUIRE_FALSE(c.ok());
  CHECK(c.status().message().find("edited header seen") != std::string::npos);
}
