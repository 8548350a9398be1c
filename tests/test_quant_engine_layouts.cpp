// Packers from engine layouts (vLLM/gpt-oss MXFP4, GPTQ v1/v2, AWQ, compressed-tensors) equal the
// plain packer on the same logical weights. The tests build each engine layout from logical
// weights with their own encoders, written from the layouts' definitions (AWQ from AutoAWQ's pack
// order, compressed-tensors from its pack_to_int32), not with the library's readers.
// python/tests/test_compressed_tensors.py packs with compressed-tensors itself.

#include <doctest/doctest.h>

#include "quant/engine_layouts.hpp"
#include "test_quant_support.hpp"

using namespace moejit;
using namespace moejit::quant;
using namespace moejit::test;

namespace {

struct Mxfp4Tensors {
  std::vector<u8> blocks, scales;
};

Mxfp4Tensors to_vllm_mxfp4(const QuantizedWeights& w) {
  Mxfp4Tensors t;
  for (u32 e = 0; e < w.experts; ++e)
    for (u32 n = 0; n < w.n; ++n) {
      for (u32 j = 0; j < w.k / 2; ++j)
        t.blocks.push_back(static_cast<u8>(w.codes[w.code_index(e, n, 2 * j)] |
                                           w.codes[w.code_index(e, n, 2 * j + 1)] << 4));
      for (u32 g = 0; g < w.k / 32; ++g) t.scales.push_back(static_cast<u8>(w.scales[w.group_index(e, n, g)]));
    }
  return t;
}

struct Int4Tensors {
  std::vector<i32> qweight, qzeros;
  std::vector<u16> scales;
};

i32 as_i32(u32 bits) { return static_cast<i32>(bits); }

Int4Tensors to_gptq(const QuantizedWeights& w, GptqZeros zeros) {
  Int4Tensors t;
  const u32 G = w.groups();
  for (u32 e = 0; e < w.experts; ++e) {
    for (u32 r = 0; r < w.k / 8; ++r)
      for (u32 n = 0; n < w.n; ++n) {
        u32 word = 0;
        for (u32 i = 0; i < 8; ++i) word |= static_cast<u32>(w.codes[w.code_index(e, n, 8 * r + i)]) << (4 * i);
        t.qweight.push_back(as_i32(word));
      }
    for (u32 g = 0; g < G; ++g) {
      for (u32 c = 0; c < w.n / 8; ++c) {
        u32 word = 0;
        for (u32 i = 0; i < 8; ++i) word |= static_cast<u32>(w.zero_of(e, 8 * c + i, g * w.group_size)) << (4 * i);
        // v1 as the exporters write it: one 32-bit subtraction (a zero point of 0 borrows).
        t.qzeros.push_back(as_i32(zeros == GptqZeros::v1 ? word - 0x11111111u : word));
      }
      for (u32 n = 0; n < w.n; ++n) t.scales.push_back(w.scales[w.group_index(e, n, g)]);
    }
  }
  return t;
}

// AutoAWQ packs column 8c + order[i] into nibble i.
constexpr u32 kPackOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

Int4Tensors to_awq(const QuantizedWeights& w) {
  Int4Tensors t;
  const u32 G = w.groups();
  for (u32 e = 0; e < w.experts; ++e) {
    for (u32 k = 0; k < w.k; ++k)
      for (u32 c = 0; c < w.n / 8; ++c) {
        u32 word = 0;
        for (u32 i = 0; i < 8; ++i) word |= static_cast<u32>(w.codes[w.code_index(e, 8 * c + kPackOrder[i], k)]) << (4 * i);
        t.qweight.push_back(as_i32(word));
      }
    for (u32 g = 0; g < G; ++g) {
      for (u32 c = 0; c < w.n / 8; ++c) {
        u32 word = 0;
        for (u32 i = 0; i < 8; ++i) word |= static_cast<u32>(w.zeros[w.group_index(e, 8 * c + kPackOrder[i], g)]) << (4 * i);
        t.qzeros.push_back(as_i32(word));
      }
      for (u32 n = 0; n < w.n; ++n) t.scales.push_back(w.scales[w.group_index(e, n, g)]);
    }
  }
  return t;
}

// compressed-tensors packs signed int8 values q + 8, eight per int32 from the low bits, along the
// last dimension: the weights [N][K] along K (weight_packed), the zero points [N][K/G] transposed,
// along N (weight_zero_point); weight_scale [N][K/G].
Int4Tensors to_compressed_tensors(const QuantizedWeights& w) {
  Int4Tensors t;
  const u32 G = w.groups();
  auto pack8 = [](auto value_of) {
    u32 word = 0;
    for (u32 i = 0; i < 8; ++i) {
      const int q = value_of(i) - 8;  // the signed value the exporter quantized to
      word |= static_cast<u32>(q + 8) << (4 * i);
    }
    return as_i32(word);
  };
  for (u32 e = 0; e < w.experts; ++e) {
    for (u32 n = 0; n < w.n; ++n) {
      for (u32 j = 0; j < w.k / 8; ++j)
        t.qweight.push_back(pack8([&](u32 i) { return int{w.codes[w.code_index(e, n, 8 * j + i)]}; }));
      for (u32 g = 0; g < G; ++g) t.scales.push_back(w.scales[w.group_index(e, n, g)]);
    }
    if (w.format == WeightFormat::int4_asym)
      for (u32 c = 0; c < w.n / 8; ++c)
        for (u32 g = 0; g < G; ++g)
          t.qzeros.push_back(pack8([&](u32 i) { return int{w.zeros[w.group_index(e, 8 * c + i, g)]}; }));
  }
  return t;
}

void check_same_pack(const PackedWeights& a, const PackedWeights& b) {
  CHECK(a.format == b.format);
  CHECK(a.group_size == b.group_size);
  CHECK(a.scale_dtype == b.scale_dtype);
  CHECK(a.act_and_mul == b.act_and_mul);
  CHECK(a.qweight == b.qweight);
  CHECK(a.scales == b.scales);
  CHECK(a.zeros == b.zeros);
  CHECK(a.bias == b.bias);
}

constexpr RowOrder kRowOrders[] = {RowOrder::plain, RowOrder::concatenated, RowOrder::interleaved};

// An INT4 engine layout's description of tensors `t`, encoded from `w`.
template <class Source>
Source int4_source(const Int4Tensors& t, const QuantizedWeights& w) {
  Source src;
  src.qweight = t.qweight;
  src.qzeros = t.qzeros;
  src.scales = t.scales;
  src.experts = w.experts;
  src.n = w.n;
  src.k = w.k;
  src.group_size = w.group_size;
  src.scale_dtype = w.scale_dtype;
  return src;
}

// `src`, an engine layout encoded from `w`, reads back as `w` and packs as the plain packer packs `w`.
template <class Source>
void check_reads_back(const Source& src, const QuantizedWeights& w,
                      Result<QuantizedWeights> (*logical_from)(const Source&),
                      Result<PackedWeights> (*pack_from)(const Source&, const PackOptions&),
                      const PackOptions& options) {
  auto logical = logical_from(src);
  REQUIRE(logical.ok());
  CHECK(logical->codes == w.codes);
  CHECK(logical->scales == w.scales);
  CHECK(logical->zeros == w.zeros);
  auto from_engine = pack_from(src, options);
  auto plain = pack(w, options);
  REQUIRE(from_engine.ok());
  REQUIRE(plain.ok());
  check_same_pack(*from_engine, *plain);
}

}  // namespace

TEST_CASE("AWQ nibble order is AutoAWQ's, undone by vLLM's reverse order") {
  for (u32 j = 0; j < 8; ++j) {
    CHECK(kAwqOrder[j] == kPackOrder[j]);
    CHECK(kAwqOrder[kAwqReverseOrder[j]] == j);  // column j sits in nibble reverse[j]
  }
}

TEST_CASE("vLLM / gpt-oss MXFP4 tensors pack like the plain packer") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  const u32 E = 3, N = 64, K = 128;
  for (RowOrder rows : kRowOrders) {
    const std::string order_name = row_order_name(rows);
    CAPTURE(order_name);
    QuantizedWeights w = random_logical(rng, WeightFormat::mxfp4, 32, DType::e8m0, E, N, K);
    w.scales[3] = 0x00;  // the extremes travel as any byte
    w.scales[4] = 0xFE;
    w.scales[5] = 0xFF;
    const auto t = to_vllm_mxfp4(w);
    std::vector<float> bias(E * N);
    for (auto& b : bias) b = rng.normal_nonzero(1.0f);
    const VllmMxfp4Weights src{t.blocks, t.scales, E, N, K};
    auto logical = logical_from_vllm_mxfp4(src);
    REQUIRE(logical.ok());
    CHECK(logical->codes == w.codes);
    CHECK(logical->scales == w.scales);
    auto from_engine = pack_vllm_mxfp4(src, {rows, bias});
    auto plain = pack(w, {rows, bias});
    REQUIRE(from_engine.ok());
    REQUIRE(plain.ok());
    check_same_pack(*from_engine, *plain);
  }
}

TEST_CASE("GPTQ v1 and v2 tensors pack like the plain packer") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  const u32 E = 2, N = 64, K = 256;
  for (GptqZeros version : {GptqZeros::v1, GptqZeros::v2}) {
    for (WeightFormat format : {WeightFormat::int4_sym, WeightFormat::int4_asym}) {
      for (u32 group : {32u, 64u, 128u, K}) {
        for (DType dtype : {DType::f16, DType::bf16}) {
          for (RowOrder rows : kRowOrders) {
            CAPTURE(static_cast<int>(version));
            CAPTURE(static_cast<int>(format));
            CAPTURE(group);
            CAPTURE(static_cast<int>(dtype));
            const std::string order_name = row_order_name(rows);
            CAPTURE(order_name);
            // Zero points 0..15: a v1 word with a 0 in it borrows (GPTQModel notes this affects a
            // share of asymmetric exports; such checkpoints must load).
            const QuantizedWeights w = random_logical(rng, format, group, dtype, E, N, K);
            const auto t = to_gptq(w, version);
            std::vector<i32> g_idx(K);
            for (u32 k = 0; k < K; ++k) g_idx[k] = static_cast<i32>(k / group);  // trivial: accepted
            auto src = int4_source<GptqWeights>(t, w);
            src.g_idx = g_idx;
            src.zero_format = version;
            src.symmetric = format == WeightFormat::int4_sym;
            check_reads_back(src, w, &logical_from_gptq, &pack_gptq, {rows, {}});
            if (src.symmetric) {
              src.qzeros = {};  // symmetric checkpoints without qzeros imply 8
              check_reads_back(src, w, &logical_from_gptq, &pack_gptq, {rows, {}});
            }
          }
        }
      }
    }
  }
}

TEST_CASE("AWQ tensors pack like the plain packer") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  const u32 E = 2, N = 64, K = 256;
  for (u32 group : {32u, 64u, 128u, K}) {
    for (DType dtype : {DType::f16, DType::bf16}) {
      for (RowOrder rows : kRowOrders) {
        CAPTURE(group);
        const std::string order_name = row_order_name(rows);
        CAPTURE(order_name);
        const QuantizedWeights w = random_logical(rng, WeightFormat::int4_asym, group, dtype, E, N, K);
        const auto t = to_awq(w);
        check_reads_back(int4_source<AwqWeights>(t, w), w, &logical_from_awq, &pack_awq, {rows, {}});
      }
    }
  }
}

TEST_CASE("compressed-tensors pack-quantized tensors pack like the plain packer") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  const u32 E = 2, N = 64, K = 256;
  for (WeightFormat format : {WeightFormat::int4_sym, WeightFormat::int4_asym}) {
    for (u32 group : {32u, 64u, 128u, K}) {
      for (DType dtype : {DType::bf16, DType::f16}) {
        for (RowOrder rows : kRowOrders) {
          CAPTURE(static_cast<int>(format));
          CAPTURE(group);
          CAPTURE(static_cast<int>(dtype));
          const std::string order_name = row_order_name(rows);
          CAPTURE(order_name);
          const QuantizedWeights w = random_logical(rng, format, group, dtype, E, N, K);
          const auto t = to_compressed_tensors(w);
          auto src = int4_source<CompressedTensorsWeights>(t, w);
          src.symmetric = format == WeightFormat::int4_sym;
          std::vector<float> bias(E * N);
          for (auto& b : bias) b = rng.normal_nonzero(1.0f);
          check_reads_back(src, w, &logical_from_compressed_tensors, &pack_compressed_tensors, {rows, bias});
        }
      }
    }
  }
}

TEST_CASE("engine-layout packers reject bad inputs with the argument named") {
  Rng rng;
  MOEJIT_QUANT_SEED(rng);
  const u32 E = 2, N = 64, K = 128;
  const QuantizedWeights mx = random_logical(rng, WeightFormat::mxfp4, 32, DType::e8m0, E, N, K);
  auto m = to_vllm_mxfp4(mx);
  check_error(pack_vllm_mxfp4({m.blocks, m.scales, E, N, K + 32}).status(), Code::invalid_argument,
              {"mxfp4 blocks has", "E*N*K/2"});
  m.scales.pop_back();
  check_error(pack_vllm_mxfp4({m.blocks, m.scales, E, N, K}).status(), Code::invalid_argument,
              {"mxfp4 scales has", "E*N*K/32"});
  check_error(pack_vllm_mxfp4({m.blocks, m.scales, E, 40, K}).status(), Code::invalid_argument, {"'n' = 40"});
  // Shapes no kernel can address are refused before their sizes are computed (they would wrap).
  check_error(pack_vllm_mxfp4({m.blocks, m.scales, 4097, N, K}).status(), Code::invalid_argument,
              {"'experts' = 4097", "1 to 4096"});
  check_error(pack_vllm_mxfp4({m.blocks, m.scales, E, (1u << 20) + 32, K}).status(), Code::invalid_argument,
              {"'n' = 1048608", "at most 1048576"});
  check_error(pack_vllm_mxfp4({m.blocks, m.scales, E, 1u << 20, 1u << 20}).status(), Code::invalid_argument,
              {"'n' = 1048576", "'k' = 1048576", "549755813888 bytes", "at most 2147483648"});

  const QuantizedWeights asym = random_logical(rng, WeightFormat::int4_asym, 32, DType::f16, E, N, K, 1);
  auto g = to_gptq(asym, GptqZeros::v1);
  GptqWeights src;
  src.qweight = g.qweight;
  src.qzeros = g.qzeros;
  src.scales = g.scales;
  src.experts = E;
  src.n = N;
  src.k = K;
  src.group_size = 32;
  REQUIRE(pack_gptq(src).ok());

  GptqWeights bad = src;
  bad.desc_act = true;
  check_error(pack_gptq(bad).status(), Code::unsupported, {"act-order", "not supported"});
  std::vector<i32> g_idx(K);
  for (u32 k = 0; k < K; ++k) g_idx[k] = static_cast<i32>((K - 1 - k) / 32);  // act-order permutation
  bad = src;
  bad.g_idx = g_idx;
  check_error(pack_gptq(bad).status(), Code::unsupported, {"g_idx[0] = 3", "act-order"});
  bad = src;
  bad.g_idx = std::span<const i32>(g_idx).first(5);
  check_error(pack_gptq(bad).status(), Code::invalid_argument, {"g_idx has 5 elements"});
  bad = src;
  bad.qweight = std::span<const i32>(g.qweight).first(10);
  check_error(pack_gptq(bad).status(), Code::invalid_argument, {"GPTQ qweight has 10 int32", "E*(K/8)*N = 2048"});
  bad = src;
  bad.qzeros = {};
  check_error(pack_gptq(bad).status(), Code::invalid_argument, {"GPTQ qzeros has 0 int32"});
  bad = src;
  bad.scale_dtype = DType::f32;
  check_error(pack_gptq(bad).status(), Code::invalid_argument, {"'scale_dtype' = f32"});
  bad = src;
  bad.group_size = 48;
  check_error(pack_gptq(bad).status(), Code::invalid_argument, {"'group_size' = 48"});

  // A symmetric checkpoint whose zeros are not the symmetric ones.
  std::vector<i32> not_symmetric(g.qzeros.size(), as_i32(0x77777777u));
  not_symmetric[3] = as_i32(0x77777777u - 0x10000000u);  // column 31: zero point 7
  bad = src;
  bad.qzeros = not_symmetric;
  bad.symmetric = true;
  check_error(pack_gptq(bad).status(), Code::invalid_argument,
              {"column 31: zero point 7 (v1 word 0x67777777)", "symmetric checkpoint has zero point 8"});
  not_symmetric[3] = as_i32(0x77777777u);
  CHECK(pack_gptq(bad).ok());

  auto a = to_awq(asym);
  AwqWeights awq;
  awq.qweight = a.qweight;
  awq.qzeros = a.qzeros;
  awq.scales = a.scales;
  awq.experts = E;
  awq.n = N;
  awq.k = K;
  awq.group_size = 64;
  check_error(pack_awq(awq).status(), Code::invalid_argument, {"AWQ qzeros has", "E*(K/G)*(N/8) = 32"});
  awq.group_size = 32;
  awq.scales = std::span<const u16>(a.scales).first(7);
  check_error(pack_awq(awq).status(), Code::invalid_argument, {"AWQ scales has 7 elements"});

  const auto c = to_compressed_tensors(asym);
  auto ct = int4_source<CompressedTensorsWeights>(c, asym);
  ct.symmetric = false;
  REQUIRE(pack_compressed_tensors(ct).ok());
  CompressedTensorsWeights bad_ct = ct;
  bad_ct.qweight = std::span<const i32>(c.qweight).first(100);
  check_error(pack_compressed_tensors(bad_ct).status(), Code::invalid_argument,
              {"weight_packed has 100 int32", "E*N*(K/8) = 2048"});
  bad_ct = ct;
  bad_ct.scales = std::span<const u16>(c.scales).first(9);
  check_error(pack_compressed_tensors(bad_ct).status(), Code::invalid_argument,
              {"weight_scale has 9 elements", "E*N*(K/G) = 512"});
  bad_ct = ct;
  bad_ct.qzeros = {};
  check_error(pack_compressed_tensors(bad_ct).status(), Code::invalid_argument,
              {"weight_zero_point has 0 int32", "E*(N/8)*(K/G) = 64"});
  bad_ct = ct;
  bad_ct.symmetric = true;  // zero points handed with symmetric weights would be ignored: refused
  check_error(pack_compressed_tensors(bad_ct).status(), Code::invalid_argument,
              {"weight_zero_point given for symmetric weights"});
  bad_ct = ct;
  bad_ct.group_size = 48;
  check_error(pack_compressed_tensors(bad_ct).status(), Code::invalid_argument, {"'group_size' = 48"});
}
