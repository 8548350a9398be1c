#include "dispatch/weight_pack_op.hpp"

#include <cstring>
#include <vector>

#include "gemm/grouped_gemm_params.cuh"
#include "quant/engine_layouts.hpp"
#include "quant/formats.hpp"
#include "spec/spec_fields.hpp"

namespace moejit::dispatch {
namespace {

struct SourceBytes {
  std::uint64_t qweight = 0, scales = 0, zeros = 0, bias = 0;
};

Result<SourceBytes> source_bytes(const WeightSourceDesc& d) {
  // What packing will check, checked before any size is computed: the sizes of shapes no kernel
  // can address could wrap, and a description the packer refuses must not be sized either.
  MOEJIT_TRY(quant::check_pack_shape({d.format, d.group_size, d.scale, d.experts, d.n, d.k}, d.rows, d.order,
                                             "desc->"));
  // Zero points given where the format has none would be dropped without a word. GPTQ's are read
  // (a symmetric checkpoint's must all be 8), everyone else's are a mistake.
  const bool gptq = d.source == WeightSource::gptq_v1 || d.source == WeightSource::gptq_v2;
  if (d.zeros != nullptr && d.format != WeightFormat::int4_asym && !gptq)
    return error(Code::invalid_argument,
                 "argument 'zeros' is set, but {} weights have no zero points: expected NULL, or format int4_asym",
                 to_string(d.format));
  const std::uint64_t e = d.experts, n = d.n, k = d.k, groups = d.k / d.group_size;
  const std::uint64_t scale_bytes = d.scale == DType::e8m0 ? 1 : 2;
  const bool mxfp4 = d.format == WeightFormat::mxfp4;
  SourceBytes b;
  b.bias = d.bias ? e * n * 4 : 0;
  switch (d.source) {
    case WeightSource::plain_codes:
      b.qweight = e * n * k;
      b.scales = e * n * groups * scale_bytes;
      b.zeros = d.format == WeightFormat::int4_asym ? e * n * groups : 0;
      return b;
    case WeightSource::vllm_mxfp4:
      if (!mxfp4)
        return error(Code::invalid_argument,
                     "argument 'desc->format' = {} with source vllm_mxfp4: expected mxfp4 (the layout holds MXFP4 "
                     "weights)",
                     to_string(d.format));
      b.qweight = e * n * k / 2;
      b.scales = e * n * k / 32;
      return b;
    case WeightSource::gptq_v1:
    case WeightSource::gptq_v2:
    case WeightSource::awq:
      if (mxfp4)
        return error(Code::invalid_argument,
                     "argument 'desc->format' = mxfp4 with a GPTQ or AWQ source: expected int4_sym or int4_asym (the "
                     "layouts hold INT4 weights)");
      if (d.source == WeightSource::awq && d.format != WeightFormat::int4_asym)
        return error(Code::invalid_argument,
                     "argument 'desc->format' = {} with source awq: expected int4_asym (AWQ weights have zero points)",
                     to_string(d.format));
      b.qweight = e * k * n / 2;
      b.scales = e * groups * n * 2;
      b.zeros = d.zeros ? e * groups * (n / 8) * 4 : 0;
      if (d.format == WeightFormat::int4_asym && d.zeros == nullptr)
        return error(Code::invalid_argument, "argument 'zeros' is null: expected the qzeros of int4_asym weights");
      return b;
    case WeightSource::compressed_tensors:
      if (mxfp4)
        return error(Code::invalid_argument,
                     "argument 'desc->format' = mxfp4 with source compressed_tensors: expected int4_sym or "
                     "int4_asym (pack-quantized INT4 weights)");
      b.qweight = e * n * k / 2;
      b.scales = e * n * groups * 2;
      b.zeros = d.zeros ? e * (n / 8) * groups * 4 : 0;
      if (d.format == WeightFormat::int4_asym && d.zeros == nullptr)
        return error(Code::invalid_argument,
                     "argument 'zeros' is null: expected the weight_zero_point of int4_asym weights");
      return b;
  }
  return error(Code::invalid_argument,
               "argument 'source' = {}: expected plain codes, vLLM MXFP4, GPTQ v1/v2, AWQ or compressed-tensors",
               static_cast<int>(d.source));
}

// The source tensors in host memory: the caller's pointers, or copies of device tensors.
struct HostSource {
  std::vector<unsigned char> qweight, scales, zeros;
  std::vector<float> bias;
  const void* q = nullptr;
  const void* s = nullptr;
  const void* z = nullptr;
  const float* b = nullptr;
};

Result<HostSource> to_host(Launcher& launcher, const WeightSourceDesc& d, const SourceBytes& bytes, void* stream) {
  HostSource h;
  h.q = d.qweight;
  h.s = d.scales;
  h.z = d.zeros;
  h.b = d.bias;
  if (d.qweight == nullptr || d.scales == nullptr)
    return error(Code::invalid_argument, "argument '{}' is null: expected the checkpoint's tensor",
                 d.qweight == nullptr ? "qweight" : "scales");
  if (!d.on_device) return h;
  auto fetch = [&](std::vector<unsigned char>& buf, const void* src, std::uint64_t n, const void*& out) -> Status {
    if (src == nullptr || n == 0) return {};
    buf.resize(n);
    MOEJIT_TRY(launcher.copy_from_backend(buf.data(), src, n, stream));
    out = buf.data();
    return {};
  };
  MOEJIT_TRY(fetch(h.qweight, d.qweight, bytes.qweight, h.q));
  MOEJIT_TRY(fetch(h.scales, d.scales, bytes.scales, h.s));
  MOEJIT_TRY(fetch(h.zeros, d.zeros, bytes.zeros, h.z));
  if (d.bias != nullptr) {
    h.bias.resize(bytes.bias / 4);
    MOEJIT_TRY(launcher.copy_from_backend(h.bias.data(), d.bias, bytes.bias, stream));
    h.b = h.bias.data();
  }
  MOEJIT_TRY(launcher.synchronize(stream));
  return h;
}

// The INT4 checkpoint layouts (GPTQ, AWQ, compressed-tensors) all hold int32 words of nibbles,
// int32 words of zero points (or none) and 16-bit scales.
template <class Weights>
Weights int4_tensors(const WeightSourceDesc& d, const SourceBytes& bytes, const HostSource& h) {
  Weights w;
  w.qweight = std::span<const i32>(static_cast<const i32*>(h.q), bytes.qweight / 4);
  if (h.z != nullptr) w.qzeros = std::span<const i32>(static_cast<const i32*>(h.z), bytes.zeros / 4);
  w.scales = std::span<const u16>(static_cast<const u16*>(h.s), bytes.scales / 2);
  w.experts = d.experts;
  w.n = d.n;
  w.k = d.k;
  w.group_size = d.group_size;
  w.scale_dtype = d.scale;
  return w;
}

Result<quant::PackedWeights> pack_host(const WeightSourceDesc& d, const SourceBytes& bytes, const HostSource& h) {
  quant::PackOptions options;
  options.rows = d.rows;
  options.order = d.order;
  if (h.b != nullptr) options.bias = std::span<const float>(h.b, bytes.bias / 4);
  auto u8p = [](const void* p) { return static_cast<const u8*>(p); };
  switch (d.source) {
    case WeightSource::plain_codes: {
      quant::QuantizedWeights q = quant::make_quantized_weights(d.format, d.group_size, d.scale, d.experts, d.n, d.k);
      std::memcpy(q.codes.data(), h.q, bytes.qweight);
      if (d.scale == DType::e8m0)
        for (std::size_t i = 0; i < q.scales.size(); ++i) q.scales[i] = u8p(h.s)[i];
      else
        std::memcpy(q.scales.data(), h.s, bytes.scales);
      if (!q.zeros.empty()) {
        if (h.z == nullptr)
          return error(Code::invalid_argument, "argument 'zeros' is null: expected the zero points of int4_asym weights");
        std::memcpy(q.zeros.data(), h.z, bytes.zeros);
      }
      MOEJIT_TRY(q.validate());
      return quant::pack(q, options);
    }
    case WeightSource::vllm_mxfp4: {
      quant::VllmMxfp4Weights w{std::span<const u8>(u8p(h.q), bytes.qweight), std::span<const u8>(u8p(h.s), bytes.scales),
                                d.experts, d.n, d.k};
      return quant::pack_vllm_mxfp4(w, options);
    }
    case WeightSource::gptq_v1:
    case WeightSource::gptq_v2: {
      auto w = int4_tensors<quant::GptqWeights>(d, bytes, h);
      w.zero_format = d.source == WeightSource::gptq_v1 ? quant::GptqZeros::v1 : quant::GptqZeros::v2;
      w.symmetric = d.format == WeightFormat::int4_sym;
      return quant::pack_gptq(w, options);
    }
    case WeightSource::awq: return quant::pack_awq(int4_tensors<quant::AwqWeights>(d, bytes, h), options);
    case WeightSource::compressed_tensors: {
      auto w = int4_tensors<quant::CompressedTensorsWeights>(d, bytes, h);
      w.symmetric = d.format == WeightFormat::int4_sym;
      return quant::pack_compressed_tensors(w, options);
    }
  }
  return error(Code::internal, "unhandled weight source");
}

}  // namespace

Result<PackedSizes> packed_sizes(const WeightSourceDesc& d) {
  MOEJIT_ASSIGN_OR_RETURN(SourceBytes bytes, source_bytes(d));
  const std::uint64_t groups = d.k / d.group_size;
  PackedSizes s;
  s.qweight = packed_weight_bytes(d.experts, d.n, d.k);
  s.scales = packed_scale_bytes(d.format == WeightFormat::mxfp4, d.experts, d.n, d.k, d.group_size,
                                d.scale == DType::e8m0 ? 1 : 2);
  s.zeros = d.format == WeightFormat::int4_asym ? static_cast<std::uint64_t>(d.experts) * groups * d.n : 0;
  s.bias = bytes.bias;
  return s;
}

Status pack_weights(Launcher& launcher, const WeightSourceDesc& d, const PackedDestination& dest, void* stream) {
  MOEJIT_ASSIGN_OR_RETURN(SourceBytes bytes, source_bytes(d));
  MOEJIT_ASSIGN_OR_RETURN(PackedSizes sizes, packed_sizes(d));
  if (dest.qweight == nullptr || dest.scales == nullptr)
    return error(Code::invalid_argument, "argument 'packed->{}' is null: expected a buffer of {} bytes",
                 dest.qweight == nullptr ? "qweight" : "scales", dest.qweight == nullptr ? sizes.qweight : sizes.scales);
  if (sizes.zeros > 0 && dest.zeros == nullptr)
    return error(Code::invalid_argument, "argument 'packed->zeros' is null: expected a buffer of {} bytes", sizes.zeros);
  if (sizes.bias > 0 && dest.bias == nullptr)
    return error(Code::invalid_argument, "argument 'packed->bias' is null: expected a buffer of {} bytes", sizes.bias);
  // Every use of packed weights requires 16-byte aligned buffers (the kernels' vector loads);
  // refuse them here rather than pack into buffers no call would accept.
  for (auto [p, name] : {std::pair<const void*, const char*>{dest.qweight, "qweight"}, {dest.scales, "scales"},
                         {dest.zeros, "zeros"}})
    if (p != nullptr && reinterpret_cast<std::uintptr_t>(p) % 16 != 0)
      return error(Code::invalid_argument, "argument 'packed->{}' = {}: expected 16-byte alignment", name, p);
  if (dest.bias != nullptr && reinterpret_cast<std::uintptr_t>(dest.bias) % 8 != 0)
    return error(Code::invalid_argument, "argument 'packed->bias' = {}: expected 8-byte alignment",
                 static_cast<const void*>(dest.bias));
  MOEJIT_ASSIGN_OR_RETURN(HostSource host, to_host(launcher, d, bytes, stream));
  MOEJIT_ASSIGN_OR_RETURN(quant::PackedWeights packed, pack_host(d, bytes, host));
  MOEJIT_TRY(launcher.copy_to_backend(dest.qweight, packed.qweight.data(), packed.qweight.size(), stream));
  MOEJIT_TRY(launcher.copy_to_backend(dest.scales, packed.scales.data(), packed.scales.size(), stream));
  if (!packed.zeros.empty()) MOEJIT_TRY(launcher.copy_to_backend(dest.zeros, packed.zeros.data(), packed.zeros.size(), stream));
  if (!packed.bias.empty())
    MOEJIT_TRY(launcher.copy_to_backend(dest.bias, packed.bias.data(), packed.bias.size() * sizeof(float), stream));
  return launcher.synchronize(stream);  // the host copies are freed on return
}

}  // namespace moejit::dispatch
