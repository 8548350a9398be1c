// Spec files and validation: every rejection names the field and what was expected.

#include <doctest/doctest.h>

#include "codegen/generate.hpp"
#include "spec/spec_json.hpp"
#include "kernels/grouped_gemm.hpp"
#include "kernels/kernel_def.hpp"
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

namespace {

KernelSpec gemm_spec() {
  KernelSpec s{};
  s.op = Op::grouped_gemm;
  s.arch = Arch::sm_90a;
  s.backend = Backend::device;
  s.weight = WeightFormat::int4_asym;
  s.scale = DType::bf16;
  s.act = DType::bf16;
  s.out = DType::bf16;
  s.layout = Layout::indexed;
  s.epilogue = Epilogue::none;
  s.group_size = 128;
  s.n = 4096;
  s.k = 7168;
  s.experts = 256;
  s.bm = 16;
  s.bn = 128;
  s.bk = 64;
  s.stages = 4;
  s.warps = 4;
  s.split_k = 1;
  return s;
}

}  // namespace

TEST_CASE("grouped GEMM specs: alignment, groups, formats and tiles are checked with named fields") {
  CHECK(validate_spec(gemm_spec()).ok());
  KernelSpec s = gemm_spec();
  s.n = 4100;
  check_error(validate_spec(s), Code::invalid_argument, {"'n' = 4100", "multiple of 32"});
  s = gemm_spec();
  s.k = 7000;
  check_error(validate_spec(s), Code::invalid_argument, {"'k' = 7000", "multiple of 32"});
  s = gemm_spec();
  s.k = 7200;  // a multiple of 32 that 128 does not divide
  check_error(validate_spec(s), Code::invalid_argument, {"'group_size' = 128", "does not divide k = 7200"});
  s = gemm_spec();
  s.group_size = 96;
  check_error(validate_spec(s), Code::invalid_argument, {"'group_size' = 96", "32, 64, 128, or k"});
  s = gemm_spec();
  s.weight = WeightFormat::mxfp4;
  check_error(validate_spec(s), Code::invalid_argument, {"'scale' = bf16", "e8m0"});
  s.scale = DType::e8m0;
  check_error(validate_spec(s), Code::invalid_argument, {"'group_size' = 128", "expected 32 for mxfp4"});
  s = gemm_spec();
  s.act = DType::e4m3;
  check_error(validate_spec(s), Code::invalid_argument, {"'act_scale' = none", "token or block128"});
  s.act_scale = ActScale::token;
  CHECK(validate_spec(s).ok());
  s.act_scale = ActScale::block128;
  CHECK(validate_spec(s).ok());  // k = 7168 = 56 blocks of 128
  s.k = 7200;
  s.bk = 32;
  check_error(validate_spec(s), Code::invalid_argument, {"'act_scale' = block128", "k = 7200", "multiple of 128"});
  s = gemm_spec();
  s.act_scale = ActScale::token;
  check_error(validate_spec(s), Code::invalid_argument, {"'act_scale' = token", "expected none for bf16"});
  s = gemm_spec();
  s.act = DType::f32;
  check_error(validate_spec(s), Code::invalid_argument, {"'act' = f32", "bf16, f16, e4m3 or e2m1"});
  // e2m1 (W4A4): MXFP4 weights, block32 scales, k64 steps, and a target with the kind::mxf4 mma.
  s = gemm_spec();
  s.weight = WeightFormat::mxfp4;
  s.scale = DType::e8m0;
  s.group_size = 32;
  s.arch = Arch::sm_120a;
  s.act = DType::e2m1;
  check_error(validate_spec(s), Code::invalid_argument, {"'act_scale' = none", "expected block32"});
  s.act_scale = ActScale::block32;
  CHECK(validate_spec(s).ok());
  CHECK(kGroupedGemmKernel.check(s).ok());
  // The target check (as for e4m3 before sm_89) runs before a compile: the kernel's check.
  s.arch = Arch::sm_90a;
  CHECK(validate_spec(s).ok());
  check_error(kGroupedGemmKernel.check(s), Code::unsupported, {"'act' = e2m1 needs the block-scaled mma", "not sm_90a"});
  s.arch = Arch::sm_120;  // the plain form has no arch-specific instructions
  check_error(kGroupedGemmKernel.check(s), Code::unsupported, {"not sm_120"});
  s.arch = Arch::sm_121a;
  s.bk = 32;
  check_error(validate_spec(s), Code::invalid_argument, {"bk = 32", "multiples of 64"});
  s = gemm_spec();
  s.arch = Arch::sm_120a;
  s.act = DType::e2m1;
  s.act_scale = ActScale::block32;
  check_error(validate_spec(s), Code::invalid_argument, {"'act' = e2m1 with weight", "expected mxfp4 weights"});
  s = gemm_spec();
  s.layout = Layout::contiguous;
  s.epilogue = Epilogue::topk_weight;
  check_error(validate_spec(s), Code::invalid_argument, {"'epilogue' = topk_weight", "indexed layout"});
  s = gemm_spec();
  s.split_k = 200;
  check_error(validate_spec(s), Code::invalid_argument, {"'split_k' = 200"});
  s = gemm_spec();
  s.bn = 48;
  check_error(validate_spec(s), Code::invalid_argument, {"'bn' = 48", "power of two"});
  s = gemm_spec();
  s.m = 16;  // a pinned M is legal
  CHECK(validate_spec(s).ok());
}

TEST_CASE("grouped GEMM template constraints: warp split and shared memory per target") {
  auto templates = codegen::TemplateSet::embedded();
  KernelSpec s = gemm_spec();
  s.bn = 64;  // 4 warps side by side need 4 x 32 columns
  check_error(codegen::generate_kernel(s, *templates).status(), Code::invalid_argument,
              {"'warps' = 4", "'bn' = 64"});
  s = gemm_spec();
  s.bm = 128;
  s.bn = 256;
  s.bk = 128;
  s.stages = 6;
  s.warps = 8;
  s.arch = Arch::sm_86;  // 6 x 49 KB stages: fits sm_90a's 227 KB, not sm_86's 99 KB
  check_error(codegen::generate_kernel(s, *templates).status(), Code::invalid_argument,
              {"shared memory", "sm_86"});
  s.arch = Arch::sm_90a;
  s.stages = 4;
  CHECK(codegen::generate_kernel(s, *templates).ok());
}

TEST_CASE("grouped GEMM n and k are bounded by what the kernel's offsets hold") {
  KernelSpec s = gemm_spec();
  REQUIRE(validate_spec(s).ok());
  s.n = 4294967264u;
  auto big_n = validate_spec(s);
  CHECK(big_n.message().find("field 'n' = 4294967264: expected at most 1048576") != std::string::npos);
  s.n = 1u << 20;
  s.k = 1u << 20;
  CHECK(validate_spec(s).message().find("expected at most 2147483648") != std::string::npos);
}
