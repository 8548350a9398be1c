// moejit_model_desc_from_hf_config: a model descriptor from a config.json as engines hold it,
// through the C ABI (and the C++ wrapper), then used for warm-up.

#include <doctest/doctest.h>

#include <cstring>
#include <string>

#include "moejit/moejit.h"
#include "c_api_helpers.hpp"
#include "moejit/moejit.hpp"

using namespace moejit::test;

namespace {

// A small MoE config in Kimi-K2's spelling with `quantization` as its quantization_config.
std::string kimi_like(const std::string& quantization) {
  return R"({"model_type": "kimi_k2", "hidden_size": 256, "moe_intermediate_size": 128, "n_routed_experts": 16,
             "num_experts_per_tok": 4, "torch_dtype": "bfloat16")" +
         (quantization.empty() ? std::string() : R"(, "quantization_config": )" + quantization) + "}";
}

const char* kInt4G32 = R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {
    "group_0": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "symmetric": true,
                "strategy": "group", "group_size": 32}}}})";

moejit_model_desc_t fresh() {
  moejit_model_desc_t m;
  moejit_model_desc_init(&m);
  m.tensor_parallel = 2;
  m.max_tokens = 64;
  return m;
}

moejit_status_t read(const std::string& text, moejit_model_desc_t& m) {
  return moejit_model_desc_from_hf_config(text.data(), text.size(), &m);
}

}  // namespace

TEST_CASE("C ABI: a model descriptor from config.json carries the checkpoint's formats") {
  moejit_model_desc_t m = fresh();
  REQUIRE_MESSAGE(read(kimi_like(kInt4G32), m) == MOEJIT_OK, moejit_last_error());
  CHECK(m.hidden == 256);
  CHECK(m.intermediate == 128);
  CHECK(m.experts == 16);
  CHECK(m.topk == 4);
  CHECK(m.activation == MOEJIT_EPILOGUE_SILU_AND_MUL);
  CHECK(m.format == MOEJIT_WEIGHT_INT4_SYM);
  CHECK(m.group_size == 32);
  CHECK(m.scale_dtype == MOEJIT_DTYPE_BF16);
  CHECK(m.act_dtype == MOEJIT_DTYPE_BF16);
  CHECK(m.tensor_parallel == 2);  // the caller's fields stay
  CHECK(m.max_tokens == 64);

  // W4AFP8: FP8 activations with per-128 scales.
  m = fresh();
  REQUIRE(read(kimi_like(R"({"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {
      "group_0": {"weights": {"num_bits": 4, "type": "int", "symmetric": false, "strategy": "group",
                  "group_size": 128},
                  "input_activations": {"num_bits": 8, "type": "float", "strategy": "group", "group_size": 128}}}})"),
               m) == MOEJIT_OK);
  CHECK(m.format == MOEJIT_WEIGHT_INT4_ASYM);
  CHECK(m.act_dtype == MOEJIT_DTYPE_E4M3);
  CHECK(m.act_scale == MOEJIT_ACT_SCALE_BLOCK128);

  // gpt-oss: MXFP4 and the clamped SwiGLU; the text need not end in NUL (what follows is ignored).
  const std::string gpt_oss = R"({"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
      "num_local_experts": 128, "num_experts_per_tok": 4, "quantization_config": {"quant_method": "mxfp4"}})";
  const std::string padded = gpt_oss + "\xff\xfe garbage past the length";
  m = fresh();
  REQUIRE(moejit_model_desc_from_hf_config(padded.data(), gpt_oss.size(), &m) == MOEJIT_OK);
  CHECK(m.format == MOEJIT_WEIGHT_MXFP4);
  CHECK(m.group_size == 32);
  CHECK(m.scale_dtype == MOEJIT_DTYPE_E8M0);
  CHECK(m.activation == MOEJIT_EPILOGUE_SWIGLU_OAI);

  // No quantization_config: the caller's format stays; unset, it is MXFP4.
  m = fresh();
  m.format = MOEJIT_WEIGHT_INT4_ASYM;
  m.group_size = 64;
  m.scale_dtype = MOEJIT_DTYPE_F16;
  REQUIRE(read(kimi_like(""), m) == MOEJIT_OK);
  CHECK(m.format == MOEJIT_WEIGHT_INT4_ASYM);
  CHECK(m.group_size == 64);
  CHECK(m.scale_dtype == MOEJIT_DTYPE_F16);
  m = fresh();
  REQUIRE(read(kimi_like(""), m) == MOEJIT_OK);
  CHECK(m.format == MOEJIT_WEIGHT_MXFP4);
  CHECK(m.scale_dtype == MOEJIT_DTYPE_E8M0);

  // A mixed export: the INT4 group is read, and the groups passed over are warned about.
  {
    moejit::test::LogCapture logs;
    m = fresh();
    REQUIRE(read(kimi_like(R"({"quant_method": "compressed-tensors", "format": "mixed-precision", "config_groups": {
        "attn": {"format": "pack-quantized", "weights": {"num_bits": 4, "type": "int", "symmetric": true,
                 "strategy": "group", "group_size": 128}},
        "experts": {"format": "nvfp4-pack-quantized", "weights": {"num_bits": 4, "type": "float",
                    "strategy": "tensor_group", "group_size": 16}}}})"),
                 m) == MOEJIT_OK);
    CHECK(m.format == MOEJIT_WEIGHT_INT4_SYM);
    CHECK(logs.count_containing("config groups moejit cannot run (experts: float 4-bit weights)") == 1);
  }

  // The C++ wrapper.
  const moejit_model_desc_t wrapped = moejit::model_from_hf_config(kimi_like(kInt4G32));
  CHECK(wrapped.format == MOEJIT_WEIGHT_INT4_SYM);
  CHECK(wrapped.max_tokens == 8192);
  CHECK_THROWS_AS(moejit::model_from_hf_config("{}"), moejit::Error);
}

TEST_CASE("C ABI: config.json refusals say why and leave the descriptor alone") {
  moejit_model_desc_t m = fresh();
  const moejit_model_desc_t before = m;
  auto untouched = [&] { CHECK(std::memcmp(&m, &before, sizeof m) == 0); };
  expect_error(read(kimi_like(R"({"quant_method": "fp8", "weight_block_size": [128, 128]})"), m),
              MOEJIT_ERROR_UNSUPPORTED, {"quantization_config 'fp8'", "FP8 weights"});
  untouched();
  expect_error(read(kimi_like(R"({"bits": 4, "group_size": 128, "desc_act": true, "quant_method": "gptq"})"), m),
              MOEJIT_ERROR_UNSUPPORTED, {"act-order"});
  untouched();
  expect_error(read(kimi_like(R"({"quant_method": "gptq", "group_size": "128"})"), m), MOEJIT_ERROR_INVALID_ARGUMENT,
              {"'group_size' = \"128\": expected an integer"});
  untouched();
  expect_error(read(R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008})", m),
              MOEJIT_ERROR_INVALID_ARGUMENT, {"config_json", "expert count"});
  expect_error(read("{not json", m), MOEJIT_ERROR_INVALID_ARGUMENT, {"config_json", "not valid JSON"});
  untouched();
  // Experts with another activation than moejit's (Grok-1's GELU): not described as SiLU.
  const char* grok = R"({"model_type": "grok-1", "hidden_size": 6144, "intermediate_size": 32768,
    "num_local_experts": 8, "num_experts_per_tok": 2, "hidden_act": "gelu"})";
  expect_error(read(grok, m), MOEJIT_ERROR_UNSUPPORTED, {"'hidden_act' = \"gelu\"", "silu"});
  untouched();
  expect_error(read(R"({"hidden_size": 64, "intermediate_size": 64, "num_experts": 4, "num_experts_per_tok": 2,
    "hidden_activation": 3})", m),
               MOEJIT_ERROR_INVALID_ARGUMENT, {"'hidden_activation' = 3", "expected a string"});
  untouched();
  // gpt-oss's SwiGLU is chosen by its model_type, whatever its hidden_act says.
  const char* gpt_oss = R"({"model_type": "gpt_oss", "hidden_size": 2880, "intermediate_size": 2880,
    "num_local_experts": 128, "num_experts_per_tok": 4, "hidden_act": "silu"})";
  REQUIRE(read(gpt_oss, m) == MOEJIT_OK);
  CHECK(m.activation == MOEJIT_EPILOGUE_SWIGLU_OAI);
  m = before;
  expect_error(moejit_model_desc_from_hf_config(nullptr, 3, &m), MOEJIT_ERROR_INVALID_ARGUMENT, {"'config_json' is null"});
  const std::string ok = kimi_like(kInt4G32);
  expect_error(moejit_model_desc_from_hf_config(ok.data(), ok.size(), nullptr), MOEJIT_ERROR_INVALID_ARGUMENT,
              {"'model'"});
  moejit_model_desc_t small = fresh();
  small.struct_size = 8;
  expect_error(moejit_model_desc_from_hf_config(ok.data(), ok.size(), &small), MOEJIT_ERROR_INVALID_ARGUMENT,
              {"struct_size = 8"});
}

TEST_CASE("C ABI: warm-up from a config.json's descriptor builds the checkpoint's kernels") {
  TempDir dir;
  Context c(dir, MOEJIT_BACKEND_DEVICE);  // no GPU needed to warm the store
  moejit_model_desc_t m;
  moejit_model_desc_init(&m);
  m.max_tokens = 1;
  REQUIRE(read(kimi_like(kInt4G32), m) == MOEJIT_OK);
  const char* archs[] = {"sm_90a"};
  CHECK_MESSAGE(moejit_warmup(c.ctx, &m, archs, 1, nullptr, nullptr) == MOEJIT_OK, moejit_last_error());
  moejit_stats_t stats;
  moejit_stats_init(&stats);
  REQUIRE(moejit_get_stats(c.ctx, &stats) == MOEJIT_OK);
  CHECK(stats.compiles >= 4);  // align, both GEMMs, reduce
}
