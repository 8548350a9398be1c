// Spec files and validation: every rejection names the field and what was expected.

#include <doctest/doctest.h>

#include "codegen/generate.hpp"
#include "spec/spec_json.hpp"
#include "spec/validate.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

void check_error(const Status& s, Code code, std::initializer_list<std::string_view> needles) {
  CHECK_FALSE(s.ok());
  CHECK(s.code() == code);
  for (auto n : needles) {
    CAPTURE(n);
    CHECK(s.message().find(n) != std::string::npos);
  }
}

}  // namespace

TEST_CASE("spec JSON round-trips") {
  KernelSpec s = align_spec(512, 64, 16, Arch::sm_121a);
  auto parsed = parse_spec_json(spec_to_json(s));
  REQUIRE(parsed.ok());
  CHECK(*parsed == s);
  CHECK(spec_to_json(s).find("\"arch\":\"sm_121a\"") != std::string::npos);
}

TEST_CASE("spec JSON errors name the key and the expectation") {
  check_error(parse_spec_json("{\"op\": \"moe_align\", \"expert\": 8}").status(),
              Code::invalid_argument, {"unknown field 'expert'", "experts"});
  check_error(parse_spec_json("{\"arch\": \"sm_99\"}").status(), Code::invalid_argument,
              {"'arch'", "sm_90a", "sm_121a"});
  check_error(parse_spec_json("{\"bm\": 70000}").status(), Code::invalid_argument,
              {"'bm'", "[0, 65535]"});
  check_error(parse_spec_json("{\"bm\": -1}").status(), Code::invalid_argument, {"'bm'"});
  check_error(parse_spec_json("{\"bm\": \"64\"}").status(), Code::invalid_argument, {"'bm'"});
  check_error(parse_spec_json("[1, 2]").status(), Code::invalid_argument, {"JSON object"});
  check_error(parse_spec_json("{\"op\": \"moe_al").status(), Code::invalid_argument,
              {"not valid JSON"});
}

TEST_CASE("a corrupt or missing spec file is an error naming the file") {
  TempDir dir;
  write_text(dir / "bad.json", "{\"op\": \"moe_align\", \x01\x02");
  check_error(load_spec_file(dir / "bad.json").status(), Code::invalid_argument,
              {"bad.json", "not valid JSON"});
  check_error(load_spec_file(dir / "missing.json").status(), Code::not_found, {"missing.json"});
}

TEST_CASE("validation of moe_align specs") {
  CHECK(validate_spec(align_spec()).ok());

  KernelSpec s = align_spec();
  s.arch = Arch::none;
  check_error(validate_spec(s), Code::invalid_argument, {"'arch'", "sm_80"});

  s = align_spec();
  s.backend = Backend::none;
  check_error(validate_spec(s), Code::invalid_argument, {"'backend'", "device or host"});

  s = align_spec();
  s.bm = 24;
  check_error(validate_spec(s), Code::invalid_argument, {"'bm' = 24", "power of two"});

  s = align_spec();
  s.experts = 0;
  check_error(validate_spec(s), Code::invalid_argument, {"'experts' = 0", "[1, 4096]"});

  s = align_spec();
  s.warps = 33;
  check_error(validate_spec(s), Code::invalid_argument, {"'warps' = 33", "[1, 32]"});

  s = align_spec();
  s.n = 4096;
  check_error(validate_spec(s), Code::invalid_argument, {"'n' = 4096", "does not use it"});

  s = align_spec();
  s.op = Op::none;
  check_error(validate_spec(s), Code::invalid_argument, {"'op'", "moe_align"});

  s = align_spec();
  reinterpret_cast<unsigned char*>(&s)[0] = 200;  // op outside the enum
  check_error(validate_spec(s), Code::invalid_argument, {"'op'", "unknown value 200"});
}

TEST_CASE("template constraints require shared memory to fit the target") {
  // 4096 experts x 16 warps needs 278 KB of shared memory: too much everywhere.
  auto g = codegen::generate_kernel(align_spec(4096, 64, 16, Arch::sm_90a),
                                    *codegen::TemplateSet::embedded());
  check_error(g.status(), Code::invalid_argument, {"'experts' = 4096", "'warps' = 16", "sm_90a"});
  // 1024 experts x 16 warps (69 KB) fits sm_90a (227 KB) and sm_86 (99 KB) ...
  CHECK(codegen::generate_kernel(align_spec(1024, 64, 16, Arch::sm_86),
                                 *codegen::TemplateSet::embedded()).ok());
  // ... but 1024 x 32 (135 KB) only the former.
  CHECK(codegen::generate_kernel(align_spec(1024, 64, 32, Arch::sm_90a),
                                 *codegen::TemplateSet::embedded()).ok());
  check_error(codegen::generate_kernel(align_spec(1024, 64, 32, Arch::sm_86),
                                       *codegen::TemplateSet::embedded()).status(),
              Code::invalid_argument, {"sm_86", "101376"});
}
