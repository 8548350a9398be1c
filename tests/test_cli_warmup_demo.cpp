// `moejit warmup` and `moejit demo`: the main jobs, through the command line.

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <sstream>

#include "compile/nvrtc_library.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;
using Json = nlohmann::json;

#ifndef MOEJIT_CLI
#error "MOEJIT_CLI must name the moejit binary"
#endif

namespace {

Json run_json(const TempDir& dir, std::vector<std::string> args, int expect_exit = 0) {
  std::vector<std::string> argv = {MOEJIT_CLI, "--json", "--cache-dir", dir / "store"};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = run_process(argv, {{"MOEJIT_LOCK_DIR", dir / "locks"}});
  CAPTURE(r.out);
  CAPTURE(r.err);
  CHECK(r.exit_code == expect_exit);
  Json doc = Json::parse(r.out, nullptr, false);
  REQUIRE(doc.is_object());
  return doc;
}

// A small MoE config in the DeepSeek spelling.
const char* kTinyConfig = R"({"model_type": "deepseek_v3", "hidden_size": 256, "intermediate_size": 4096,
  "moe_intermediate_size": 128, "n_routed_experts": 16, "num_experts_per_tok": 4})";

// A GPU family as warm-up names it, and what moejit's null driver reports to stand in for it.
struct GpuFamily {
  const char *name, *cc, *sms, *target;
};
constexpr GpuFamily kH200{"sm_90", "9.0", "132", "sm_90a"}, kGb10{"sm_121", "12.1", "48", "sm_121a"};
// A compute capability 9.0 part with 8 SMs (a small slice): its tiles and split differ from the
// H100/H200 profiles'.
constexpr GpuFamily kSlice{"sm_90", "9.0", "8", "sm_90a"};

// The null driver (a libcuda whose launches return at once), or empty after saying why it is missing.
std::filesystem::path null_driver_or_skip() {
  const std::filesystem::path driver =
      std::filesystem::path(MOEJIT_CLI).parent_path() / "bench" / "overhead" / "libmoejit-null-cuda.so";
  if (std::filesystem::exists(driver)) return driver;
  MESSAGE("skipped: " << driver.string() << " (the null driver that stands in for the GPU) is not built");
  return {};
}

// `moejit demo` on the device backend over the store `dir / store`, the null driver standing in
// for a GPU of `family`: its JSON. Frozen: every kernel must come from the store.
Json null_gpu_demo(const TempDir& dir, const std::filesystem::path& driver, const GpuFamily& family,
                   std::vector<std::string> extra, bool frozen, const std::string& store = "store") {
  std::vector<std::string> argv = {MOEJIT_CLI, "--json", "--cache-dir", dir / store, "demo", "--model",
                                   dir / "config.json", "--backend", "device", "--tokens", "2"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  std::map<std::string, std::string> env = {{"MOEJIT_LOCK_DIR", dir / "locks"},
                                            {"MOEJIT_CUDA_LIBRARY", driver.string()},
                                            {"MOEJIT_NULL_CUDA_CC", family.cc},
                                            {"MOEJIT_NULL_CUDA_SMS", family.sms}};
  if (frozen) env["MOEJIT_FROZEN"] = "1";
  const ProcessResult r = run_process(argv, env);
  CAPTURE(r.out);
  CAPTURE(r.err);
  Json doc = Json::parse(r.out, nullptr, false);
  REQUIRE(doc.is_object());
  return doc;
}

Json frozen_demo(const TempDir& dir, const std::filesystem::path& driver, const GpuFamily& family,
                 std::vector<std::string> extra) {
  return null_gpu_demo(dir, driver, family, std::move(extra), true);
}

// The null driver computes nothing, so a frozen demo's output check is the only thing that may fail.
void check_only_the_output_check_failed(const Json& doc) {
  CHECK(doc["error"]["code"] == "internal");
  const std::string message = doc["error"]["message"];
  CHECK((message.find("not finite") != std::string::npos || message.find("relative error") != std::string::npos));
}

// A frozen demo every kernel of which came from the store: it compiled nothing, or failed only its
// output check (which comes after every launch).
void check_served_from_store(const Json& doc) {
  if (doc.contains("error")) check_only_the_output_check_failed(doc);
  else CHECK(doc["kernels_compiled"] == 0);
}

}  // namespace

TEST_CASE("moejit warmup compiles a model's kernels once, then finds them on disk") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  write_text(dir / "config.json", kTinyConfig);
  Json first = run_json(dir, {"warmup", "--model", dir / "config.json", "--arch", "sm_90a,sm_80", "--weights",
                              "int4-asym-g64", "--max-tokens", "512"});
  // 512 x 4 / 16 = 128 rows per expert reach the largest covering tile, but this small layer
  // (two 128-column blocks per GEMM) runs shorter tiles, more CTAs on an otherwise idle GPU
  // (fused_moe_op.cpp, layer_block_rows, weighed on each target). sm_90a, 10: aligns of 16, 32
  // and 64 rows, each GEMM's 16-row decode tile and its 32- and 64-row wgmma tiles (INT4 with
  // groups of 64 k has them), and the reduce. sm_80 (an A100's profile) takes 64-row tiles near
  // 512 tokens as well: 12.
  CHECK(first["kernels"] == 10 + 12);
  CHECK(first["compiled"] == 22);
  CHECK(first["errors"].empty());
  Json second = run_json(dir, {"warmup", "--model", dir / "config.json", "--arch", "sm_90a,sm_80", "--weights",
                               "int4-asym-g64", "--max-tokens", "512"});
  CHECK(second["compiled"] == 0);
  CHECK(second["from_disk"] == 22);
  // Fewer tokens reach fewer tiles.
  Json small = run_json(dir, {"warmup", "--model", dir / "config.json", "--arch", "sm_90a", "--weights",
                              "int4-asym-g64", "--max-tokens", "4"});
  CHECK(small["kernels"] == 4);  // one tile: align, gate/up, down, reduce
}

TEST_CASE("moejit warmup --act e4m3 warms the W4A8 layer: its GEMMs and both quantizations") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  write_text(dir / "config.json", kTinyConfig);
  for (const char* scale : {"token", "block128"}) {
    CAPTURE(scale);
    Json doc = run_json(dir, {"warmup", "--model", dir / "config.json", "--arch", "sm_120a", "--weights", "mxfp4",
                              "--act", "e4m3", "--act-scale", scale, "--max-tokens", "4"});
    // One tile: align, gate/up, down, reduce, and the quantizations of bf16 hidden states, of f16
    // ones and of the gate/up output.
    CHECK(doc["kernels"] == 7);
    // block128 finds the align and the reduction token's run compiled: they do not depend on it.
    CHECK(doc["compiled"] == (std::string(scale) == "token" ? 7 : 5));
    CHECK(doc["errors"].empty());
  }
  Json bad = run_json(dir, {"warmup", "--model", dir / "config.json", "--arch", "sm_90a", "--act-scale", "token"}, 1);
  CHECK(bad["error"]["message"].get<std::string>().find("--act-scale token: applies to --act e4m3 or e2m1 only") !=
        std::string::npos);
  Json old = run_json(dir, {"warmup", "--model", dir / "config.json", "--arch", "sm_80", "--act", "e4m3",
                            "--max-tokens", "1"},
                      1);
  REQUIRE(old["errors"].size() == 2);  // no e4m3 mma before sm_89: each GEMM says so
  CHECK(old["errors"][0].get<std::string>().find("e4m3 needs sm_89 or newer, not sm_80") != std::string::npos);
}

TEST_CASE("moejit warmup --act e2m1 warms the W4A4 layer on sm_120a and sm_121a, and says where it cannot") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  write_text(dir / "config.json", kTinyConfig);
  Json doc = run_json(dir, {"warmup", "--model", dir / "config.json", "--arch", "sm_120a", "--weights", "mxfp4",
                            "--act", "mxfp4", "--max-tokens", "4"});
  // One tile: align, gate/up, down, reduce, and the e2m1 quantizations of bf16 and f16 hidden
  // states and of the gate/up output.
  CHECK(doc["kernels"] == 7);
  CHECK(doc["compiled"] == 7);
  CHECK(doc["errors"].empty());
  // The sm_121 family (GB10 and its siblings' SM counts): at least as many, all compiled.
  Json spark = run_json(dir, {"warmup", "--model", dir / "config.json", "--arch", "sm_121", "--act", "e2m1",
                              "--max-tokens", "4"});
  CHECK(spark["kernels"].get<int>() >= 7);
  CHECK(spark["errors"].empty());
  Json hopper = run_json(dir, {"warmup", "--model", dir / "config.json", "--arch", "sm_90a", "--act", "e2m1"}, 1);
  CHECK(hopper["error"]["message"].get<std::string>().find("'act' = e2m1 for sm_90a") != std::string::npos);
  Json int4 = run_json(dir, {"demo", "--model", dir / "config.json", "--backend", "host", "--weights", "int4-g128",
                             "--act", "e2m1"},
                       1);
  CHECK(int4["error"]["message"].get<std::string>().find("--act e2m1 with weights int4-g128") != std::string::npos);
  Json scale = run_json(dir, {"warmup", "--model", dir / "config.json", "--arch", "sm_120a", "--act", "e2m1",
                              "--act-scale", "token"},
                        1);
  CHECK(scale["error"]["message"].get<std::string>().find("--act-scale token: expected block32") != std::string::npos);
}

TEST_CASE("moejit warmup and demo build for the checkpoint's quantization_config when --weights is not given") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  // Kimi-K2's scheme (compressed-tensors, INT4 symmetric, group 32, bf16 model) on a small shape.
  write_text(dir / "kimi.json", R"({"model_type": "kimi_k2", "hidden_size": 256, "moe_intermediate_size": 128,
    "n_routed_experts": 16, "num_experts_per_tok": 4, "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
      "config_groups": {"group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int",
        "symmetric": true, "strategy": "group", "group_size": 32, "actorder": null}}}}})");
  const std::vector<std::string> warm = {"warmup", "--model", dir / "kimi.json", "--arch", "sm_90a", "--max-tokens", "1"};
  Json from_config = run_json(dir, warm);
  CHECK(from_config["weights"] == "int4-g32");
  CHECK(from_config["weight_scale"] == "bf16");
  CHECK(from_config["compiled"].get<int>() > 0);
  // The same kernels --weights int4-g32 --scale bf16 names: all on disk now.
  std::vector<std::string> named = warm;
  named.insert(named.end(), {"--weights", "int4-g32", "--scale", "bf16"});
  Json explicit_flags = run_json(dir, named);
  CHECK(explicit_flags["from_disk"] == from_config["kernels"]);
  CHECK(explicit_flags["compiled"] == 0);
  // --weights wins over the config, with a warning that names both.
  std::vector<std::string> other = {MOEJIT_CLI, "--json", "--cache-dir", dir / "store"};
  other.insert(other.end(), warm.begin(), warm.end());
  other.insert(other.end(), {"--weights", "int4-g64"});
  const ProcessResult overridden = run_process(other, {{"MOEJIT_LOCK_DIR", dir / "locks"}});
  CAPTURE(overridden.err);
  CHECK(overridden.exit_code == 0);
  CHECK(overridden.err.find("--weights int4-g64: " + (dir / "kimi.json") +
                            "'s quantization_config (compressed-tensors) describes int4-g32 weights") != std::string::npos);
  CHECK(Json::parse(overridden.out)["weights"] == "int4-g64");
  // The demo runs the checkpoint's format too.
  Json demo = run_json(dir, {"demo", "--model", dir / "kimi.json", "--backend", "host", "--tokens", "3"});
  CHECK(demo["weights"] == "int4-g32");
  CHECK(demo["ok"] == true);

  // DeepSeek-V3's own FP8 checkpoint: refused without --weights, with the reason; warmed with it.
  write_text(dir / "fp8.json", R"({"model_type": "deepseek_v3", "hidden_size": 256, "moe_intermediate_size": 128,
    "n_routed_experts": 16, "num_experts_per_tok": 4, "quantization_config": {"activation_scheme": "dynamic",
    "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128]}})");
  Json refused = run_json(dir, {"warmup", "--model", dir / "fp8.json", "--arch", "sm_90a"}, 1);
  const std::string message = refused["error"]["message"];
  CHECK(message.find("quantization_config 'fp8' is not a format moejit runs (FP8 weights") != std::string::npos);
  CHECK(message.find("pass --weights") != std::string::npos);
  Json named_fp8 = run_json(dir, {"warmup", "--model", dir / "fp8.json", "--arch", "sm_90a", "--max-tokens", "1",
                                  "--weights", "int4-g32"});
  CHECK(named_fp8["weights"] == "int4-g32");
  CHECK(named_fp8["act"] == "bf16");
  CHECK(named_fp8["errors"].empty());

  // A W4AFP8 export (INT4 weights, FP8 per-token activations): the W4A8 layer, unless --act says otherwise.
  write_text(dir / "w4afp8.json", R"({"model_type": "qwen3_moe", "hidden_size": 256, "moe_intermediate_size": 128,
    "num_experts": 16, "num_experts_per_tok": 4, "quantization_config": {"quant_method": "compressed-tensors",
      "format": "pack-quantized", "config_groups": {"group_0": {"targets": ["Linear"],
        "weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 128},
        "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": true}}}}})");
  Json w4a8 = run_json(dir, {"warmup", "--model", dir / "w4afp8.json", "--arch", "sm_90a", "--max-tokens", "1"});
  CHECK(w4a8["weights"] == "int4-g128");
  CHECK(w4a8["act"] == "e4m3");
  CHECK(w4a8["act_scale"] == "token");
  CHECK(w4a8["errors"].empty());
  Json w4a16 = run_json(dir, {"warmup", "--model", dir / "w4afp8.json", "--arch", "sm_90a", "--max-tokens", "1",
                              "--act", "bf16"});
  CHECK(w4a16["act"] == "bf16");
  CHECK(w4a16.count("act_scale") == 0);

  // A malformed quantization_config: an error naming the field without --weights, a warning with it.
  write_text(dir / "odd.json", R"({"model_type": "qwen3_moe", "hidden_size": 256, "moe_intermediate_size": 128,
    "num_experts": 16, "num_experts_per_tok": 4, "quantization_config": {"quant_method": "gptq", "bits": "4"}})");
  Json odd = run_json(dir, {"warmup", "--model", dir / "odd.json", "--arch", "sm_90a"}, 1);
  CHECK(odd["error"]["message"].get<std::string>().find("'bits' = \"4\": expected an integer; pass --weights") !=
        std::string::npos);
  std::vector<std::string> odd_named = {MOEJIT_CLI, "--json", "--cache-dir", dir / "store", "warmup", "--model",
                                        dir / "odd.json", "--arch", "sm_90a", "--max-tokens", "1", "--weights",
                                        "int4-g32"};
  const ProcessResult ignored = run_process(odd_named, {{"MOEJIT_LOCK_DIR", dir / "locks"}});
  CAPTURE(ignored.err);
  CHECK(ignored.exit_code == 0);
  CHECK(ignored.err.find("ignoring " + (dir / "odd.json") + "'s quantization_config for --weights int4-g32") !=
        std::string::npos);
}

TEST_CASE("moejit warmup --from-usage warms what a run recorded, for other architectures too") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  write_text(dir / "usage.jsonl",
             R"({"op":"moe_align","arch":"sm_90a","backend":"device","warps":4,"bm":16,"experts":64})" "\n"
             R"({"op":"moe_reduce","act":"bf16","out":"f32","arch":"sm_90a","backend":"device","warps":4,"n":256})" "\n"
             R"({"op":"moe_align","arch":"sm_90a","backend":"device","warps":4,"bm":16,"experts":64})" "\n");
  Json doc = run_json(dir, {"warmup", "--from-usage", dir / "usage.jsonl"});
  CHECK(doc["kernels"] == 2);
  CHECK(doc["compiled"] == 2);
  Json retarget = run_json(dir, {"warmup", "--from-usage", dir / "usage.jsonl", "--arch", "sm_90a,sm_121a"});
  CHECK(retarget["kernels"] == 4);
  CHECK(retarget["from_disk"] == 2);
  CHECK(retarget["compiled"] == 2);
}

TEST_CASE("moejit warmup and demo name the problem in bad input") {
  TempDir dir;
  write_text(dir / "dense.json", R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008})");
  Json no_experts = run_json(dir, {"warmup", "--model", dir / "dense.json", "--arch", "sm_90a"}, 1);
  CHECK(no_experts["error"]["message"].get<std::string>().find("n_routed_experts") != std::string::npos);
  write_text(dir / "config.json", kTinyConfig);
  Json no_arch = run_json(dir, {"warmup", "--model", dir / "config.json"}, 1);
  CHECK(no_arch["error"]["message"].get<std::string>().find("--arch") != std::string::npos);
  Json bad_weights = run_json(dir, {"demo", "--model", dir / "config.json", "--weights", "fp3"}, 1);
  CHECK(bad_weights["error"]["message"].get<std::string>().find("--weights fp3") != std::string::npos);
  Json no_model = run_json(dir, {"demo", "--model", dir / "absent.json"}, 1);
  CHECK(no_model["error"]["code"] == "not_found");
}

TEST_CASE("moejit demo runs a fused MoE layer on the host backend and checks it") {
  TempDir dir;
  write_text(dir / "config.json", kTinyConfig);
  for (const char* weights : {"mxfp4", "int4-asym-g64"}) {
    Json doc = run_json(dir, {"demo", "--model", dir / "config.json", "--backend", "host", "--tokens", "5",
                              "--weights", weights});
    CHECK(doc["ok"] == true);
    CHECK(doc["backend"] == "host");
    CHECK(doc["relative_error"].get<double>() < 1e-2);
    CHECK(doc["experts_run"] == 16);
    CHECK(doc["reference_tokens"] == 5);  // a small layer is checked on every token
  }
  // W4A8: the same layer with FP8 activations, beside W4A16 on the same data.
  Json fp8 = run_json(dir, {"demo", "--model", dir / "config.json", "--backend", "host", "--tokens", "3", "--act",
                            "e4m3", "--act-scale", "block128"});
  CHECK(fp8["ok"] == true);
  CHECK(fp8["act"] == "e4m3");
  CHECK(fp8["act_scale"] == "block128");
  CHECK(fp8["relative_error"].get<double>() < 0.1);
  CHECK(fp8["w4a16"]["relative_error"].get<double>() < 1e-2);
  CHECK(fp8["relative_error"].get<double>() > fp8["w4a16"]["relative_error"].get<double>());
  // W4A4: MXFP4 activations, the host executor running the sm_120a kernels.
  Json fp4 = run_json(dir, {"demo", "--model", dir / "config.json", "--backend", "host", "--tokens", "3", "--act",
                            "e2m1"});
  CHECK(fp4["ok"] == true);
  CHECK(fp4["act"] == "e2m1");
  CHECK(fp4["act_scale"] == "block32");
  CHECK(fp4["arch"] == "sm_120a");
  CHECK(fp4["relative_error"].get<double>() < 0.3);
  CHECK(fp4["relative_error"].get<double>() > fp4["w4a16"]["relative_error"].get<double>());
}

TEST_CASE("a store warmed for a plain architecture name serves a frozen run on a GPU of that family") {
  if (!nvrtc_or_skip()) return;
  const std::filesystem::path driver = null_driver_or_skip();
  if (driver.empty()) return;
  // Warm-up names the family as people do ("sm_90"); the GPU (moejit's null driver reporting the
  // compute capability and SM count of an H200, then of a GB10) looks up the `a` form (the demo
  // writes f32, so the store is warmed for f32 output). Every
  // kernel of the run must come from the store: a frozen miss fails the run before it launches.
  for (const GpuFamily& f : {kH200, kGb10}) {
    INFO("family " << std::string(f.name));
    TempDir dir;
    write_text(dir / "config.json", kTinyConfig);
    Json warm = run_json(dir, {"warmup", "--model", dir / "config.json", "--arch", f.name, "--max-tokens", "2",
                              "--out", "f32"});
    CHECK(warm["errors"].empty());
    CHECK(warm["compiled"].get<int>() >= 4);
    const Json doc = frozen_demo(dir, driver, f, {});
    if (doc.contains("error")) {
      check_only_the_output_check_failed(doc);
    } else {
      CHECK(doc["arch"] == f.target);
      CHECK(doc["kernels_compiled"] == 0);
      CHECK(doc["ok"] == false);
    }
  }
}

TEST_CASE("warmup --sms covers a GPU of an SM count no device profile has") {
  if (!nvrtc_or_skip()) return;
  const std::filesystem::path driver = null_driver_or_skip();
  if (driver.empty()) return;
  // A store warmed for the H100/H200 profiles alone misses in a frozen run on kSlice.
  TempDir dir;
  write_text(dir / "config.json", kTinyConfig);
  const std::vector<std::string> warm = {"warmup", "--model", dir / "config.json", "--arch", "sm_90", "--max-tokens",
                                         "2", "--out", "f32"};
  CHECK(run_json(dir, warm)["errors"].empty());
  const Json missed = frozen_demo(dir, driver, kSlice, {});
  REQUIRE(missed.contains("error"));
  CHECK(missed["error"]["message"].get<std::string>().find("frozen mode: no kernel") != std::string::npos);
  std::vector<std::string> with_sms = warm;
  with_sms.insert(with_sms.end(), {"--sms", "8"});
  const Json warmed = run_json(dir, with_sms);
  CHECK(warmed["errors"].empty());
  CHECK(warmed["compiled"].get<int>() >= 1);
  check_served_from_store(frozen_demo(dir, driver, kSlice, {}));
}

TEST_CASE("a usage manifest recorded on an H200 warms what a GB10 and an 8-SM slice look up in frozen runs") {
  if (!nvrtc_or_skip()) return;
  const std::filesystem::path driver = null_driver_or_skip();
  if (driver.empty()) return;
  TempDir dir;
  write_text(dir / "config.json", kTinyConfig);
  // The run that records (compiling into a store of its own): the null driver computes nothing,
  // so only its output check may fail.
  const Json recorded = null_gpu_demo(dir, driver, kH200, {"--usage-manifest", dir / "usage.jsonl"}, false, "h200");
  if (recorded.contains("error")) check_only_the_output_check_failed(recorded);
  REQUIRE(std::filesystem::exists(dir / "usage.jsonl"));
  // Renaming the target of each spec (what an older manifest, specs alone, allows) gives the GB10
  // an H200 tile: here one that needs more shared memory than a GB10 block has, and not the one
  // the GB10 looks up.
  std::string specs_alone;
  std::istringstream lines(slurp(dir / "usage.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const Json record = Json::parse(line);
    if (record.contains("fused_moe")) continue;  // the layer's call: not written then either
    specs_alone += (record.contains("spec") ? record["spec"] : record).dump() + "\n";
  }
  write_text(dir / "specs-alone.jsonl", specs_alone);
  const Json renamed = run_json(dir, {"warmup", "--from-usage", dir / "specs-alone.jsonl", "--arch", kGb10.name}, 1);
  CHECK(renamed["errors"].size() == 1);
  const Json renamed_run = frozen_demo(dir, driver, kGb10, {});
  REQUIRE(renamed_run.contains("error"));
  CHECK(renamed_run["error"]["code"] == "frozen_miss");
  // Re-targeted with the recorded calls: the GB10's heuristic plans them, so nothing misses.
  const Json warm = run_json(dir, {"warmup", "--from-usage", dir / "usage.jsonl", "--arch", kGb10.name});
  CHECK(warm["errors"].empty());
  check_served_from_store(frozen_demo(dir, driver, kGb10, {}));
  // Its own family keeps the records as made on a 132-SM GPU, which an 8-SM slice does not pick...
  CHECK(run_json(dir, {"warmup", "--from-usage", dir / "usage.jsonl", "--arch", kH200.name})["errors"].empty());
  const Json missed = frozen_demo(dir, driver, kSlice, {});
  REQUIRE(missed.contains("error"));
  CHECK(missed["error"]["message"].get<std::string>().find("frozen mode: no kernel") != std::string::npos);
  // ...until --sms plans them for that slice too.
  CHECK(run_json(dir, {"warmup", "--from-usage", dir / "usage.jsonl", "--arch", kH200.name, "--sms", kSlice.sms})["errors"]
            .empty());
  check_served_from_store(frozen_demo(dir, driver, kSlice, {}));
  // --sms with a manifest names a GPU of a target: without --arch it is refused.
  Json no_arch = run_json(dir, {"warmup", "--from-usage", dir / "usage.jsonl", "--sms", "16"}, 1);
  CHECK(no_arch["error"]["message"].get<std::string>().find("--sms with --from-usage: expected --arch too") !=
        std::string::npos);
}

TEST_CASE("a store warmed for W4A8 serves a frozen W4A8 run on an H200 and a GB10: quantizations and GEMMs") {
  if (!nvrtc_or_skip()) return;
  const std::filesystem::path driver = null_driver_or_skip();
  if (driver.empty()) return;
  // demo --act e4m3 runs the layer in W4A16, then W4A8 (the hidden-state and gate/up quantizers,
  // the GEMMs on e4m3 rows), so the store needs both warm-ups; in frozen mode a kernel the
  // warm-up did not enumerate fails the run before it launches. First with the bf16 warm-up only
  // (the W4A8 layer's first kernel is missing), then with both. The H200 runs the GEMMs as f16
  // pairs, the GB10 (sm_121a) through block-scaled mma's.
  for (const GpuFamily& f : {kH200, kGb10}) {
    INFO("family " << std::string(f.name));
    TempDir dir;
    write_text(dir / "config.json", kTinyConfig);
    for (const char* act : {"bf16", "e4m3"}) {
      CAPTURE(act);
      Json warm = run_json(dir, {"warmup", "--model", dir / "config.json", "--arch", f.name, "--max-tokens", "2",
                                "--out", "f32", "--act", act});
      CHECK(warm["errors"].empty());
      const Json doc = frozen_demo(dir, driver, f, {"--act", "e4m3"});
      CAPTURE(doc.dump());
      REQUIRE(doc.contains("error"));
      if (std::string(act) == "bf16") {
        CHECK(doc["error"]["code"] == "frozen_miss");
        CHECK(doc["error"]["message"].get<std::string>().find("act_quantize") != std::string::npos);
      } else {
        check_only_the_output_check_failed(doc);
      }
    }
  }
}

TEST_CASE("a store warmed for W4A4 serves a frozen W4A4 run on a GB10") {
  if (!nvrtc_or_skip()) return;
  const std::filesystem::path driver = null_driver_or_skip();
  if (driver.empty()) return;
  // demo --act e2m1 runs the layer in W4A16, then W4A4; both warm-ups fill the store, and the
  // frozen run on the null driver standing in for a GB10 finds every kernel.
  TempDir dir;
  write_text(dir / "config.json", kTinyConfig);
  for (const char* act : {"bf16", "e2m1"}) {
    Json warm = run_json(dir, {"warmup", "--model", dir / "config.json", "--arch", kGb10.name, "--max-tokens", "2",
                              "--out", "f32", "--act", act});
    CHECK(warm["errors"].empty());
  }
  const Json doc = frozen_demo(dir, driver, kGb10, {"--act", "e2m1"});
  CAPTURE(doc.dump());
  REQUIRE(doc.contains("error"));
  check_only_the_output_check_failed(doc);
}
