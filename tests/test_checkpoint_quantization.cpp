// The weight format a config.json's quantization_config describes, on configs shaped as the
// exporters write them: gpt-oss (mxfp4), Kimi-K2 and RedHatAI w4a16 (compressed-tensors
// pack-quantized), GPTQModel / AutoGPTQ, AutoAWQ, DeepSeek-V3 (fp8, which moejit does not run).

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "dispatch/hf_config.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::dispatch;
using Kind = CheckpointQuantization::Kind;

namespace {

// A small MoE config with `quantization` as its quantization_config (and `extra` top-level keys).
std::string config_with(const std::string& quantization, const std::string& extra = "") {
  return R"({"model_type": "kimi_k2", "hidden_size": 1024, "moe_intermediate_size": 256, "n_routed_experts": 16,
             "num_experts_per_tok": 4)" +
         extra + R"(, "quantization_config": )" + quantization + "}";
}

CheckpointQuantization read(const std::string& quantization, const std::string& extra = "") {
  auto shape = parse_hf_config(config_with(quantization, extra), "config.json");
  REQUIRE_MESSAGE(shape.ok(), shape.status().to_string());
  return shape->quantization;
}

void check_four_bit(const CheckpointQuantization& q, const char* spelling, DType scale) {
  CAPTURE(q.reason);
  REQUIRE(q.kind == Kind::four_bit);
  CHECK(weights_spelling(q.format, q.group_size) == spelling);
  CHECK(q.scale == scale);
}

void check_unsupported(const CheckpointQuantization& q, std::initializer_list<const char*> needles) {
  REQUIRE(q.kind == Kind::unsupported);
  for (const char* needle : needles) {
    CAPTURE(needle);
    CAPTURE(q.reason);
    CHECK(q.reason.find(needle) != std::string::npos);
  }
}

// compressed-tensors as llm-compressor writes it, with one config group's weights.
std::string compressed_tensors(const std::string& weights, const std::string& format = "pack-quantized") {
  return R"({"quant_method": "compressed-tensors", "format": ")" + format +
         R"(", "quantization_status": "compressed", "ignore": ["lm_head"], "kv_cache_scheme": null,
             "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": null,
                                           "output_activations": null, "weights": )" +
         weights + "}}}";
}

std::string int_weights(const std::string& fields) {
  return R"({"num_bits": 4, "type": "int", "dynamic": false, "observer": "minmax", "block_structure": null, )" +
         fields + "}";
}

}  // namespace

TEST_CASE("quantization_config: the 4-bit checkpoints moejit runs") {
  // No quantization_config: 16-bit weights, nothing to read.
  auto plain = parse_hf_config(R"({"hidden_size": 64, "moe_intermediate_size": 32, "num_experts": 8,
                                   "num_experts_per_tok": 2})",
                               "config.json");
  REQUIRE(plain.ok());
  CHECK(plain->quantization.kind == Kind::none);

  // gpt-oss.
  check_four_bit(read(R"({"modules_to_not_convert": ["model.layers.*.self_attn", "model.embed_tokens", "lm_head"],
                          "quant_method": "mxfp4"})"),
                 "mxfp4", DType::e8m0);

  // Kimi-K2: symmetric, group 32, scales in the model's dtype.
  const std::string kimi = compressed_tensors(
      int_weights(R"("symmetric": true, "strategy": "group", "group_size": 32, "actorder": null)"));
  check_four_bit(read(kimi, R"(, "torch_dtype": "bfloat16")"), "int4-g32", DType::bf16);
  check_four_bit(read(kimi, R"(, "dtype": "float16")"), "int4-g32", DType::f16);
  // Asymmetric per-channel, and actorder "weight" (baked into the weights, nothing stored).
  check_four_bit(read(compressed_tensors(int_weights(
                     R"("symmetric": false, "strategy": "channel", "group_size": null, "actorder": "weight")"))),
                 "int4-asym-channel", DType::bf16);
  // A second group that quantizes activations only, or describes the same weights, is fine.
  check_four_bit(read(R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {
                            "group_0": {"targets": ["re:.*experts.*"], "weights": {"num_bits": 4, "type": "int",
                              "symmetric": true, "strategy": "group", "group_size": 128}},
                            "group_1": {"targets": ["re:.*shared.*"], "weights": {"num_bits": 4, "type": "int",
                              "symmetric": true, "strategy": "group", "group_size": 128}},
                            "group_2": {"targets": ["Embedding"], "weights": null}}})"),
                 "int4-g128", DType::bf16);

  // GPTQ (GPTQModel writes "checkpoint_format"), f16 scales; group -1 is per-channel.
  check_four_bit(read(R"({"bits": 4, "group_size": 128, "desc_act": false, "sym": true, "lm_head": false,
                          "quant_method": "gptq", "checkpoint_format": "gptq", "damp_percent": 0.01})"),
                 "int4-g128", DType::f16);
  check_four_bit(read(R"({"bits": 4, "group_size": -1, "desc_act": false, "sym": false, "quant_method": "gptq"})"),
                 "int4-asym-channel", DType::f16);
  // AutoAWQ and llm-awq's spellings.
  check_four_bit(read(R"({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": true,
                          "version": "gemm", "modules_to_not_convert": null})"),
                 "int4-asym-g64", DType::f16);
  check_four_bit(read(R"({"quant_method": "awq", "w_bit": 4, "q_group_size": 128, "zero_point": true})"),
                 "int4-asym-g128", DType::f16);
  // A multimodal wrapper may keep it under text_config.
  auto wrapped = parse_hf_config(R"({"text_config": {"hidden_size": 64, "moe_intermediate_size": 32,
                                       "num_experts": 8, "num_experts_per_tok": 2,
                                       "quantization_config": {"quant_method": "mxfp4"}}})",
                                 "config.json");
  REQUIRE(wrapped.ok());
  check_four_bit(wrapped->quantization, "mxfp4", DType::e8m0);
}

TEST_CASE("quantization_config: compressed-tensors input_activations choose FP8 activations where moejit has them") {
  auto with_acts = [](const char* acts) {
    return read(R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"group_0": {
                      "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": true,
                      "strategy": "group", "group_size": 128}, "input_activations": )" +
                std::string(acts) + "}}}");
  };
  // W4AFP8 (int4 weights, FP8 dynamic per-token activations), as vLLM's W4A8-FP8 MoE reads it.
  CheckpointQuantization q = with_acts(R"({"num_bits": 8, "type": "float", "strategy": "token", "dynamic": true,
                                           "symmetric": true})");
  check_four_bit(q, "int4-g128", DType::bf16);
  CHECK(q.act == DType::e4m3);
  CHECK(q.act_scale == ActScale::token);
  q = with_acts(R"({"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": false})");
  CHECK(q.act == DType::e4m3);
  CHECK(q.act_scale == ActScale::token);  // one scale for all tokens is a per-token scale
  q = with_acts(R"({"num_bits": 8, "type": "float", "strategy": "group", "group_size": 128, "dynamic": true})");
  CHECK(q.act == DType::e4m3);
  CHECK(q.act_scale == ActScale::block128);
  // What moejit does not quantize to leaves 16-bit activations, with the reason.
  q = with_acts(R"({"num_bits": 8, "type": "int", "strategy": "token", "dynamic": true})");
  check_four_bit(q, "int4-g128", DType::bf16);
  CHECK(q.act == DType::none);
  CHECK(q.act_note.find("8-bit int activations") != std::string::npos);
  q = with_acts(R"({"num_bits": 8, "type": "float", "strategy": "group", "group_size": 64})");
  CHECK(q.act == DType::none);
  CHECK(q.act_note.find("strategy 'group' and group_size 64") != std::string::npos);
  q = with_acts("null");
  CHECK(q.act == DType::none);
  CHECK(q.act_note.empty());
  auto bad = parse_hf_config(config_with(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
                                              "config_groups": {"g": {
                                              "weights": {"num_bits": 4, "type": "int", "strategy": "channel"},
                                              "input_activations": 8}}})"),
                             "config.json");
  REQUIRE(bad.ok());
  CHECK(bad->quantization.kind == Kind::invalid);
  CHECK(bad->quantization.reason.find("config_groups.g.input_activations: 8: expected an object") != std::string::npos);
}

TEST_CASE("quantization_config: checkpoints moejit cannot run say why") {
  // DeepSeek-V3's own checkpoint.
  check_unsupported(read(R"({"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                             "weight_block_size": [128, 128]})"),
                    {"FP8 weights"});
  check_unsupported(read(R"({"quant_method": "bitsandbytes", "load_in_4bit": true})"),
                    {"not a method moejit reads", "compressed-tensors"});
  check_unsupported(read(R"({"bits": 8, "group_size": 128, "quant_method": "gptq"})"), {"8-bit weights"});
  // The same quantization serialized for other kernels, or in other words.
  check_unsupported(read(R"({"bits": 4, "group_size": 128, "sym": true, "quant_method": "gptq",
                             "checkpoint_format": "marlin"})"),
                    {"checkpoint_format 'marlin'", "gptq or gptq_v2"});
  check_unsupported(read(R"({"bits": 4, "group_size": 128, "quant_method": "gptq", "is_marlin_format": true})"),
                    {"is_marlin_format: true"});
  check_unsupported(read(R"({"bits": 4, "group_size": 128, "quant_method": "gptq", "pack_dtype": "int16"})"),
                    {"pack_dtype 'int16'", "32 bits"});
  check_four_bit(read(R"({"bits": 4, "group_size": 128, "sym": true, "quant_method": "gptq",
                          "checkpoint_format": "gptq_v2", "pack_dtype": "int32", "is_marlin_format": false})"),
                 "int4-g128", DType::f16);
  check_unsupported(read(R"({"bits": 4, "group_size": 128, "desc_act": true, "quant_method": "gptq"})"),
                    {"act-order", "g_idx"});
  check_unsupported(read(R"({"bits": 4, "group_size": 256, "quant_method": "gptq"})"),
                    {"group size 256", "32, 64, 128 or per-channel"});
  check_unsupported(read(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemv"})"),
                    {"version 'gemv'", "GEMM's packing"});
  // compressed-tensors: NVFP4, FP8, act-order, an unpacked format, mixed schemes.
  check_unsupported(read(compressed_tensors(R"({"num_bits": 4, "type": "float", "strategy": "tensor_group",
                                                "group_size": 16, "symmetric": true})",
                                            "nvfp4-pack-quantized")),
                    {"group_0: float 4-bit weights"});
  check_unsupported(read(compressed_tensors(R"({"num_bits": 8, "type": "float", "strategy": "channel"})",
                                            "float-quantized")),
                    {"float 8-bit"});
  check_unsupported(read(compressed_tensors(int_weights(
                        R"("symmetric": true, "strategy": "group", "group_size": 128, "actorder": "group")"))),
                    {"actorder \"group\""});
  check_unsupported(read(compressed_tensors(int_weights(R"("symmetric": true, "strategy": "group", "group_size": 128)"),
                                            "int-quantized")),
                    {"format 'int-quantized'", "pack-quantized"});
  check_unsupported(read(compressed_tensors(int_weights(R"("symmetric": true, "strategy": "tensor")"))),
                    {"strategy 'tensor'"});
  check_unsupported(read(R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {
                              "group_0": {"weights": {"num_bits": 4, "type": "int", "symmetric": true,
                                                      "strategy": "group", "group_size": 32}},
                              "group_1": {"weights": {"num_bits": 4, "type": "int", "symmetric": false,
                                                      "strategy": "group", "group_size": 128}}}})"),
                    {"several 4-bit schemes", "int4-g32", "int4-asym-g128"});
  check_unsupported(read(R"({"quant_method": "compressed-tensors"})"), {"no config_groups"});
  // actorder's alias of "group", in any case.
  for (const char* order : {R"("dynamic")", R"("GROUP")", "true"})
    check_unsupported(read(compressed_tensors(int_weights(std::string(R"("symmetric": true, "strategy": "group",
                                                                         "group_size": 128, "actorder": )") +
                                                          order))),
                      {"actorder", "g_idx"});
  // No format: compressed-tensors' default, unpacked weights.
  check_unsupported(read(R"({"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": {
                              "num_bits": 4, "type": "int", "symmetric": true, "strategy": "group",
                              "group_size": 32}}}})"),
                    {"format 'none: unpacked weights'", "pack-quantized"});
  // Scales in a dtype moejit's INT4 has not.
  check_unsupported(read(compressed_tensors(int_weights(R"("symmetric": true, "strategy": "group", "group_size": 32)")),
                         R"(, "torch_dtype": "float32")"),
                    {"scales in float32", "bf16 or f16"});
  // A preset scheme's name with its targets, as recipes write it.
  check_unsupported(read(R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
                             "config_groups": {"W4A16": ["Linear"]}})"),
                    {"W4A16: preset scheme"});
  // AWQ: llm-awq's own format, GEMV's packing, and no zero points.
  check_unsupported(read(R"({"quant_method": "awq", "w_bit": 4, "q_group_size": 128, "zero_point": true,
                             "backend": "llm-awq"})"),
                    {"llm-awq's format"});
  check_unsupported(read(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "GEMV"})"),
                    {"version 'GEMV'"});
  check_unsupported(read(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": false})"),
                    {"zero_point: false"});
}

TEST_CASE("quantization_config: the spellings and corner cases exporters write") {
  // The scales' own dtype wins over the model's, in torch's spelling; a wrapper's dtype is read.
  check_four_bit(read(compressed_tensors(int_weights(R"("symmetric": true, "strategy": "group", "group_size": 32,
                                                         "scale_dtype": "torch.float16")")),
                      R"(, "torch_dtype": "bfloat16")"),
                 "int4-g32", DType::f16);
  auto wrapped = parse_hf_config(
      R"({"text_config": {"hidden_size": 64, "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2,
                          "dtype": "float16"},
          "quantization_config": )" +
          compressed_tensors(int_weights(R"("symmetric": false, "strategy": "group", "group_size": 64)")) + "}",
      "config.json");
  REQUIRE(wrapped.ok());
  check_four_bit(wrapped->quantization, "int4-asym-g64", DType::f16);
  // GPTQ act-order that permutes nothing: one group, or static groups (a trivial g_idx).
  check_four_bit(read(R"({"bits": 4, "group_size": -1, "desc_act": true, "sym": true, "quant_method": "gptq"})"),
                 "int4-channel", DType::f16);
  check_four_bit(read(R"({"bits": 4, "group_size": 128, "desc_act": true, "static_groups": true, "sym": true,
                          "quant_method": "gptq"})"),
                 "int4-g128", DType::f16);
  // AWQ checkpoints loaded by the exllama or ipex kernels are GEMM-packed.
  check_four_bit(read(R"({"quant_method": "awq", "bits": 4, "group_size": 128, "version": "exllama"})"),
                 "int4-asym-g128", DType::f16);
  // A mixed config: the INT4 group is read, the others are named for the caller to warn about.
  const CheckpointQuantization mixed = read(R"({"quant_method": "compressed-tensors", "format": "mixed-precision",
      "config_groups": {
        "group_0": {"format": "pack-quantized", "targets": ["re:.*self_attn.*"], "weights": {"num_bits": 4,
                    "type": "int", "symmetric": true, "strategy": "group", "group_size": 128}},
        "group_1": {"format": "nvfp4-pack-quantized", "targets": ["re:.*experts.*"], "weights": {"num_bits": 4,
                    "type": "float", "strategy": "tensor_group", "group_size": 16}}}})");
  check_four_bit(mixed, "int4-g128", DType::bf16);
  CHECK(mixed.skipped_groups.find("group_1: float 4-bit weights") != std::string::npos);
}

TEST_CASE("quantization_config: malformed fields are errors naming the field, kept beside a good shape") {
  auto message = [](const std::string& quantization) {
    auto direct = read_checkpoint_quantization(nlohmann::json::parse(config_with(quantization)), "config.json");
    REQUIRE_FALSE(direct.ok());
    CHECK(direct.status().code() == Code::invalid_argument);
    // The layer's shape still reads; the error waits for a caller that needs the format.
    auto shape = parse_hf_config(config_with(quantization), "config.json");
    REQUIRE(shape.ok());
    CHECK(shape->hidden == 1024);
    CHECK(shape->quantization.kind == Kind::invalid);
    CHECK(shape->quantization.reason == direct.status().message());
    return direct.status().message();
  };
  auto contains = [](const std::string& text, const char* needle) {
    CAPTURE(text);
    CHECK(text.find(needle) != std::string::npos);
  };
  contains(message("[1, 2]"), "config.json: quantization_config = [1,2]: expected an object");
  contains(message(R"({"bits": 4})"), "no 'quant_method'");
  contains(message(R"({"quant_method": 5})"), "'quant_method' = 5: expected a string");
  contains(message(R"({"quant_method": "gptq", "group_size": "128"})"), "'group_size' = \"128\": expected an integer");
  contains(message(R"({"quant_method": "gptq", "sym": "yes"})"), "'sym' = \"yes\": expected true or false");
  // Past INT64_MAX: read as a signed integer it would be -1, GPTQ's per-channel group.
  contains(message(R"({"quant_method": "gptq", "bits": 4, "group_size": 18446744073709551615, "desc_act": true})"),
           "'group_size' = 18446744073709551615: expected an integer of at most 9223372036854775807");
  contains(message(R"({"quant_method": "compressed-tensors", "config_groups": []})"),
           "'config_groups' = []: expected an object");
  contains(message(R"({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": 4}}})"),
           "config_groups.g.weights: 4: expected an object");
  contains(message(R"({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": "4"}}}})"),
           "config_groups.g.weights: 'num_bits' = \"4\": expected an integer");
}
