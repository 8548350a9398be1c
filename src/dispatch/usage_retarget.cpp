#include "dispatch/usage_retarget.hpp"

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
      if (record.gemm) return grouped_gemm_spec_for(record.spec, *record.gemm, arch, backend, sms);
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
                                       std::optional<Backend> backend) {
  RetargetedUsage out;
  std::unordered_set<KernelSpec, KernelSpecHash> seen;
  const std::vector<std::uint32_t> sm_counts = sm_counts_for(arch);
  for (const UsageRecord& record : records) {
    const Backend to = backend.value_or(record.spec.backend);
    if (record.spec.arch == arch) {
      KernelSpec s = record.spec;
      s.backend = to;
      if (seen.insert(s).second) out.specs.push_back(s);
      continue;
    }
    std::size_t without_call = 0;
    for (std::uint32_t sms : sm_counts) {
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
