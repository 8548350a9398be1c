// Every refusal of the C ABI, as an engine would meet it: one bad argument at a time on an
// otherwise valid call, through moejit.h alone. Each must return the right status and leave
// moejit_last_error() naming the argument (its C name, as the caller spells it) and saying what
// was expected, and must not touch the caller's output buffers.

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "c_api_helpers.hpp"
#include "moejit/moejit.h"
#include "test_support.hpp"

namespace moejit::test {
namespace {

struct Refusal {
  const char* what;                  // the mistake, for the report
  moejit_status_t status;            // the status it must return
  std::vector<std::string> naming;   // substrings the message must hold: the argument, the value...
  std::function<moejit_status_t()> call;
};

// Checks one refusal: status, message names the argument and says "expected".
void check_refusal(const Refusal& r) {
  const std::string what = r.what;
  CAPTURE(what);
  const moejit_status_t got = r.call();
  const std::string message = moejit_last_error();
  CAPTURE(message);
  CHECK_MESSAGE(got == r.status, "status " << std::string(moejit_status_name(got)) << ", expected "
                                          << std::string(moejit_status_name(r.status)));
  for (const auto& needle : r.naming) CHECK_MESSAGE(message.find(needle) != std::string::npos, "missing '" << needle << "'");
  CHECK_MESSAGE(message.find("expected") != std::string::npos, "the message does not say what was expected");
}

// Small MXFP4 layer in vLLM's layout, random codes and scales (E experts, H hidden, I inter).
struct Layer {
  static constexpr std::uint32_t E = 4, H = 64, I = 32;
  std::vector<u8> w13_blocks, w13_scales, w2_blocks, w2_scales;
  std::unique_ptr<Packed> w13, w2;

  Layer(moejit_context_t ctx, std::mt19937& rng) {
    auto fill = [&](std::vector<u8>& v, std::size_t n, int lo, int hi) {
      std::uniform_int_distribution<int> d(lo, hi);
      v.resize(n);
      for (auto& b : v) b = static_cast<u8>(d(rng));
    };
    fill(w13_blocks, std::size_t{E} * 2 * I * H / 2, 0, 255);
    fill(w13_scales, std::size_t{E} * 2 * I * H / 32, 120, 128);
    fill(w2_blocks, std::size_t{E} * H * I / 2, 0, 255);
    fill(w2_scales, std::size_t{E} * H * I / 32, 120, 128);
    w13 = pack(ctx, desc(w13_blocks, w13_scales, 2 * I, H, MOEJIT_ROWS_CONCATENATED));
    w2 = pack(ctx, desc(w2_blocks, w2_scales, H, I, MOEJIT_ROWS_PLAIN));
  }

  static moejit_weights_desc_t desc(const std::vector<u8>& blocks, const std::vector<u8>& scales, std::uint32_t n,
                                    std::uint32_t k, moejit_row_order_t rows) {
    moejit_weights_desc_t d;
    moejit_weights_desc_init(&d);
    d.format = MOEJIT_WEIGHT_MXFP4;
    d.group_size = 32;
    d.scale_dtype = MOEJIT_DTYPE_E8M0;
    d.experts = E;
    d.n = n;
    d.k = k;
    d.source = MOEJIT_SOURCE_VLLM_MXFP4;
    d.rows = rows;
    d.qweight = blocks.data();
    d.scales = scales.data();
    return d;
  }
  moejit_weights_desc_t w13_desc() const { return desc(w13_blocks, w13_scales, 2 * I, H, MOEJIT_ROWS_CONCATENATED); }
};

// A valid fused call for T tokens, with its buffers; cases change one thing.
struct FusedCall {
  static constexpr std::int32_t T = 3;
  static constexpr std::uint32_t K = 2;
  Buffer hidden{T * Layer::H * 2}, out{T * Layer::H * 2}, ids{T * K * 4}, weights{T * K * 4}, map{64 * 4},
      workspace{1 << 22};
  moejit_fused_moe_args_t args;

  FusedCall(const Layer& layer, std::mt19937& rng) {
    std::uniform_int_distribution<int> expert(0, Layer::E - 1);
    for (std::size_t i = 0; i < T * K; ++i) {
      static_cast<std::int32_t*>(ids.data)[i] = expert(rng);
      static_cast<float*>(weights.data)[i] = 0.5f;
    }
    random_activations(hidden.data, T * Layer::H, DType::bf16, rng);
    moejit_fused_moe_args_init(&args);
    args.w13 = &layer.w13->w;
    args.w2 = &layer.w2->w;
    args.act_dtype = MOEJIT_DTYPE_BF16;
    args.out_dtype = MOEJIT_DTYPE_BF16;
    args.activation = MOEJIT_EPILOGUE_SILU_AND_MUL;
    args.tokens = T;
    args.topk = K;
    args.hidden = hidden.data;
    args.topk_ids = static_cast<const std::int32_t*>(ids.data);
    args.topk_weights = static_cast<const float*>(weights.data);
    args.output = out.data;
    args.workspace = workspace.data;
    args.workspace_bytes = workspace.size;
  }
};

moejit_model_desc_t small_model() { return mxfp4_model(Layer::H, Layer::I, Layer::E, 2, 4); }

TEST_CASE("context refusals name the argument and the expected value") {
  TempDir dir;
  const std::string cache = dir / "store";
  auto options = [&] {
    moejit_context_options_t o;
    moejit_context_options_init(&o);
    o.backend = MOEJIT_BACKEND_HOST;
    o.cache_dir = cache.c_str();
    return o;
  };
  moejit_context_t ctx = nullptr;
  const std::vector<Refusal> refusals = {
      {"no context out", MOEJIT_ERROR_INVALID_ARGUMENT, {"'context'"},
       [&] {
         auto o = options();
         return moejit_context_create(&o, nullptr);
       }},
      {"struct_size from another version", MOEJIT_ERROR_INVALID_ARGUMENT, {"'options", "struct_size"},
       [&] {
         auto o = options();
         o.struct_size = 12;
         return moejit_context_create(&o, &ctx);
       }},
      {"unknown backend", MOEJIT_ERROR_INVALID_ARGUMENT, {"backend", "7"},
       [&] {
         auto o = options();
         o.backend = static_cast<moejit_backend_t>(7);
         return moejit_context_create(&o, &ctx);
       }},
      {"read-only dirs counted but null", MOEJIT_ERROR_INVALID_ARGUMENT, {"read_only_dirs"},
       [&] {
         auto o = options();
         o.read_only_dir_count = 2;
         return moejit_context_create(&o, &ctx);
       }},
      {"negative device", MOEJIT_ERROR_INVALID_ARGUMENT, {"device_ordinal", "-3"},
       [&] {
         auto o = options();
         o.backend = MOEJIT_BACKEND_DEVICE;
         o.device_ordinal = -3;
         return moejit_context_create(&o, &ctx);
       }},
      {"null context to backend query", MOEJIT_ERROR_INVALID_ARGUMENT, {"'context'"},
       [&] {
         moejit_backend_t b;
         return moejit_context_backend(nullptr, &b, nullptr);
       }},
      {"null stats", MOEJIT_ERROR_INVALID_ARGUMENT, {"'context'"},
       [&] {
         moejit_stats_t s;
         moejit_stats_init(&s);
         return moejit_get_stats(nullptr, &s);
       }},
  };
  for (const auto& r : refusals) check_refusal(r);
  CHECK(ctx == nullptr);
}

// A description changed to symmetric INT4 plain codes with bf16 scales (group and shape kept).
void as_int4_codes(moejit_weights_desc_t& d) {
  d.format = MOEJIT_WEIGHT_INT4_SYM;
  d.scale_dtype = MOEJIT_DTYPE_BF16;
  d.source = MOEJIT_SOURCE_PLAIN_CODES;
}

TEST_CASE("weight packing refusals name the argument and the expected value") {
  TempDir dir;
  Context c(dir);
  std::mt19937 rng(std::random_device{}());
  Layer layer(c.ctx, rng);
  moejit_packed_sizes_t sizes;
  auto size_with = [&](auto change) {
    return [&, change] {
      moejit_weights_desc_t d = layer.w13_desc();
      change(d);
      return moejit_packed_weights_size(c.ctx, &d, &sizes);
    };
  };
  const std::vector<Refusal> refusals = {
      {"no description", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc'"},
       [&] { return moejit_packed_weights_size(c.ctx, nullptr, &sizes); }},
      {"no sizes out", MOEJIT_ERROR_INVALID_ARGUMENT, {"'sizes'"},
       [&] {
         auto d = layer.w13_desc();
         return moejit_packed_weights_size(c.ctx, &d, nullptr);
       }},
      {"unknown format", MOEJIT_ERROR_INVALID_ARGUMENT, {"format", "9"},
       size_with([](auto& d) { d.format = static_cast<moejit_weight_format_t>(9); })},
      {"MXFP4 group 64", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->group_size' = 64", "32 for MXFP4"},
       size_with([](auto& d) { d.group_size = 64; })},
      {"MXFP4 with bf16 scales", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->scale_dtype' = bf16", "E8M0 for MXFP4"},
       size_with([](auto& d) { d.scale_dtype = MOEJIT_DTYPE_BF16; })},
      {"n not a multiple of 32", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->n' = 48", "multiple of 32"}, size_with([](auto& d) { d.n = 48; })},
      {"k not a multiple of 32", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->k' = 40", "multiple of"}, size_with([](auto& d) { d.k = 40; })},
      {"no experts", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->experts' = 0", "1 to 4096"}, size_with([](auto& d) { d.experts = 0; })},
      {"unknown source", MOEJIT_ERROR_INVALID_ARGUMENT, {"source", "9"},
       size_with([](auto& d) { d.source = static_cast<moejit_weight_source_t>(9); })},
      {"unknown row order", MOEJIT_ERROR_INVALID_ARGUMENT, {"rows", "5"},
       size_with([](auto& d) { d.rows = static_cast<moejit_row_order_t>(5); })},
      {"INT4 group 48", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->group_size' = 48", "32, 64 or 128 for INT4"},
       size_with([](auto& d) {
         as_int4_codes(d);
         d.group_size = 48;
       })},
      {"MXFP4 group 0 (per-channel is INT4's)", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->group_size' = 0", "32 for MXFP4"},
       size_with([](auto& d) { d.group_size = 0; })},
      {"INT4 with E8M0 scales", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->scale_dtype' = e8m0", "BF16 or F16 for INT4"},
       size_with([](auto& d) {
         d.format = MOEJIT_WEIGHT_INT4_SYM;
         d.source = MOEJIT_SOURCE_PLAIN_CODES;
       })},
      {"INT4 group not dividing k", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->k' = 192", "group_size = 128"},
       size_with([](auto& d) {
         as_int4_codes(d);
         d.group_size = 128;
         d.k = 192;
       })},
      // Shapes no kernel addresses are refused when sized, before their byte counts (which would
      // wrap 64 bits: E x N x K here is about 2^95) are computed; sizing needs no tensors.
      {"experts past one launch", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->experts' = 4097", "1 to 4096"},
       size_with([](auto& d) { d.experts = 4097; })},
      {"wrapping shape, no tensors", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->experts' = 4294967295"},
       size_with([](auto& d) {
         d.experts = 0xffffffffu, d.n = d.k = 0xffffffe0u;
         d.qweight = d.scales = nullptr;
       })},
      {"n past 2^20", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->n' = 1048608", "at most 1048576"},
       size_with([](auto& d) { d.n = (1u << 20) + 32; })},
      {"one expert past 2^31 bytes", MOEJIT_ERROR_INVALID_ARGUMENT,
       {"'desc->n' = 1048576", "'desc->k' = 8192", "4294967296 bytes", "at most 2147483648"},
       size_with([](auto& d) { d.n = 1u << 20, d.k = 8192; })},
      {"E2M1 activations with INT4 weights", MOEJIT_ERROR_INVALID_ARGUMENT, {"a4 (e2m1 activations)", "int4_sym", "mxfp4"},
       size_with([](auto& d) {
         as_int4_codes(d);
         d.group_size = 32;
         d.act_dtype = MOEJIT_DTYPE_E2M1;
       })},
      {"E2M1 activations with k not a multiple of 64", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->k' = 96", "multiple of 64"},
       size_with([](auto& d) {
         d.k = 96;
         d.act_dtype = MOEJIT_DTYPE_E2M1;
       })},
      {"zero points for a format without them", MOEJIT_ERROR_INVALID_ARGUMENT, {"zeros"},
       size_with([&](auto& d) { d.zeros = layer.w13_scales.data(); })},
      {"compressed-tensors MXFP4", MOEJIT_ERROR_INVALID_ARGUMENT,
       {"'desc->format' = mxfp4", "compressed_tensors", "int4_sym"},
       size_with([](auto& d) { d.source = MOEJIT_SOURCE_COMPRESSED_TENSORS; })},
      {"GPTQ MXFP4", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->format' = mxfp4", "GPTQ", "int4_sym or int4_asym"},
       size_with([](auto& d) { d.source = MOEJIT_SOURCE_GPTQ_V2; })},
      {"vLLM MXFP4 layout with INT4", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->format' = int4_sym", "vllm_mxfp4", "expected mxfp4"},
       size_with([](auto& d) {
         d.format = MOEJIT_WEIGHT_INT4_SYM;
         d.scale_dtype = MOEJIT_DTYPE_BF16;
       })},
      {"AWQ symmetric", MOEJIT_ERROR_INVALID_ARGUMENT, {"'desc->format' = int4_sym", "awq", "int4_asym"},
       size_with([](auto& d) {
         d.format = MOEJIT_WEIGHT_INT4_SYM;
         d.scale_dtype = MOEJIT_DTYPE_BF16;
         d.source = MOEJIT_SOURCE_AWQ;
       })},
      {"compressed-tensors asymmetric without zero points", MOEJIT_ERROR_INVALID_ARGUMENT,
       {"'zeros' is null", "weight_zero_point"},
       size_with([](auto& d) {
         d.format = MOEJIT_WEIGHT_INT4_ASYM;
         d.scale_dtype = MOEJIT_DTYPE_BF16;
         d.source = MOEJIT_SOURCE_COMPRESSED_TENSORS;
       })},
      {"compressed-tensors symmetric with zero points", MOEJIT_ERROR_INVALID_ARGUMENT, {"'zeros' is set", "int4_sym"},
       size_with([&](auto& d) {
         d.format = MOEJIT_WEIGHT_INT4_SYM;
         d.scale_dtype = MOEJIT_DTYPE_BF16;
         d.source = MOEJIT_SOURCE_COMPRESSED_TENSORS;
         d.zeros = layer.w13_scales.data();
       })},
  };
  for (const auto& r : refusals) check_refusal(r);

  // Sizing reads no tensor: the sizes of a description without data pointers are the same.
  moejit_weights_desc_t d = layer.w13_desc();
  moejit_packed_sizes_t with_data{}, without_data{};
  REQUIRE(moejit_packed_weights_size(c.ctx, &d, &with_data) == MOEJIT_OK);
  d.qweight = d.scales = nullptr;
  REQUIRE(moejit_packed_weights_size(c.ctx, &d, &without_data) == MOEJIT_OK);
  CHECK(std::memcmp(&with_data, &without_data, sizeof with_data) == 0);
  CHECK(with_data.qweight_bytes == std::uint64_t{Layer::E} * 2 * Layer::I * Layer::H / 2);

  // Packing into buffers that do not fit: nothing written past them, and the message names the
  // buffer and its size.
  auto pack_with = [&](auto change) {
    return [&, change] {
      moejit_weights_desc_t d = layer.w13_desc();
      moejit_packed_weights_t p = layer.w13->w;
      change(p);
      return moejit_pack_weights(c.ctx, &d, &p, nullptr);
    };
  };
  const std::vector<Refusal> pack_refusals = {
      {"no packed out", MOEJIT_ERROR_INVALID_ARGUMENT, {"'packed'"},
       [&] {
         auto d = layer.w13_desc();
         return moejit_pack_weights(c.ctx, &d, nullptr, nullptr);
       }},
      {"qweight buffer too small", MOEJIT_ERROR_INVALID_ARGUMENT, {"qweight_bytes"},
       pack_with([](auto& p) { p.qweight_bytes -= 16; })},
      {"scales buffer too small", MOEJIT_ERROR_INVALID_ARGUMENT, {"scales_bytes"},
       pack_with([](auto& p) { p.scales_bytes = 1; })},
      {"qweight misaligned", MOEJIT_ERROR_INVALID_ARGUMENT, {"qweight", "16-byte"},
       pack_with([](auto& p) { p.qweight = static_cast<char*>(p.qweight) + 4; })},
      {"qweight null", MOEJIT_ERROR_INVALID_ARGUMENT, {"qweight"}, pack_with([](auto& p) { p.qweight = nullptr; })},
  };
  for (const auto& r : pack_refusals) check_refusal(r);
}

TEST_CASE("grouped GEMM refusals name the argument and the expected value") {
  TempDir dir;
  Context c(dir);
  std::mt19937 rng(std::random_device{}());
  Layer layer(c.ctx, rng);
  Buffer a{64 * Layer::H * 2}, out{64 * 2 * Layer::I * 4}, offsets{64};
  std::memset(offsets.data, 0, offsets.size);
  auto valid = [&] {
    moejit_grouped_gemm_args_t g;
    moejit_grouped_gemm_args_init(&g);
    g.weights = &layer.w2->w;
    g.act_dtype = MOEJIT_DTYPE_BF16;
    g.out_dtype = MOEJIT_DTYPE_BF16;
    g.layout = MOEJIT_LAYOUT_CONTIGUOUS;
    g.epilogue = MOEJIT_EPILOGUE_NONE;
    g.m = 8;
    g.a = a.data;
    g.lda = Layer::I;
    g.c = out.data;
    g.ldc = Layer::H;
    g.expert_offsets = static_cast<const std::int32_t*>(offsets.data);
    return g;
  };
  auto with = [&](auto change) {
    return [&, change] {
      moejit_grouped_gemm_args_t g = valid();
      change(g);
      return moejit_grouped_gemm(c.ctx, &g, nullptr);
    };
  };
  std::uint64_t bytes = 0;
  moejit_packed_weights_t bad_weights{};  // a copy of w2's descriptor with one field changed
  const std::vector<Refusal> refusals = {
      {"no args", MOEJIT_ERROR_INVALID_ARGUMENT, {"'args'"}, [&] { return moejit_grouped_gemm(c.ctx, nullptr, nullptr); }},
      {"no context", MOEJIT_ERROR_INVALID_ARGUMENT, {"'context'"},
       [&] {
         auto g = valid();
         return moejit_grouped_gemm(nullptr, &g, nullptr);
       }},
      {"no weights", MOEJIT_ERROR_INVALID_ARGUMENT, {"weights"}, with([](auto& g) { g.weights = nullptr; })},
      {"f32 activations", MOEJIT_ERROR_INVALID_ARGUMENT, {"act_dtype", "f32"},
       with([](auto& g) { g.act_dtype = MOEJIT_DTYPE_F32; })},
      {"unknown out dtype", MOEJIT_ERROR_INVALID_ARGUMENT, {"out_dtype", "9"},
       with([](auto& g) { g.out_dtype = static_cast<moejit_dtype_t>(9); })},
      {"no layout", MOEJIT_ERROR_INVALID_ARGUMENT, {"layout", "0"},
       with([](auto& g) { g.layout = static_cast<moejit_layout_t>(0); })},
      {"unknown epilogue", MOEJIT_ERROR_INVALID_ARGUMENT, {"epilogue", "7"},
       with([](auto& g) { g.epilogue = static_cast<moejit_epilogue_t>(7); })},
      {"act-and-mul on plain rows", MOEJIT_ERROR_INVALID_ARGUMENT, {"epilogue", "silu_and_mul"},
       with([](auto& g) { g.epilogue = MOEJIT_EPILOGUE_SILU_AND_MUL; })},
      {"negative m", MOEJIT_ERROR_INVALID_ARGUMENT, {"'args->m' = -1"}, with([](auto& g) { g.m = -1; })},
      {"no activations", MOEJIT_ERROR_INVALID_ARGUMENT, {"'a'"}, with([](auto& g) { g.a = nullptr; })},
      {"misaligned activations", MOEJIT_ERROR_INVALID_ARGUMENT, {"'a'", "16-byte"},
       with([&](auto& g) { g.a = static_cast<const char*>(a.data) + 8; })},
      {"lda below k", MOEJIT_ERROR_INVALID_ARGUMENT, {"'lda'", "16"}, with([](auto& g) { g.lda = 16; })},
      {"ldc below n", MOEJIT_ERROR_INVALID_ARGUMENT, {"'ldc'", "10"}, with([](auto& g) { g.ldc = 10; })},
      {"no output", MOEJIT_ERROR_INVALID_ARGUMENT, {"'c'"}, with([](auto& g) { g.c = nullptr; })},
      {"contiguous without offsets", MOEJIT_ERROR_INVALID_ARGUMENT, {"expert_offsets"},
       with([](auto& g) { g.expert_offsets = nullptr; })},
      {"masked without counts", MOEJIT_ERROR_INVALID_ARGUMENT, {"expert_counts"},
       with([](auto& g) { g.layout = MOEJIT_LAYOUT_MASKED; })},
      {"indexed with an odd block size", MOEJIT_ERROR_INVALID_ARGUMENT, {"block_size", "24"},
       with([](auto& g) {
         g.layout = MOEJIT_LAYOUT_INDEXED;
         g.block_size = 24;
       })},
      {"topk weight without the indexed layout", MOEJIT_ERROR_INVALID_ARGUMENT, {"epilogue", "topk_weight"},
       with([](auto& g) { g.epilogue = MOEJIT_EPILOGUE_TOPK_WEIGHT; })},
      {"weights with an unknown act_dtype", MOEJIT_ERROR_INVALID_ARGUMENT, {"'args->weights->act_dtype' = 9", "1..6"},
       with([&](auto& g) {
         bad_weights = layer.w2->w;
         bad_weights.act_dtype = static_cast<moejit_dtype_t>(9);
         g.weights = &bad_weights;
       })},
      {"weights with an unknown scale_dtype", MOEJIT_ERROR_INVALID_ARGUMENT, {"'args->weights->scale_dtype' = 0"},
       with([&](auto& g) {
         bad_weights = layer.w2->w;
         bad_weights.scale_dtype = static_cast<moejit_dtype_t>(0);
         g.weights = &bad_weights;
       })},
      {"weights with an unknown format", MOEJIT_ERROR_INVALID_ARGUMENT, {"'args->weights->format' = 7", "MXFP4, INT4_SYM"},
       with([&](auto& g) {
         bad_weights = layer.w2->w;
         bad_weights.format = static_cast<moejit_weight_format_t>(7);
         g.weights = &bad_weights;
       })},
      {"no rows, with an epilogue the layout cannot run", MOEJIT_ERROR_INVALID_ARGUMENT, {"topk_weight", "indexed"},
       with([](auto& g) {
         g.m = 0;
         g.epilogue = MOEJIT_EPILOGUE_TOPK_WEIGHT;
       })},
      {"lda whose last row's offset passes 2^60", MOEJIT_ERROR_INVALID_ARGUMENT,
       {"'args->lda' = 288230376151711744", "at most 144115188075855872", "8 rows of A"},
       with([](auto& g) { g.lda = std::int64_t{1} << 58; })},
      {"ldc whose last row's offset passes 2^60", MOEJIT_ERROR_INVALID_ARGUMENT, {"'args->ldc' = 4611686018427387904"},
       with([](auto& g) { g.ldc = std::int64_t{1} << 62; })},
      {"masked rows past 32-bit row numbers", MOEJIT_ERROR_INVALID_ARGUMENT,
       {"'args->m' = 1073741823", "4 experts", "at most 2^31 - 1"},
       with([](auto& g) {
         g.layout = MOEJIT_LAYOUT_MASKED;
         g.m = 1073741823;
       })},
      {"masked rows past 32-bit row numbers, sized", MOEJIT_ERROR_INVALID_ARGUMENT, {"'args->m' = 1073741823"},
       [&] {
         auto g = valid();
         g.layout = MOEJIT_LAYOUT_MASKED;
         g.m = 1073741823;
         return moejit_grouped_gemm_workspace_size(c.ctx, &g, &bytes);
       }},
      {"scale slabs without block128 scales", MOEJIT_ERROR_INVALID_ARGUMENT,
       {"'args->a_scale_expert_stride' = 64 with act_scale none", "expected 0"},
       with([](auto& g) {
         g.layout = MOEJIT_LAYOUT_MASKED;
         g.a_scale_ld = 8;
         g.a_scale_expert_stride = 64;
       })},
      {"column-major scales without block128 scales", MOEJIT_ERROR_INVALID_ARGUMENT,
       {"'args->a_scale_k_stride' = 8 with act_scale none", "expected 0 or 1"},
       with([](auto& g) { g.a_scale_k_stride = 8; })},
      {"workspace size query without bytes out", MOEJIT_ERROR_INVALID_ARGUMENT, {"'bytes'"},
       [&] {
         auto g = valid();
         return moejit_grouped_gemm_workspace_size(c.ctx, &g, nullptr);
       }},
      {"workspace size query of bad args", MOEJIT_ERROR_INVALID_ARGUMENT, {"act_dtype"},
       [&] {
         auto g = valid();
         g.act_dtype = MOEJIT_DTYPE_E8M0;
         return moejit_grouped_gemm_workspace_size(c.ctx, &g, &bytes);
       }},
  };
  std::memset(out.data, 0x5a, out.size);
  for (const auto& r : refusals) check_refusal(r);
  for (std::size_t i = 0; i < out.size; ++i)
    if (static_cast<const u8*>(out.data)[i] != 0x5a) FAIL("a refused call wrote output byte " << i);
}

TEST_CASE("fused MoE refusals name the argument and the expected value") {
  TempDir dir;
  Context c(dir);
  std::mt19937 rng(std::random_device{}());
  Layer layer(c.ctx, rng);
  FusedCall base(layer, rng);
  auto with = [&](auto change) {
    return [&, change] {
      moejit_fused_moe_args_t a = base.args;
      change(a);
      return moejit_fused_moe(c.ctx, &a, nullptr);
    };
  };
  auto size_with = [&](auto change) {
    return [&, change] {
      moejit_fused_moe_args_t a = base.args;
      change(a);
      std::uint64_t bytes = 0;
      return moejit_fused_moe_workspace_size(c.ctx, &a, &bytes);
    };
  };
  auto* map = static_cast<std::int32_t*>(base.map.data);
  auto* ids = static_cast<std::int32_t*>(base.ids.data);
  const std::vector<std::int32_t> small_map = {0, 1, 2, 3};  // never read: the shapes are refused first
  // Descriptors copied from other weights, or edited: refused under the caller's field names
  // before anything is compiled (MXFP4's scale bytes do not depend on these fields).
  auto edited_w13 = [&](auto edit) {
    auto w = std::make_shared<moejit_packed_weights_t>(layer.w13->w);
    edit(*w);
    return with([w](auto& a) { a.w13 = w.get(); });
  };
  const std::vector<Refusal> refusals = {
      {"w13 described with bf16 scales", MOEJIT_ERROR_INVALID_ARGUMENT,
       {"'args->w13->scale_dtype' = bf16", "e8m0 for mxfp4"},
       edited_w13([](auto& w) { w.scale_dtype = MOEJIT_DTYPE_BF16; })},
      {"w13 described with group 64", MOEJIT_ERROR_INVALID_ARGUMENT, {"'args->w13->group_size' = 64", "32 for mxfp4"},
       edited_w13([](auto& w) { w.group_size = 64; })},
      {"misaligned bias", MOEJIT_ERROR_INVALID_ARGUMENT, {"'args->w13->bias'", "8-byte alignment"},
       edited_w13([](auto& w) {
         w.bias = reinterpret_cast<float*>(std::uintptr_t{0x1004});  // refused before any read
         w.bias_bytes = std::uint64_t{Layer::E} * w.n * 4;
       })},
      {"negative tokens and no data", MOEJIT_ERROR_INVALID_ARGUMENT, {"'tokens' = -1", ">= 0"},
       with([](auto& a) {
         a.tokens = -1;
         a.hidden = nullptr;
         a.output = nullptr;
       })},
      {"an empty batch of a wrong layer", MOEJIT_ERROR_INVALID_ARGUMENT, {"w13"},
       with([&](auto& a) {
         a.tokens = 0;
         a.w13 = &layer.w2->w;
       })},
      {"e4m3 hidden states for weights packed for bf16", MOEJIT_ERROR_INVALID_ARGUMENT,
       {"'act_dtype' = e4m3", "packed for bf16"},
       with([](auto& a) {
         a.act_dtype = MOEJIT_DTYPE_E4M3;
         a.act_scale = MOEJIT_ACT_SCALE_TOKEN;
       })},
      {"no workspace", MOEJIT_ERROR_INVALID_ARGUMENT, {"'workspace' is null", "moejit_fused_moe_workspace_size"},
       with([](auto& a) { a.workspace = nullptr; })},
      {"no args", MOEJIT_ERROR_INVALID_ARGUMENT, {"'args'"}, [&] { return moejit_fused_moe(c.ctx, nullptr, nullptr); }},
      {"no w13", MOEJIT_ERROR_INVALID_ARGUMENT, {"w13"}, with([](auto& a) { a.w13 = nullptr; })},
      {"w2 for w13", MOEJIT_ERROR_INVALID_ARGUMENT, {"w13"}, with([&](auto& a) { a.w13 = &layer.w2->w; })},
      {"w13 for w2", MOEJIT_ERROR_INVALID_ARGUMENT, {"w2"}, with([&](auto& a) { a.w2 = &layer.w13->w; })},
      {"topk 0", MOEJIT_ERROR_INVALID_ARGUMENT, {"'topk'", "0"}, with([](auto& a) { a.topk = 0; })},
      {"topk 65", MOEJIT_ERROR_INVALID_ARGUMENT, {"'topk'", "65"}, with([](auto& a) { a.topk = 65; })},
      {"no activation", MOEJIT_ERROR_INVALID_ARGUMENT, {"activation"},
       with([](auto& a) { a.activation = MOEJIT_EPILOGUE_NONE; })},
      {"f32 hidden states", MOEJIT_ERROR_INVALID_ARGUMENT, {"act_dtype", "f32"},
       with([](auto& a) { a.act_dtype = MOEJIT_DTYPE_F32; })},
      {"e8m0 output", MOEJIT_ERROR_INVALID_ARGUMENT, {"out_dtype", "e8m0"},
       with([](auto& a) { a.out_dtype = MOEJIT_DTYPE_E8M0; })},
      {"fewer global experts than local", MOEJIT_ERROR_INVALID_ARGUMENT, {"global_experts", "2"},
       with([](auto& a) { a.global_experts = 2; })},
      {"more global experts than local, no map", MOEJIT_ERROR_INVALID_ARGUMENT, {"global_experts", "16", "expert_map"},
       with([](auto& a) { a.global_experts = 16; })},
      {"max_tokens below tokens", MOEJIT_ERROR_INVALID_ARGUMENT, {"max_tokens", "2"},
       with([](auto& a) { a.max_tokens = 2; })},
      {"global experts past 32-bit ids", MOEJIT_ERROR_INVALID_ARGUMENT, {"'global_experts' = 2147483648", "at most 2147483647"},
       with([&](auto& a) { a.global_experts = 0x80000000u, a.expert_map = small_map.data(); })},
      {"routed slots past 32-bit indices", MOEJIT_ERROR_INVALID_ARGUMENT, {"'tokens'", "max_tokens 40000000", "topk 64", "at most 2147483647"},
       with([](auto& a) { a.max_tokens = 40000000, a.topk = 64; })},
      {"no hidden", MOEJIT_ERROR_INVALID_ARGUMENT, {"'hidden'"}, with([](auto& a) { a.hidden = nullptr; })},
      {"misaligned hidden", MOEJIT_ERROR_INVALID_ARGUMENT, {"'hidden'", "16-byte"},
       with([](auto& a) { a.hidden = static_cast<const char*>(a.hidden) + 2; })},
      {"no output", MOEJIT_ERROR_INVALID_ARGUMENT, {"'output'"}, with([](auto& a) { a.output = nullptr; })},
      {"no topk_ids", MOEJIT_ERROR_INVALID_ARGUMENT, {"'topk_ids'"}, with([](auto& a) { a.topk_ids = nullptr; })},
      {"no topk_weights", MOEJIT_ERROR_INVALID_ARGUMENT, {"'topk_weights'"},
       with([](auto& a) { a.topk_weights = nullptr; })},
      {"misaligned workspace", MOEJIT_ERROR_INVALID_ARGUMENT, {"'workspace'", "256-byte"},
       with([](auto& a) { a.workspace = static_cast<char*>(a.workspace) + 16; })},
      {"workspace too small", MOEJIT_ERROR_INVALID_ARGUMENT, {"workspace_bytes", "1024"},
       with([](auto& a) { a.workspace_bytes = 1024; })},
      {"an expert id past the experts", MOEJIT_ERROR_INVALID_ARGUMENT, {"topk_ids[", "= 4", "[0, 4)"},
       with([&](auto&) { ids[5] = 4; })},
      {"a negative expert id", MOEJIT_ERROR_INVALID_ARGUMENT, {"topk_ids[", "= -1"}, with([&](auto&) { ids[5] = -1; })},
      {"a map entry past the local experts", MOEJIT_ERROR_INVALID_ARGUMENT, {"expert_map[", "= 4", "[0, 4)"},
       with([&](auto& a) {
         ids[5] = 1;
         a.global_experts = 8;
         for (int e = 0; e < 8; ++e) map[e] = e < 4 ? e : -1;
         map[6] = 4;
         a.expert_map = map;
       })},
      {"a map entry below -1", MOEJIT_ERROR_INVALID_ARGUMENT, {"expert_map[", "= -2", "-1"},
       with([&](auto& a) {
         a.global_experts = 8;
         for (int e = 0; e < 8; ++e) map[e] = e < 4 ? e : -1;
         map[7] = -2;
         a.expert_map = map;
       })},
      {"workspace query without bytes out", MOEJIT_ERROR_INVALID_ARGUMENT, {"'bytes'"},
       [&] { return moejit_fused_moe_workspace_size(c.ctx, &base.args, nullptr); }},
      {"workspace query with no tokens", MOEJIT_ERROR_INVALID_ARGUMENT, {"'tokens'"},
       size_with([](auto& a) { a.tokens = -4; })},
  };
  std::memset(base.out.data, 0x5a, base.out.size);
  for (const auto& r : refusals) {
    for (std::size_t i = 0; i < FusedCall::T * FusedCall::K; ++i) ids[i] = static_cast<std::int32_t>(i % Layer::E);
    check_refusal(r);
  }
  // An empty batch (an expert-parallel rank no token reached) is no error: nothing is read or
  // written, whatever its pointers hold; with max_tokens 0 it needs no workspace.
  moejit_fused_moe_args_t empty = base.args;
  empty.tokens = 0;
  CHECK(moejit_fused_moe(c.ctx, &empty, nullptr) == MOEJIT_OK);
  empty.hidden = empty.output = empty.workspace = nullptr;
  empty.topk_ids = nullptr;
  empty.topk_weights = nullptr;
  empty.workspace_bytes = 0;
  CHECK(moejit_fused_moe(c.ctx, &empty, nullptr) == MOEJIT_OK);
  std::uint64_t empty_bytes = 1;
  CHECK(moejit_fused_moe_workspace_size(c.ctx, &empty, &empty_bytes) == MOEJIT_OK);
  CHECK(empty_bytes == 0);
  for (std::size_t i = 0; i < base.out.size; ++i)
    if (static_cast<const u8*>(base.out.data)[i] != 0x5a) FAIL("a refused call wrote output byte " << i);
}

TEST_CASE("warm-up and prepare refusals name the argument and the expected value") {
  TempDir dir;
  Context c(dir);
  auto warm_with = [&](auto change) {
    return [&, change] {
      moejit_model_desc_t m = small_model();
      change(m);
      return moejit_warmup(c.ctx, &m, nullptr, 0, nullptr, nullptr);
    };
  };
  const char* bad_arch[] = {"sm_75"};
  const char* null_arch[] = {nullptr};
  const std::vector<Refusal> refusals = {
      {"no model", MOEJIT_ERROR_INVALID_ARGUMENT, {"'model'"},
       [&] { return moejit_warmup(c.ctx, nullptr, nullptr, 0, nullptr, nullptr); }},
      {"no model to prepare", MOEJIT_ERROR_INVALID_ARGUMENT, {"'model'"},
       [&] { return moejit_prepare(c.ctx, nullptr, nullptr, nullptr); }},
      {"no context to prepare", MOEJIT_ERROR_INVALID_ARGUMENT, {"'context'"},
       [&] {
         auto m = small_model();
         return moejit_prepare(nullptr, &m, nullptr, nullptr);
       }},
      {"hidden 0", MOEJIT_ERROR_INVALID_ARGUMENT, {"hidden", "0"}, warm_with([](auto& m) { m.hidden = 0; })},
      {"hidden not a multiple of 32", MOEJIT_ERROR_INVALID_ARGUMENT, {"hidden", "100"},
       warm_with([](auto& m) { m.hidden = 100; })},
      {"no experts", MOEJIT_ERROR_INVALID_ARGUMENT, {"experts", "0"}, warm_with([](auto& m) { m.experts = 0; })},
      {"topk past the experts", MOEJIT_ERROR_INVALID_ARGUMENT, {"topk", "9"}, warm_with([](auto& m) { m.topk = 9; })},
      {"unknown format", MOEJIT_ERROR_INVALID_ARGUMENT, {"format", "9"},
       warm_with([](auto& m) { m.format = static_cast<moejit_weight_format_t>(9); })},
      {"MXFP4 group 128", MOEJIT_ERROR_INVALID_ARGUMENT, {"group_size", "128"},
       warm_with([](auto& m) { m.group_size = 128; })},
      {"MXFP4 group 0 (per-channel is INT4's)", MOEJIT_ERROR_INVALID_ARGUMENT, {"'group_size' = 0", "32 for mxfp4"},
       warm_with([](auto& m) { m.group_size = 0; })},
      {"INT4 with E8M0 scales", MOEJIT_ERROR_INVALID_ARGUMENT, {"'scale_dtype' = e8m0", "bf16 or f16 for INT4"},
       warm_with([](auto& m) { m.format = MOEJIT_WEIGHT_INT4_SYM; })},
      {"E2M1 activations with INT4 weights", MOEJIT_ERROR_INVALID_ARGUMENT, {"e2m1 with int4_sym weights", "mxfp4"},
       warm_with([](auto& m) {
         m.format = MOEJIT_WEIGHT_INT4_SYM;
         m.scale_dtype = MOEJIT_DTYPE_BF16;
         m.act_dtype = MOEJIT_DTYPE_E2M1;
         m.act_scale = MOEJIT_ACT_SCALE_BLOCK32;
       })},
      // Warm-up plans every T up to max_tokens: an unbounded one ran for hours before failing.
      {"max_tokens past what warm-up plans", MOEJIT_ERROR_INVALID_ARGUMENT, {"'max_tokens' = 4294967295", "1 to 1048576"},
       warm_with([](auto& m) { m.max_tokens = 0xffffffffu; })},
      {"max_tokens 0", MOEJIT_ERROR_INVALID_ARGUMENT, {"'max_tokens' = 0"}, warm_with([](auto& m) { m.max_tokens = 0; })},
      {"more local experts than one launch serves", MOEJIT_ERROR_INVALID_ARGUMENT,
       {"'experts' = 8192", "at most 4096 experts per rank"}, warm_with([](auto& m) { m.experts = 8192; })},
      {"an intermediate size whose gate/up rows wrap 32 bits", MOEJIT_ERROR_INVALID_ARGUMENT,
       {"'intermediate' = 2147483648", "[4, 4294967296, 64]"}, warm_with([](auto& m) { m.intermediate = 1u << 31; })},
      {"hidden past 2^20", MOEJIT_ERROR_INVALID_ARGUMENT, {"'hidden' = 1048608", "at most 1048576"},
       warm_with([](auto& m) { m.hidden = (1u << 20) + 32; })},
      {"tensor parallel not dividing the intermediate size", MOEJIT_ERROR_INVALID_ARGUMENT, {"tensor_parallel", "3"},
       warm_with([](auto& m) { m.tensor_parallel = 3; })},
      {"expert parallel not dividing the experts", MOEJIT_ERROR_INVALID_ARGUMENT, {"expert_parallel", "3"},
       warm_with([](auto& m) { m.expert_parallel = 3; })},
      {"an unknown target", MOEJIT_ERROR_INVALID_ARGUMENT, {"archs[0]", "sm_75"},
       [&] {
         auto m = small_model();
         return moejit_warmup(c.ctx, &m, bad_arch, 1, nullptr, nullptr);
       }},
      {"a null target", MOEJIT_ERROR_INVALID_ARGUMENT, {"archs[0]"},
       [&] {
         auto m = small_model();
         return moejit_warmup(c.ctx, &m, null_arch, 1, nullptr, nullptr);
       }},
      {"targets counted but null", MOEJIT_ERROR_INVALID_ARGUMENT, {"archs"},
       [&] {
         auto m = small_model();
         return moejit_warmup(c.ctx, &m, nullptr, 2, nullptr, nullptr);
       }},
  };
  for (const auto& r : refusals) check_refusal(r);
}

}  // namespace
}  // namespace moejit::test
