#include "bench/gpu/weight_set.hpp"

#include <cstring>
#include <numeric>

#include "bench/gpu/device_data.hpp"
#include "gemm/grouped_gemm_params.cuh"
#include "quant/pack.hpp"
#include "reference/quantize.hpp"

namespace moejit::bench {

namespace {

// One expert's weights quantized and packed by src/quant from random normal values. Only a
// block of columns is quantized and repeated across N (the packed layout keeps each 32-column
// strip self-contained, and timing does not depend on values): the rest is the same bytes.
struct HostExpert {
  std::vector<u8> weights, scales;
  u32 scale_range = 0;  // MXFP4: the expert's scale-byte range (grouped_gemm_params.cuh)
  std::vector<float> bias;
  quant::QuantizedWeights block;  // the quantized block of rows (the baselines' weights)
};

Result<HostExpert> make_host_expert(const GemmCase& c, std::mt19937_64& rng) {
  const std::uint32_t n = c.n(), k = c.k();
  const std::uint32_t block = std::gcd(n, 512u);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> w(std::uint64_t{block} * k);
  for (float& v : w) v = dist(rng);
  MOEJIT_ASSIGN_OR_RETURN(auto q, quant::quantize(w, 1, block, k, {c.format->weight, c.format->group, c.format->scale}));
  std::vector<float> bias;
  if (c.model->bias) {
    bias.resize(block);
    for (float& v : bias) v = dist(rng);
  }
  quant::PackOptions po;
  po.rows = c.projection == Projection::gate_up ? quant::RowOrder::concatenated : quant::RowOrder::plain;
  po.bias = bias;
  po.order = quant::packed_order_for(c.format->act, c.format->weight);
  MOEJIT_ASSIGN_OR_RETURN(auto packed, quant::pack(q, po));
  const std::uint32_t repeats = n / block, groups = k / c.format->group;
  const std::uint64_t sb = scale_bytes(c.format->scale);
  const bool mxfp4 = c.format->weight == WeightFormat::mxfp4;
  const std::uint64_t scale_total = packed_scale_bytes(mxfp4, 1, block, k, c.format->group, sb);
  if (packed.qweight.size() != std::uint64_t{block} * k / 2 || packed.scales.size() != scale_total)
    return error(Code::internal, "packed sizes {} / {}: expected {} / {}", packed.qweight.size(), packed.scales.size(),
                 std::uint64_t{block} * k / 2, scale_total);
  HostExpert e;
  if (mxfp4) std::memcpy(&e.scale_range, packed.scales.data() + mxfp4_scale_range_offset(1, block, k), 4);
  e.block = std::move(q);
  for (std::uint32_t r = 0; r < repeats; ++r) e.weights.insert(e.weights.end(), packed.qweight.begin(), packed.qweight.end());
  for (std::uint32_t g = 0; g < groups; ++g)
    for (std::uint32_t r = 0; r < repeats; ++r)
      e.scales.insert(e.scales.end(), packed.scales.begin() + g * block * sb, packed.scales.begin() + (g + 1) * block * sb);
  for (std::uint32_t r = 0; r < repeats && !packed.bias.empty(); ++r)
    e.bias.insert(e.bias.end(), packed.bias.begin(), packed.bias.end());
  return e;
}

}  // namespace

Result<WeightSet> make_weights(DeviceLauncher& l, CUstream stream, const GemmCase& c, std::uint64_t rotate_bytes,
                               std::mt19937_64& rng) {
  WeightSet w;
  w.experts = c.model->experts;
  w.expert_weight = expert_weight_bytes(c);
  w.expert_scale = expert_scale_bytes(c);
  w.expert_bias = expert_bias_bytes(c);
  const std::uint64_t layer = std::uint64_t{w.experts} * (w.expert_weight + w.expert_scale + w.expert_bias);
  w.copies = rotation_copies(l, layer, rotate_bytes);
  MOEJIT_ASSIGN_OR_RETURN(HostExpert e, make_host_expert(c, rng));
  const std::uint64_t count = std::uint64_t{w.copies} * w.experts;
  MOEJIT_ASSIGN_OR_RETURN(w.weights, upload(l, stream, e.weights.data(), w.expert_weight, count * w.expert_weight));
  MOEJIT_TRY(replicate(l, stream, w.weights, w.expert_weight, count));
  // Scales: each copy of the layer is a whole packed scales buffer (for MXFP4, the per-expert
  // scale ranges follow the values), built once and replicated.
  const bool mxfp4 = c.format->weight == WeightFormat::mxfp4;
  w.copy_scale_stride = packed_scale_bytes(mxfp4, w.experts, c.n(), c.k(), c.format->group, scale_bytes(c.format->scale));
  MOEJIT_ASSIGN_OR_RETURN(w.scales, upload(l, stream, e.scales.data(), w.expert_scale, w.copies * w.copy_scale_stride));
  MOEJIT_TRY(replicate(l, stream, w.scales, w.expert_scale, w.experts));
  std::vector<u32> ranges(w.experts, e.scale_range);
  if (mxfp4)
    MOEJIT_TRY(l.copy_to_backend(w.scales.as<unsigned char>() + mxfp4_scale_range_offset(w.experts, c.n(), c.k()),
                                 ranges.data(), ranges.size() * 4, stream));
  MOEJIT_TRY(replicate(l, stream, w.scales, w.copy_scale_stride, w.copies));
  if (w.expert_bias > 0) {
    MOEJIT_ASSIGN_OR_RETURN(w.bias, upload(l, stream, e.bias.data(), w.expert_bias, count * w.expert_bias));
    MOEJIT_TRY(replicate(l, stream, w.bias, w.expert_bias, count));
  }
  MOEJIT_TRY(l.synchronize(stream));
  w.block = std::move(e.block);
  return w;
}

}  // namespace moejit::bench
