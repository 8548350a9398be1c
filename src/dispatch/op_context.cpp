#include "dispatch/op_context.hpp"

#include "support/env.hpp"
#include "support/log.hpp"

namespace moejit::dispatch {
namespace {

// Every kernel the ops launch (align, grouped GEMM, reduce) waits for its predecessors with
// griddepcontrol.wait before touching memory, so each may be launched with programmatic
// dependent launch (honoured on sm_90 and newer): its launch and prologue overlap the tail of
// the kernel ahead of it. MOEJIT_PDL=0 turns it off.
bool programmatic_launch_enabled() {
  static const bool enabled = [] {
    auto v = env_bool("MOEJIT_PDL", true);
    if (!v.ok()) {
      log(LogLevel::warn, "{}; programmatic dependent launch stays on", v.status().message());
      return true;
    }
    return *v;
  }();
  return enabled;
}

}  // namespace

Status run_kernel(OpContext& ctx, const KernelSpec& spec, const LaunchGrid& grid, const void* params,
                  std::size_t params_bytes, void* stream, const Decision& why) {
  auto resolved = ctx.resolver.resolve(spec);
  if (!resolved.ok()) return resolved.status();
  ctx.observer.used(spec, why);
  LaunchDims d = launch_dims(*resolved->kernel, grid);
  d.programmatic_dependent_launch = programmatic_launch_enabled();
  MOEJIT_TRY(ctx.launcher.launch(*resolved->kernel, d, params, params_bytes, stream));
  ctx.launches.fetch_add(1, std::memory_order_relaxed);
  return {};
}

}  // namespace moejit::dispatch
