// moejit warmup does what its options say or refuses them: a store that keeps nothing on disk
// is not "warmed", --weights naming the checkpoint's format keeps its scales, a usage manifest
// is not mixed with a model's options, one target is warmed once, a manifest a killed run cut
// short still warms what it lists, and a manifest's GEMMs are planned again for another target.
// These need no compiler: the refusals come first, and the summary names what was planned even
// where nothing compiles.

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "test_support.hpp"

using namespace moejit::test;
using Json = nlohmann::json;

namespace {

const char* kAlignLine = R"({"op":"moe_align","arch":"sm_90a","backend":"device","warps":4,"bm":16,"experts":64})";
const char* kReduceLine =
    R"({"op":"moe_reduce","act":"bf16","out":"f32","arch":"sm_90a","backend":"device","warps":4,"n":256})";

// The CLI with --json over a store in `dir`, NVRTC made unfindable (every compile fails fast, with
// the summary still printed), and `env` added.
ProcessResult warmup(const TempDir& dir, std::vector<std::string> args, const std::string& store = "store") {
  std::vector<std::string> argv = {MOEJIT_CLI, "--json", "--cache-dir", dir / store, "warmup"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, {{"MOEJIT_LOCK_DIR", dir / "locks"}, {"MOEJIT_NVRTC_LIBRARY", dir / "no/libnvrtc.so"}});
}

Json parsed(const ProcessResult& r) {
  CAPTURE(r.out);
  CAPTURE(r.err);
  Json doc = Json::parse(r.out, nullptr, false);
  REQUIRE(doc.is_object());
  return doc;
}

}  // namespace

TEST_CASE("moejit warmup refuses a store that would keep nothing on disk") {
  TempDir dir;
  write_text(dir / "usage.jsonl", std::string(kAlignLine) + "\n");
  std::filesystem::create_directories(dir / "open");
  ::chmod((dir / "open").c_str(), 0777);  // writable by others: never used, so memory-only
  ProcessResult r = warmup(dir, {"--from-usage", dir / "usage.jsonl"}, "open");
  CHECK(r.exit_code == 1);
  const std::string message = parsed(r)["error"]["message"];
  CHECK(message.find("cannot warm kernel store '" + (dir / "open") + "'") != std::string::npos);
  CHECK(message.find("writable by group or other") != std::string::npos);
}

TEST_CASE("moejit warmup --weights naming the checkpoint's format keeps the checkpoint's scales") {
  TempDir dir;
  // A GPTQ export: INT4 symmetric, group 128, f16 scales.
  write_text(dir / "gptq.json", R"({"model_type": "qwen3_moe", "hidden_size": 256, "moe_intermediate_size": 128,
    "num_experts": 16, "num_experts_per_tok": 4, "torch_dtype": "float16",
    "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": true, "desc_act": false}})");
  const std::vector<std::string> base = {"--model", dir / "gptq.json", "--arch", "sm_90a", "--max-tokens", "1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return warmup(dir, args);
  };
  CHECK(parsed(with({}))["weight_scale"] == "f16");
  ProcessResult same = with({"--weights", "int4-g128"});
  CHECK(parsed(same)["weight_scale"] == "f16");
  CHECK(same.err.find("--scale") == std::string::npos);  // nothing to warn about
  // An explicit --scale wins, and so does --scale alone, each with a warning naming both.
  for (auto extra : {std::vector<std::string>{"--weights", "int4-g128", "--scale", "bf16"},
                     std::vector<std::string>{"--scale", "bf16"}}) {
    ProcessResult r = with(extra);
    CHECK(parsed(r)["weight_scale"] == "bf16");
    CHECK(r.err.find("--scale bf16: " + (dir / "gptq.json") + "'s quantization_config (gptq) has f16 scales") !=
          std::string::npos);
  }
}

TEST_CASE("moejit warmup --from-usage refuses a model's options, and re-targets --arch and --backend") {
  TempDir dir;
  write_text(dir / "usage.jsonl", std::string(kAlignLine) + "\n" + kReduceLine + "\n");
  for (auto extra : {std::vector<std::string>{"--weights", "int4-g128"}, std::vector<std::string>{"--tp", "2"},
                     std::vector<std::string>{"--max-tokens", "64"}, std::vector<std::string>{"--act", "e4m3"}}) {
    std::vector<std::string> args = {"--from-usage", dir / "usage.jsonl"};
    args.insert(args.end(), extra.begin(), extra.end());
    ProcessResult r = warmup(dir, args);
    CHECK(r.exit_code == 1);
    CHECK(parsed(r)["error"]["message"].get<std::string>().find(extra[0] + " with --from-usage") !=
          std::string::npos);
  }
  // sm_90 and sm_90a are one target: each kernel is planned once.
  Json one_target = parsed(warmup(dir, {"--from-usage", dir / "usage.jsonl", "--arch", "sm_90,sm_90a"}));
  CHECK(one_target["kernels"] == 2);
  CHECK(one_target["duplicates"] == 0);
}

TEST_CASE("moejit warmup -j outside 1..256 is refused") {
  TempDir dir;
  write_text(dir / "usage.jsonl", std::string(kAlignLine) + "\n");
  for (const char* jobs : {"0", "1000000"}) {
    ProcessResult r = warmup(dir, {"--from-usage", dir / "usage.jsonl", "-j", jobs});
    CHECK(r.exit_code != 0);
    CHECK(r.exit_code != 134);  // no abort
    CHECK((r.out + r.err).find("--jobs") != std::string::npos);
  }
}

TEST_CASE("a usage manifest cut short by a killed run still warms what it lists and an empty one is an error") {
  TempDir dir;
  write_text(dir / "cut.jsonl", std::string(kAlignLine) + "\n" + R"({"op":"moe_al)");
  ProcessResult cut = warmup(dir, {"--from-usage", dir / "cut.jsonl"});
  CHECK(parsed(cut)["kernels"] == 1);  // planned (compiling needs NVRTC, made unfindable here)
  CHECK(cut.err.find("line 2 is cut short") != std::string::npos);
  // A bad line inside the file is still an error naming it.
  write_text(dir / "bad.jsonl", std::string(R"({"op":"moe_al)") + "\n" + kAlignLine + "\n");
  ProcessResult bad = warmup(dir, {"--from-usage", dir / "bad.jsonl"});
  CHECK(bad.exit_code == 1);
  CHECK(parsed(bad)["error"]["message"].get<std::string>().find("line 1") != std::string::npos);
  write_text(dir / "empty.jsonl", "\n");
  ProcessResult empty = warmup(dir, {"--from-usage", dir / "empty.jsonl"});
  CHECK(empty.exit_code == 1);
  CHECK(parsed(empty)["error"]["message"].get<std::string>().find("lists no kernel spec") != std::string::npos);
}

TEST_CASE("moejit warmup --from-usage --arch plans recorded GEMM calls again, and warns of GEMMs recorded without one") {
  TempDir dir;
  const std::string gemm =
      R"({"op":"grouped_gemm","arch":"sm_90a","backend":"device","weight":"mxfp4","scale":"e8m0","group_size":32,)"
      R"("act":"bf16","out":"bf16","layout":"indexed","epilogue":"topk_weight","n":256,"k":256,"experts":4,"bm":16,)"
      R"("bn":64,"bk":64,"stages":4,"warps":4,"split_k":1})";
  const std::string call =
      R"({"m":8,"rows_per_expert_hint":0,"topk_hint":2,"global_experts_hint":4,"weights_before_dependency":1})";
  write_text(dir / "usage.jsonl", R"({"spec":)" + gemm + R"(,"gemm_call":)" + call + "}\n" + kAlignLine + "\n");
  ProcessResult moved = warmup(dir, {"--from-usage", dir / "usage.jsonl", "--arch", "sm_121a"});
  CHECK(parsed(moved)["kernels"] == 2);  // GB10's one SM count: one GEMM, and the align
  CHECK(moved.err.find("without the call") == std::string::npos);
  // The align is a fused layer's, whose tile rows the GB10 may weigh otherwise: a manifest with
  // no layer record (an older moejit's) keeps them, and says so.
  CHECK(moved.err.find("1 fused-layer kernel(s) recorded without their layer") != std::string::npos);
  // With the layer's record, the GB10 plans the layer (align, gate/up, down, reduce at T = 4)
  // and nothing is said.
  const std::string layer =
      R"({"fused_moe":{"arch":"sm_90a","backend":"device","w13_weight":"mxfp4","w13_scale":"e8m0",)"
      R"("w13_group_size":32,"w13_packed_for":"bf16","w2_weight":"mxfp4","w2_scale":"e8m0","w2_group_size":32,)"
      R"("w2_packed_for":"bf16","act":"bf16","act_scale":"none","out":"bf16","activation":"silu_and_mul",)"
      R"("hidden":256,"intermediate":128,"experts":4,"global_experts":4,"topk":2,"tokens_from":4,"tokens_to":4}})";
  const std::string align = R"({"op":"moe_align","arch":"sm_90a","backend":"device","warps":4,"bm":16,"experts":4})";
  write_text(dir / "layer.jsonl", layer + "\n" + align + "\n");
  ProcessResult planned = warmup(dir, {"--from-usage", dir / "layer.jsonl", "--arch", "sm_121a"});
  CHECK(parsed(planned)["kernels"] == 4);
  CHECK(planned.err.find("without their layer") == std::string::npos);
  // Without --arch the run's kernels are warmed as listed; the layer's line is not one.
  CHECK(parsed(warmup(dir, {"--from-usage", dir / "layer.jsonl"}))["kernels"] == 1);
  // An older moejit's manifest: the GEMM's spec alone, kept with its tile for another target, said.
  write_text(dir / "old.jsonl", gemm + "\n");
  ProcessResult old = warmup(dir, {"--from-usage", dir / "old.jsonl", "--arch", "sm_121a"});
  CHECK(parsed(old)["kernels"] == 1);
  CHECK(old.err.find("1 grouped GEMM kernel(s) recorded without the call that chose them") != std::string::npos);
  // On the target it was recorded on, a record is what that run used: nothing to plan, nothing said.
  ProcessResult same = warmup(dir, {"--from-usage", dir / "old.jsonl", "--arch", "sm_90a"});
  CHECK(parsed(same)["kernels"] == 1);
  CHECK(same.err.find("without the call") == std::string::npos);
}
