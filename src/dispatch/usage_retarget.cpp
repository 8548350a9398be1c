#include "dispatch/usage_retarget.hpp"

#include <algorithm>
#include <unordered_set>

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
  for (const UsageRecord& record : records) {
    const Backend to = backend.value_or(record.spec.backend);
    const bool made_here = record.spec.arch == arch;
    if (made_here) {
      KernelSpec s = record.spec;
      s.backend = to;
      if (seen.insert(s).second) out.specs.push_back(s);
    }
    std::size_t without_call = 0;
    for (std::uint32_t sms : made_here ? only_extra : all_sms) {
      auto s = plan_on(record, arch, to, sms, without_call);
      if (!s.ok())
        return error(s.status().code(), "usage record {} re-targeted to {}: {}", usage_record_json(record),
                     arch_info(arch).name, s.status().message());
      if (seen.insert(*s).second) out.specs.push_back(*s);
    }
    out.gemms_without_call += without_call != 0;
  }
  return out;
}

}  // namespace moejit::dispatch
