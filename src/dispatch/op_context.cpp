#include "dispatch/op_context.hpp"

namespace moejit::dispatch {

Status run_kernel(OpContext& ctx, const KernelSpec& spec, const LaunchDims& dims, const void* params,
                  std::size_t params_bytes, void* stream, const Decision& why) {
  auto resolved = ctx.resolver.resolve(spec);
  if (!resolved.ok()) return resolved.status();
  ctx.observer.used(spec, why);
  MOEJIT_TRY(ctx.launcher.launch(*resolved->kernel, dims, params, params_bytes, stream));
  ctx.launches.fetch_add(1, std::memory_order_relaxed);
  return {};
}

}  // namespace moejit::dispatch
