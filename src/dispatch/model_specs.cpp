#include "dispatch/model_specs.hpp"

#include <algorithm>
#include <unordered_set>

#include "dispatch/fused_moe_op.hpp"
#include "dispatch/tile_configs.hpp"
#include "kernels/act_quantize.hpp"
#include "quant/formats.hpp"
#include "quant/pack.hpp"
#include "spec/arch.hpp"
#include "spec/device_profiles.hpp"
#include "spec/spec_fields.hpp"

namespace moejit::dispatch {

Result<std::vector<KernelSpec>> model_specs(const ModelDesc& m, Arch arch, Backend backend, std::uint32_t extra_sms,
                                            bool only_sms) {
  if (m.hidden == 0 || m.hidden % 32 != 0)
    return error(Code::invalid_argument, "model field 'hidden' = {}: expected a positive multiple of 32", m.hidden);
  if (m.experts == 0) return error(Code::invalid_argument, "model field 'experts' = 0: expected at least one expert");
  if (m.tensor_parallel == 0 || m.intermediate % m.tensor_parallel != 0)
    return error(Code::invalid_argument, "model field 'tensor_parallel' = {}: expected a divisor of intermediate = {}",
                 m.tensor_parallel, m.intermediate);
  if (m.intermediate == 0 || (m.intermediate / m.tensor_parallel) % 32 != 0)
    return error(Code::invalid_argument,
                 "model field 'intermediate' = {}: expected a positive multiple of 32 on each of tensor_parallel = {} "
                 "ranks",
                 m.intermediate, m.tensor_parallel);
  if (m.expert_parallel == 0 || m.experts % m.expert_parallel != 0)
    return error(Code::invalid_argument, "model field 'expert_parallel' = {}: expected a divisor of experts = {}",
                 m.expert_parallel, m.experts);
  if (m.topk == 0 || m.topk > m.experts)
    return error(Code::invalid_argument, "model field 'topk' = {}: expected 1 to experts = {}", m.topk, m.experts);
  const std::uint32_t inter = m.intermediate / m.tensor_parallel, local = m.experts / m.expert_parallel;
  // Each rank's weights must be packed shapes a kernel addresses (as packing requires).
  if (inter > kMaxPackedExtent / 2 || !quant::packed_extents_fit(local, 2 * inter, m.hidden) ||
      !quant::packed_extents_fit(local, m.hidden, inter))
    return error(Code::invalid_argument,
                 "model fields 'experts' = {}, 'hidden' = {}, 'intermediate' = {} (expert_parallel {}, tensor_parallel "
                 "{}): each rank's gate/up weights are [{}, {}, {}]; expected at most {} experts per rank, "
                 "hidden and 2 x intermediate per rank at most {}, and hidden x intermediate per rank at most {} "
                 "(one expert's packed bytes)",
                 m.experts, m.hidden, m.intermediate, m.expert_parallel, m.tensor_parallel, local,
                 2 * static_cast<std::uint64_t>(inter), m.hidden, kMaxExperts, kMaxPackedExtent,
                 kMaxExpertPackedBytes);
  // Warm-up plans every T up to max_tokens; the run refuses calls whose routed slots pass the
  // kernels' 32-bit indices.
  constexpr std::uint32_t kMaxWarmTokens = 1u << 20;
  if (m.max_tokens == 0 || m.max_tokens > kMaxWarmTokens ||
      routed_slots(m.max_tokens, m.topk, local) > kMaxRoutedIndex)
    return error(Code::invalid_argument,
                 "model field 'max_tokens' = {}: expected 1 to {}, with max_tokens x topk ({}) + 127 per local expert "
                 "({}) at most 2^31 - 1",
                 m.max_tokens, kMaxWarmTokens, m.topk, local);
  // The weight format's own fields, named as the caller wrote them.
  const bool mxfp4 = m.format == WeightFormat::mxfp4;
  if (mxfp4 && m.group_size != 32)
    return error(Code::invalid_argument, "model field 'group_size' = {}: expected 32 for mxfp4 (one E8M0 scale per 32 k)",
                 m.group_size);
  if (m.format != WeightFormat::none && (mxfp4 ? m.scale != DType::e8m0 : m.scale != DType::bf16 && m.scale != DType::f16))
    return error(Code::invalid_argument, "model field 'scale_dtype' = {}: expected {}", to_string(m.scale),
                 mxfp4 ? "e8m0 for mxfp4" : "bf16 or f16 for INT4");
  if (m.act == DType::e2m1 && !mxfp4)
    return error(Code::invalid_argument,
                 "model field 'act' = e2m1 with {} weights: expected mxfp4 weights (the block-scaled mma takes e2m1 x "
                 "e2m1)",
                 to_string(m.format));
  // Group 0 is per-channel: each projection's scale group spans its own K.
  const std::uint32_t g13 = m.group_size ? m.group_size : m.hidden, g2 = m.group_size ? m.group_size : inter;
  MOEJIT_TRY(quant::check_weight_format(m.format, g13, m.scale, m.hidden));
  MOEJIT_TRY(quant::check_weight_format(m.format, g2, m.scale, inter));

  // The request fused_moe_specs sees, with placeholder pointers: only shapes and dtypes matter.
  alignas(256) static const int placeholder[4] = {};
  FusedMoeRequest r;
  // Layers with quantized activations (W4A8, W4A4) are enumerated with bf16 hidden states: their
  // GEMMs are the same for every hidden dtype, and the f16 input's quantization is added below.
  const PackedOrder order = quant::packed_order_for(m.act, m.format);
  const bool quantized = quant::quantized_act_of(order) != DType::none;
  if (m.act == DType::e2m1 && !has_block_scale_mma(arch))
    return error(Code::unsupported,
                 "model field 'act' = e2m1 for {}: MXFP4 activations need the block-scaled mma of sm_120a or sm_121a; "
                 "expected one of those targets (or e4m3 activations)",
                 arch_info(arch).name);
  r.w13 = {m.format, g13, m.scale, local, 2 * inter, m.hidden, true, placeholder, placeholder, nullptr, nullptr, order};
  r.w2 = {m.format, g2, m.scale, local, m.hidden, inter, false, placeholder, placeholder, nullptr, nullptr, order};
  r.act = quantized ? DType::bf16 : m.act;
  r.act_scale = m.act_scale;
  r.out = m.out;
  r.activation = m.activation;
  r.topk = m.topk;
  r.global_experts = m.experts;
  r.hidden = r.topk_ids = placeholder;
  r.topk_weights = reinterpret_cast<const float*>(placeholder);
  r.output = const_cast<int*>(placeholder);
  r.expert_map = m.expert_parallel > 1 ? placeholder : nullptr;

  // Every token count on every device of the target: the tile rows, columns, stages and split
  // all depend on T and the SM count, and planning is cheap next to compiling.
  std::vector<KernelSpec> specs;
  std::unordered_set<KernelSpec, KernelSpecHash> seen;
  std::vector<std::uint32_t> sm_counts;
  if (!only_sms) for (std::uint32_t sms : sm_counts_for(arch)) sm_counts.push_back(sms);
  if (extra_sms != 0 && std::find(sm_counts.begin(), sm_counts.end(), extra_sms) == sm_counts.end())
    sm_counts.push_back(extra_sms);
  for (std::uint32_t sms : sm_counts)
    for (std::uint32_t t = 1; t <= m.max_tokens; ++t) {
      r.tokens = static_cast<std::int32_t>(t);
      MOEJIT_ASSIGN_OR_RETURN(FusedMoeSpecs s, fused_moe_specs(r, arch, backend, sms));
      for (const KernelSpec& spec : {s.align, s.up, s.down, s.reduce, s.quantize_hidden, s.quantize_intermediate})
        if (spec.op != Op::none && seen.insert(spec).second) specs.push_back(spec);
    }
  if (quantized && !specs.empty())
    specs.push_back(act_quantize_spec(DType::f16, m.act_scale, m.hidden, arch, backend));
  return specs;
}

}  // namespace moejit::dispatch
