#include "dispatch/usage_retarget.hpp"

#include <algorithm>
#include <unordered_set>

#include "dispatch/fused_moe_op.hpp"
#include "dispatch/grouped_gemm_op.hpp"
#include "kernels/act_quantize.hpp"
#include "kernels/moe_align.hpp"
#include "spec/arch.hpp"
#include "spec/device_profiles.hpp"
#include "spec/spec_fields.hpp"

namespace moejit::dispatch {
namespace {

// `record` on `arch` / `backend` on a device of `sms` multiprocessors, as that target's heuristics
// would pick it.
Result<KernelSpec> plan_on(const UsageRecord& record, Arch arch, Backend backend, std::uint32_t sms,
                           std::size_t& gemms_without_call) {
  KernelSpec s = record.spec;
  s.arch = arch;
  s.backend = backend;
  switch (s.op) {
    case Op::grouped_gemm:
      if (auto call = record.gemm ? record.gemm : stand_in_call(record.spec))
        return grouped_gemm_spec_for(record.spec, *call, arch, backend, sms);
      ++gemms_without_call;
      return s;
    case Op::moe_align:
      s.warps = moe_align_warps(s.experts, arch);
      return s;
    case Op::act_quantize:
      return act_quantize_spec(s.act, s.act_scale, s.n, arch, backend);
    case Op::moe_reduce:
    case Op::none:
      return s;
  }
  return s;
}

// The kernels of a fused layer, which another target asks for the layer as a whole: the
// routing align and the GEMMs follow the layer's tile rows, which depend on the device.
bool follows_layer_rows(const UsageRecord& record) {
  return record.spec.op == Op::moe_align || (record.gemm && record.gemm->fused_layer != 0);
}

// Every kernel the layer of `call` picks on `arch` / `backend` with `sms` multiprocessors at each
// batch size it stands for; the layer is checked once, then planned per batch size.
template <typename Add>
Status plan_layer_on(const LayerCall& call, Arch arch, Backend backend, std::uint32_t sms, const Add& add) {
  MOEJIT_ASSIGN_OR_RETURN(FusedMoeRequest r, layer_request(call, static_cast<std::int32_t>(call.tokens_from)));
  for (std::uint32_t t = call.tokens_from; t <= call.tokens_to; ++t) {
    r.tokens = static_cast<std::int32_t>(t);
    MOEJIT_ASSIGN_OR_RETURN(const FusedMoeSpecs s, fused_moe_specs(r, arch, backend, sms));
    for (const KernelSpec& spec : {s.align, s.quantize_hidden, s.up, s.quantize_intermediate, s.down, s.reduce})
      if (spec.op != Op::none) add(spec);
  }
  return {};
}

}  // namespace

Result<RetargetedUsage> retarget_usage(const std::vector<UsageRecord>& records, Arch arch,
                                       std::optional<Backend> backend, std::uint32_t extra_sms) {
  RetargetedUsage out;
  std::unordered_set<KernelSpec, KernelSpecHash> seen;
  std::vector<std::uint32_t> all_sms = sm_counts_for(arch);
  if (extra_sms != 0 && std::find(all_sms.begin(), all_sms.end(), extra_sms) == all_sms.end())
    all_sms.push_back(extra_sms);
  const std::vector<std::uint32_t> only_extra = extra_sms != 0 ? std::vector<std::uint32_t>{extra_sms}
                                                               : std::vector<std::uint32_t>{};
  // Manifests of older versions hold no layers: their layers' kernels are planned again one by
  // one, with the tile rows they were recorded with.
  const bool has_layers = std::any_of(records.begin(), records.end(), [](const UsageRecord& r) { return r.layer; });
  auto add = [&](const KernelSpec& s) {
    if (seen.insert(s).second) out.specs.push_back(s);
  };
  for (const UsageRecord& record : records) {
    if (record.layer) {
      const LayerCall& layer = *record.layer;
      // On its own target its kernels are recorded as they ran; planned for the extra SM count.
      for (std::uint32_t sms : layer.arch == arch ? only_extra : all_sms)
        if (Status s = plan_layer_on(layer, arch, backend.value_or(layer.backend), sms, add); !s.ok())
          return error(s.code(), "usage record {} re-targeted to {}: {}", usage_record_json(record),
                       arch_info(arch).name, s.message());
      continue;
    }
    const Backend to = backend.value_or(record.spec.backend);
    const bool made_here = record.spec.arch == arch;
    const bool layer_kernel = follows_layer_rows(record);
    if (made_here) {
      KernelSpec s = record.spec;
      s.backend = to;
      add(s);
    } else if (layer_kernel && !has_layers) {
      ++out.kernels_without_layer;
    }
    if (layer_kernel && has_layers) continue;  // its layer's record plans it
    std::size_t without_call = 0;
    for (std::uint32_t sms : made_here ? only_extra : all_sms) {
      auto s = plan_on(record, arch, to, sms, without_call);
      if (!s.ok())
        return error(s.status().code(), "usage record {} re-targeted to {}: {}", usage_record_json(record),
                     arch_info(arch).name, s.status().message());
      add(*s);
    }
    out.gemms_without_call += without_call != 0;
  }
  return out;
}

}  // namespace moejit::dispatch
