// The arithmetic of the GPU benchmark's memory floor (bench/gpu/gemm_cases.hpp), against
// numbers worked out by hand, so that what bench_gemm --dry-run prints and what a GPU run
// compares against can be trusted without a GPU.

#include <doctest/doctest.h>

#include <string>

#include "bench/gpu/gemm_cases.hpp"

using namespace moejit;
using namespace moejit::bench;

namespace {

const MoeModel& model(std::string_view name) {
  for (const MoeModel& m : kModels)
    if (m.name == name) return m;
  FAIL("no model " << std::string(name));
  return kModels[0];
}

const WeightChoice& format(std::string_view name) {
  for (const WeightChoice& f : kWeightChoices)
    if (f.name == name) return f;
  FAIL("no format " << std::string(name));
  return kWeightChoices[0];
}

}  // namespace

TEST_SUITE("device") {

TEST_CASE("bench cases: every model x format x projection x token count, in weight-sharing order") {
  // gpt-oss-120b (K = 2880 in both projections) has no INT4 g128 cases: 128 does not divide 2880.
  // The f16, W4A8 and W4A4 formats run at the 3 quick token counts in either mode, after every
  // bf16 case; W4A8 with scales per 128 k has INT4 cases only (3 models).
  constexpr std::size_t mxfp4_and_int4 = 3 * 2 + 1;  // (model, format) pairs of two formats
  const auto full = enumerate_cases(false);
  CHECK(full.size() == mxfp4_and_int4 * 2 * 11 + 2 * mxfp4_and_int4 * 2 * 3 + 4 * 2 * 3 + 3 * 2 * 3);
  const auto quick = enumerate_cases(true);
  CHECK(quick.size() == 3 * mxfp4_and_int4 * 2 * 3 + 4 * 2 * 3 + 3 * 2 * 3);
  bool beside_seen = false;
  for (const GemmCase& c : full) {
    CHECK(applicable(c));
    CHECK_FALSE((c.model->name == "gpt-oss-120b" && c.format->weight == WeightFormat::int4_sym));
    if (beside_bf16(*c.format)) CHECK((c.tokens == 1 || c.tokens == 32 || c.tokens == 1024));
    CHECK_FALSE((beside_seen && !beside_bf16(*c.format)));  // no bf16 case after the first other one
    beside_seen = beside_seen || beside_bf16(*c.format);
  }
  // Token counts increase within one (model, format, projection) run.
  CHECK(full[0].tokens == 1);
  CHECK(full[10].tokens == 4096);
  CHECK(full[11].projection == Projection::down);
  CHECK(full[0].model->name == "Ling-3.0-flash");
  CHECK(full[mxfp4_and_int4 * 2 * 11].format->name == "mxfp4_w4a8");
  CHECK(full[mxfp4_and_int4 * 2 * 11].model->name == "Ling-3.0-flash");
  CHECK(full.back().model->name == "gpt-oss-120b");
  CHECK(full.back().format->name == "mxfp4_f16");
}

TEST_CASE("bench floor: f16 activations move as many bytes as bf16 ones, and are set beside them") {
  const WeightChoice& f = format("mxfp4_f16");
  CHECK(f.bf16_twin == "mxfp4");
  CHECK(format("int4_g128_f16").bf16_twin == "int4_g128");
  CHECK(format("int4_g128_f16").scale == DType::f16);  // GPTQ's f16 scales
  CHECK(out_dtype(f) == DType::f16);
  CHECK(out_dtype(format("mxfp4")) == DType::bf16);
  CHECK(out_dtype(format("mxfp4_w4a8")) == DType::bf16);
  CHECK(twin_key(f) == "vs_bf16");
  CHECK(twin_key(format("mxfp4_w4a8")) == "vs_w4a16");
  CHECK_FALSE(quantized_act(f));
  CHECK(beside_bf16(f));
  CHECK_FALSE(beside_bf16(format("int4_g128")));
  CHECK(case_act_scale(f) == ActScale::none);
  for (Arch a : {Arch::sm_80, Arch::sm_90a, Arch::sm_121a}) CHECK(unsupported_on(f, a).empty());
  const GemmCase c{&model("DeepSeek-V3"), &f, Projection::gate_up, 1};
  const GemmCase twin{&model("DeepSeek-V3"), &format("mxfp4"), Projection::gate_up, 1};
  const CaseBytes b = case_bytes(c, 8), t = case_bytes(twin, 8);
  CHECK(b.weights == t.weights);
  CHECK(b.scales == t.scales);
  CHECK(b.act_in == 14336.0);   // 1 row x 7168 x 2
  CHECK(b.act_out == 32768.0);  // 8 pairs x 2048 x 2 (f16)
  const GemmCase down{&model("Qwen3-30B-A3B"), &format("int4_g128_f16"), Projection::down, 4};
  CHECK(expert_scale_bytes(down) == 24576);  // 2048 x 6 groups x 2 bytes (f16)
  CHECK(case_bytes(down, 20.5).act_in == 49152.0);  // 32 pairs x 768 x 2
}

TEST_CASE("bench floor: DeepSeek-V3 gate/up, MXFP4, one token") {
  const GemmCase c{&model("DeepSeek-V3"), &format("mxfp4"), Projection::gate_up, 1};
  CHECK(c.n() == 4096);
  CHECK(c.k() == 7168);
  CHECK(c.epilogue() == Epilogue::silu_and_mul);
  CHECK(expert_weight_bytes(c) == 14680064);  // 4096 x 7168 / 2
  CHECK(expert_scale_bytes(c) == 917504);     // 4096 x 224 groups x 1 byte
  CHECK(expert_bias_bytes(c) == 0);
  CHECK(expected_touched_experts(256, 8, 1) == doctest::Approx(8.0));
  const CaseBytes b = case_bytes(c, 8);
  CHECK(b.weights == 117440512.0);
  CHECK(b.scales == 7340032.0);
  CHECK(b.act_in == 14336.0);   // 1 row x 7168 x 2
  CHECK(b.act_out == 32768.0);  // 8 pairs x 2048 x 2
  CHECK(b.total() == 124827648.0);
  CHECK(floor_us(b, 4e12) == doctest::Approx(31.206912));
  CHECK(fraction_of_floor(31.206912, 62.413824) == doctest::Approx(0.5));
}

TEST_CASE("bench floor: W4A8 reads one byte per activation and a 4-byte scale per row") {
  const GemmCase c{&model("DeepSeek-V3"), &format("mxfp4_w4a8"), Projection::gate_up, 1};
  CHECK(format("mxfp4_w4a8").bf16_twin == "mxfp4");
  const CaseBytes b = case_bytes(c, 8);
  CHECK(b.weights == 117440512.0);  // the same packed weights and scales as W4A16
  CHECK(b.scales == 7340032.0);
  CHECK(b.act_in == 7168.0 + 4);    // 1 row x 7168 x 1 byte, and its f32 scale
  CHECK(b.act_out == 32768.0);      // bf16 out, as W4A16
  const GemmCase down{&model("Qwen3-30B-A3B"), &format("int4_g128_w4a8"), Projection::down, 4};
  CHECK(case_bytes(down, 20.5).act_in == 32.0 * (768 + 4));  // one row per pair
}

TEST_CASE("bench floor: W4A8 with scales per 128 k reads a 4-byte scale per row and 128 k") {
  const WeightChoice& f = format("int4_g128_w4a8_block128");
  CHECK(f.bf16_twin == "int4_g128");
  CHECK(f.act == DType::e4m3);
  CHECK(case_act_scale(f) == ActScale::block128);
  CHECK(case_act_scale(format("int4_g128_w4a8")) == ActScale::token);
  CHECK(twin_key(f) == "vs_w4a16");
  const GemmCase up{&model("DeepSeek-V3"), &f, Projection::gate_up, 2};
  const GemmCase token_up{&model("DeepSeek-V3"), &format("int4_g128_w4a8"), Projection::gate_up, 2};
  CHECK(case_bytes(up, 16).weights == case_bytes(token_up, 16).weights);  // the same packed weights
  CHECK(case_bytes(up, 16).act_in == 2.0 * (7168 + 56 * 4));               // 7168 / 128 scales per token
  const GemmCase down{&model("Qwen3-30B-A3B"), &f, Projection::down, 4};
  CHECK(case_bytes(down, 20.5).act_in == 32.0 * (768 + 6 * 4));            // one row per pair, 768 / 128 scales
}

TEST_CASE("bench floor: W4A4 reads half a byte per activation and an E8M0 byte per 32") {
  const WeightChoice& f = format("mxfp4_w4a4");
  CHECK(f.bf16_twin == "mxfp4");
  CHECK(case_act_scale(f) == ActScale::block32);
  CHECK(case_act_scale(format("mxfp4_w4a8")) == ActScale::token);
  CHECK(case_act_scale(format("mxfp4")) == ActScale::none);
  const GemmCase c{&model("DeepSeek-V3"), &f, Projection::gate_up, 1};
  const CaseBytes b = case_bytes(c, 8);
  CHECK(b.weights == 117440512.0);  // the same packed weights and scales as W4A16
  CHECK(b.scales == 7340032.0);
  CHECK(b.act_in == 3584.0 + 224);  // 7168 / 2 bytes of e2m1 pairs, 7168 / 32 scale bytes
  CHECK(b.act_out == 32768.0);
  const GemmCase down{&model("Qwen3-30B-A3B"), &f, Projection::down, 4};
  CHECK(case_bytes(down, 20.5).act_in == 32.0 * (384 + 24));  // one row per pair
}

TEST_CASE("bench formats say which targets cannot run them") {
  CHECK(unsupported_on(format("mxfp4_w4a4"), Arch::sm_90a) ==
        "W4A4 (e2m1 activations) needs the block-scaled mma of sm_120a / sm_121a; this target is sm_90a");
  CHECK(unsupported_on(format("mxfp4_w4a4"), Arch::sm_100a).find("this target is sm_100a") != std::string::npos);
  CHECK(unsupported_on(format("mxfp4_w4a4"), Arch::sm_120a).empty());
  CHECK(unsupported_on(format("mxfp4_w4a4"), Arch::sm_121a).empty());
  CHECK(unsupported_on(format("int4_g128_w4a8"), Arch::sm_86) ==
        "W4A8 (e4m3 activations) needs sm_89 or newer; this target is sm_86");
  CHECK(unsupported_on(format("int4_g128_w4a8_block128"), Arch::sm_80) ==
        "W4A8 (e4m3 activations) needs sm_89 or newer; this target is sm_80");
  for (Arch a : {Arch::sm_89, Arch::sm_90a, Arch::sm_100a, Arch::sm_120a})
    CHECK(unsupported_on(format("mxfp4_w4a8"), a).empty());
  for (Arch a : {Arch::sm_80, Arch::sm_90a, Arch::sm_121a}) {
    CHECK(unsupported_on(format("mxfp4"), a).empty());
    CHECK(unsupported_on(format("int4_g128"), a).empty());
  }
}

TEST_CASE("bench floor: Qwen3-30B-A3B down, INT4 g128, four tokens") {
  const GemmCase c{&model("Qwen3-30B-A3B"), &format("int4_g128"), Projection::down, 4};
  CHECK(c.n() == 2048);
  CHECK(c.k() == 768);
  CHECK(c.epilogue() == Epilogue::topk_weight);
  CHECK(c.pairs() == 32);
  CHECK(c.a_rows() == 32);  // one A row per pair
  CHECK(expert_weight_bytes(c) == 786432);  // 2048 x 768 / 2
  CHECK(expert_scale_bytes(c) == 24576);    // 2048 x 6 groups x 2 bytes (bf16)
  const CaseBytes b = case_bytes(c, 20.5);  // an average over routings may be fractional
  CHECK(b.weights == doctest::Approx(20.5 * 786432));
  CHECK(b.act_in == 49152.0);    // 32 x 768 x 2
  CHECK(b.act_out == 131072.0);  // 32 x 2048 x 2
}

TEST_CASE("bench floor: gpt-oss-120b gate/up carries its bias and touched experts saturate") {
  const GemmCase c{&model("gpt-oss-120b"), &format("mxfp4"), Projection::gate_up, 4096};
  CHECK(c.n() == 5760);
  CHECK(c.epilogue() == Epilogue::swiglu_oai);
  CHECK(c.out_columns() == 2880);
  CHECK(expert_bias_bytes(c) == 23040);  // 5760 f32
  CHECK(expected_touched_experts(128, 4, 4096) == doctest::Approx(128.0));
  CHECK(expected_touched_experts(128, 4, 2) == doctest::Approx(128 * (1 - (124.0 / 128) * (124.0 / 128))));
  const CaseBytes b = case_bytes(c, 128);
  CHECK(b.bias == 128.0 * 23040);
  CHECK(b.act_in == 4096.0 * 2880 * 2);
  CHECK(b.act_out == 4096.0 * 4 * 2880 * 2);
}

TEST_CASE("bench floor: the longer of the memory time and the compute time") {
  // DeepSeek-V3 down at 4096 tokens: 32768 pairs x 7168 x 2048 multiply-adds.
  const GemmCase c{&model("DeepSeek-V3"), &format("int4_g128"), Projection::down, 4096};
  CHECK(case_flops(c) == 2.0 * 32768 * 7168 * 2048);
  const CaseBytes b = case_bytes(c, 256);
  // 256 experts x (7168 x 2048 / 2 + 7168 x 16 groups x 2) bytes of weights and scales, A rows
  // 32768 x 2048 x 2, C rows 32768 x 7168 x 2.
  CHECK(b.total() == 256.0 * (7340032 + 229376) + 134217728.0 + 469762048.0);
  // 4 TB/s copy: 635.4 us of bytes; 800 TFLOP/s: 1202.6 us of FLOPs, so compute-bound.
  const Floor f = case_floor(b, case_flops(c), 4e12, 800e12);
  CHECK(f.memory_us == doctest::Approx(635.437056));
  CHECK(f.compute_us == doctest::Approx(1202.590843));
  CHECK(f.us() == f.compute_us);
  CHECK(f.bound() == "compute");
  // At 2000 TFLOP/s (481.0 us) the same bytes take longer: memory-bound.
  const Floor fast = case_floor(b, case_flops(c), 4e12, 2000e12);
  CHECK(fast.bound() == "memory");
  CHECK(fast.us() == doctest::Approx(635.437056));
  // No measured rate: the memory floor alone.
  const Floor none = case_floor(b, case_flops(c), 4e12, 0);
  CHECK(none.compute_us == 0);
  CHECK(none.us() == none.memory_us);
}

TEST_CASE("bench dense GEMM rate: 2 m n k FLOPs over the time") {
  // 8192^3 in 1.375 ms: 2 x 2^39 / 1.375e-3 = 799.6 TFLOP/s.
  CHECK(gemm_flops_per_s(8192, 8192, 8192, 1.375e-3) == doctest::Approx(2.0 * 549755813888.0 / 1.375e-3));
}

TEST_CASE("bench layer cases: both projections' weights, hidden states in and out") {
  const auto layers = enumerate_layer_cases(false);
  // gpt-oss-120b: MXFP4 only; f16 and W4A8 (7 model-format pairs each), W4A4 (4 models) and
  // W4A8 per 128 k (3 INT4 models) at 3 counts.
  CHECK(layers.size() == (3 * 2 + 1) * 11 + 2 * (3 * 2 + 1) * 3 + 4 * 3 + 3 * 3);
  const LayerCase c{&model("Ling-3.0-flash"), &format("mxfp4"), 2};
  CHECK(applicable(c));
  CHECK_FALSE(applicable(LayerCase{&model("gpt-oss-120b"), &format("int4_g128"), 2}));
  // Per expert: gate/up 1536 x 2560 / 2 bytes + 1536 x 80 scales; down 2560 x 768 / 2 + 2560 x 24.
  const CaseBytes b = layer_bytes(c, 15.5);
  CHECK(b.weights == doctest::Approx(15.5 * (1966080 + 983040)));
  CHECK(b.scales == doctest::Approx(15.5 * (122880 + 61440)));
  CHECK(b.bias == 0);
  CHECK(b.act_in == 2.0 * 2560 * 2);
  CHECK(b.act_out == 2.0 * 2560 * 2);
  // 16 pairs x (1536 x 2560 + 2560 x 768) multiply-adds.
  CHECK(layer_flops(c) == 2.0 * 16 * (1536.0 * 2560 + 2560.0 * 768));
}

TEST_CASE("bench copy bandwidth counts the read and the write") {
  // 1 GiB copied in 0.5 ms moves 2 GiB.
  CHECK(copy_bandwidth_bytes_per_s(1073741824.0, 0.5e-3) == doctest::Approx(4294967296000.0));
}

}  // TEST_SUITE
