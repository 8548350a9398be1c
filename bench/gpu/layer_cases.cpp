#include "bench/gpu/layer_cases.hpp"

#include <algorithm>

#include "bench/gpu/device_data.hpp"
#include "bench/gpu/result_json.hpp"
#include "bench/gpu/routing.hpp"
#include "spec/spec_fields.hpp"

namespace moejit::bench {

namespace {

using Json = nlohmann::ordered_json;

// The format's 16-bit activation dtype (bf16 or f16), or `quantized` for W4A8 / W4A4.
moejit_dtype_t half_or(const WeightChoice& f, moejit_dtype_t quantized) {
  return quantized_act(f) ? quantized : is_f16_act(f) ? MOEJIT_DTYPE_F16 : MOEJIT_DTYPE_BF16;
}

// Copy `copy` of a weight set as the API's packed-weights view (the buffers stay the set's).
moejit_packed_weights_t packed_view(const WeightSet& w, const GemmCase& c, std::uint32_t copy) {
  moejit_packed_weights_t p;
  moejit_packed_weights_init(&p);
  p.format = c.format->weight == WeightFormat::mxfp4 ? MOEJIT_WEIGHT_MXFP4 : MOEJIT_WEIGHT_INT4_SYM;
  p.group_size = c.format->group;
  p.scale_dtype = c.format->scale == DType::e8m0 ? MOEJIT_DTYPE_E8M0
                  : c.format->scale == DType::f16 ? MOEJIT_DTYPE_F16
                                                  : MOEJIT_DTYPE_BF16;
  p.experts = w.experts;
  p.n = c.n();
  p.k = c.k();
  p.act_and_mul = c.projection == Projection::gate_up ? 1 : 0;
  // The packing's activation width.
  p.act_dtype = half_or(*c.format, is_w4a4(*c.format) ? MOEJIT_DTYPE_E2M1 : MOEJIT_DTYPE_E4M3);
  p.qweight = const_cast<u8*>(w.weights_of(copy));
  p.scales = const_cast<void*>(w.scales_of(copy));
  p.bias = const_cast<float*>(w.bias_of(copy));
  p.qweight_bytes = std::uint64_t{w.experts} * w.expert_weight;
  p.scales_bytes = w.copy_scale_stride;  // one copy's whole packed scales buffer
  p.bias_bytes = w.bias ? std::uint64_t{w.experts} * w.expert_bias : 0;
  return p;
}

Status c_status(moejit_status_t s, const char* call) {
  if (s == MOEJIT_OK) return {};
  return error(Code::internal, "{}: {}", call, moejit_last_error());
}

}  // namespace

Result<Json> run_layer_case(DeviceLauncher& l, CUstream stream, const LayerRun& run, const LayerCase& c,
                            const WeightSet& w13, const WeightSet& w2, std::mt19937_64& rng) {
  const std::uint32_t tokens = c.tokens, hidden = c.model->hidden, topk = c.model->topk;
  const std::uint64_t pairs = std::uint64_t{tokens} * topk;

  // Routings (top-k ids) and routing weights; hidden states and outputs, one per weight copy.
  std::vector<std::int32_t> ids;
  double touched = 0;
  for (int r = 0; r < run.routings; ++r) {
    const Routing routing = random_routing(rng, tokens, c.model->experts, topk, 16);
    ids.insert(ids.end(), routing.topk_ids.begin(), routing.topk_ids.end());
    touched += routing.touched_experts;
  }
  touched /= run.routings;
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_ids, upload(l, stream, ids.data(), ids.size() * 4, ids.size() * 4));
  std::vector<float> weights(pairs);
  std::uniform_real_distribution<float> tw(0.1f, 1.0f);
  for (float& v : weights) v = tw(rng);
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_weights, upload(l, stream, weights.data(), pairs * 4, pairs * 4));
  const std::uint32_t slots = std::max(w13.copies, w2.copies);
  const std::uint64_t row_bytes = round16(std::uint64_t{tokens} * hidden * 2);
  const std::vector<u16> x = is_f16_act(*c.format) ? random_f16(std::uint64_t{tokens} * hidden, rng)
                                                    : random_bf16(std::uint64_t{tokens} * hidden, rng);
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_x, upload(l, stream, x.data(), x.size() * 2, row_bytes * slots));
  MOEJIT_TRY(replicate(l, stream, d_x, row_bytes, slots));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_out, DeviceBuffer::allocate(l, row_bytes * slots));
  MOEJIT_TRY(l.fill(d_out.data(), 0xff, row_bytes * slots, stream));  // NaN: unwritten outputs fail the check

  std::vector<moejit_packed_weights_t> p13, p2;
  for (std::uint32_t i = 0; i < w13.copies; ++i) p13.push_back(packed_view(w13, c.gate_up(), i));
  for (std::uint32_t i = 0; i < w2.copies; ++i) p2.push_back(packed_view(w2, c.down(), i));
  moejit_fused_moe_args_t base;
  moejit_fused_moe_args_init(&base);
  base.w13 = &p13[0];
  base.w2 = &p2[0];
  base.activation = c.model->activation == Epilogue::swiglu_oai ? MOEJIT_EPILOGUE_SWIGLU_OAI : MOEJIT_EPILOGUE_SILU_AND_MUL;
  // f16: f16 hidden states and output. W4A8 / W4A4: bf16 hidden states, which the layer
  // quantizes (to e4m3 per token or per 128 columns, to MXFP4 per 32), as an engine without
  // quantized dispatch sends them.
  base.act_dtype = half_or(*c.format, MOEJIT_DTYPE_BF16);
  base.out_dtype = is_f16_act(*c.format) ? MOEJIT_DTYPE_F16 : MOEJIT_DTYPE_BF16;
  if (is_w4a8(*c.format)) base.act_scale = c.format->block128 ? MOEJIT_ACT_SCALE_BLOCK128 : MOEJIT_ACT_SCALE_TOKEN;
  if (is_w4a4(*c.format)) base.act_scale = MOEJIT_ACT_SCALE_BLOCK32;
  base.tokens = static_cast<std::int32_t>(tokens);
  base.topk = topk;
  base.hidden = d_x.data();
  base.topk_ids = d_ids.as<const std::int32_t>();
  base.topk_weights = d_weights.as<const float>();
  base.output = d_out.data();
  std::uint64_t workspace_bytes = 0;
  MOEJIT_TRY(c_status(moejit_fused_moe_workspace_size(run.context, &base, &workspace_bytes),
                      "moejit_fused_moe_workspace_size"));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer workspace, DeviceBuffer::allocate(l, workspace_bytes));
  MOEJIT_TRY(l.fill(workspace.data(), 0, workspace_bytes, stream));
  base.workspace = workspace.data();
  base.workspace_bytes = workspace_bytes;
  MOEJIT_TRY(l.synchronize(stream));

  auto enqueue = [&](std::uint64_t i) {
    moejit_fused_moe_args_t a = base;
    a.w13 = &p13[i % p13.size()];
    a.w2 = &p2[i % p2.size()];
    a.topk_ids = d_ids.as<const std::int32_t>() + (i % static_cast<std::uint64_t>(run.routings)) * pairs;
    a.hidden = d_x.as<const unsigned char>() + (i % slots) * row_bytes;
    a.output = d_out.as<unsigned char>() + (i % slots) * row_bytes;
    return c_status(moejit_fused_moe(run.context, &a, stream), "moejit_fused_moe");
  };
  MOEJIT_ASSIGN_OR_RETURN(Timing t, time_launches(l.driver(), stream, enqueue, run.timing));

  std::vector<u16> out(std::uint64_t{tokens} * hidden);
  MOEJIT_TRY(l.copy_from_backend(out.data(), d_out.data(), out.size() * 2, stream));
  MOEJIT_TRY(l.synchronize(stream));
  const auto nonfinite = count_nonfinite(out, out_dtype(*c.format));

  const CaseBytes bytes = layer_bytes(c, touched);
  const Floor floor = case_floor(bytes, layer_flops(c), run.copy_bytes_per_s, run.flops_per_s);
  Json j;
  j["model"] = c.model->name;
  j["format"] = c.format->name;
  j["act"] = to_string(c.format->act);
  j["tokens"] = tokens;
  j["topk"] = topk;
  j["experts"] = c.model->experts;
  j["hidden"] = hidden;
  j["intermediate"] = c.model->intermediate;
  j["activation"] = to_string(c.model->activation);
  j["weight_copies"] = {w13.copies, w2.copies};
  j["touched_experts"] = touched;
  j["bytes"] = bytes_json(bytes);
  j["flops"] = layer_flops(c);
  j["workspace_bytes"] = workspace_bytes;
  add_timing(j, t, bytes, layer_flops(c));
  add_floor(j, floor, t.median_us);
  j["output_check"] = {{"checked", out.size()}, {"nonfinite", nonfinite}};
  if (nonfinite != 0)
    return error(Code::internal, "{} of {} layer outputs are not finite: rows left unwritten or NaN computed", nonfinite,
                 out.size());
  return j;
}

}  // namespace moejit::bench
