#include "host/launch.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "codegen/generate.hpp"
#include "host/block_runner.hpp"
#include "host/fiber.hpp"
#include "host/host_module.hpp"
#include "host/launch_state.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"
#include "support/env.hpp"
#include "support/log.hpp"

namespace moejit {
namespace {

using host::Dim3;

// Fiber stacks of all workers together: each guard page splits a mapping, and Linux allows
// 65530 mappings per process by default (vm.max_map_count).
constexpr std::uint64_t kMaxFiberStacks = 16384;
constexpr std::uint64_t kDefaultSpinTimeoutMs = 10000;

Status check_dims(const char* what, const Dim3& d, const Dim3& max) {
  if (d.x < 1 || d.y < 1 || d.z < 1 || d.x > max.x || d.y > max.y || d.z > max.z)
    return error(Code::invalid_argument,
                 "shape.{} = ({}, {}, {}): expected every dimension in 1..({}, {}, {})", what, d.x,
                 d.y, d.z, max.x, max.y, max.z);
  return {};
}

Status check_launch(const ResolvedKernel& kernel, const void* params,
                    const HostLaunchShape& shape) {
  if (kernel.spec.backend != Backend::host ||
      kernel.meta.kind != store::PayloadKind::host_shared_object)
    return error(Code::invalid_argument,
                 "kernel: spec {} has backend '{}' and a {} payload: expected a host kernel "
                 "(backend host, a shared object)",
                 codegen::spec_slug(kernel.spec), to_string(kernel.spec.backend),
                 kernel.meta.kind == store::PayloadKind::cubin ? "CUBIN" : "shared-object");
  if (kernel.binary.empty())
    return error(Code::invalid_argument, "kernel {}: its binary is empty: expected a shared object",
                 codegen::spec_slug(kernel.spec));
  if (params == nullptr)
    return error(Code::invalid_argument,
                 "params is null: expected a pointer to the kernel's params");
  MOEJIT_TRY(check_dims("block", shape.block, {1024, 1024, 64}));
  MOEJIT_TRY(check_dims("grid", shape.grid, {2147483647u, 65535, 65535}));
  const std::uint64_t threads =
      std::uint64_t{shape.block.x} * shape.block.y * shape.block.z;
  if (threads > 1024)
    return error(Code::invalid_argument,
                 "shape.block = ({}, {}, {}) is {} threads: expected 1 to 1024",
                 shape.block.x, shape.block.y, shape.block.z, threads);
  if (kernel.meta.block_threads != 0 && threads > kernel.meta.block_threads)
    return error(Code::invalid_argument,
                 "shape.block = ({}, {}, {}) is {} threads: expected at most the kernel's launch "
                 "bounds, {}",
                 shape.block.x, shape.block.y, shape.block.z, threads, kernel.meta.block_threads);
  if (shape.dynamic_shared_bytes < kernel.meta.dynamic_shared_bytes)
    return error(Code::invalid_argument,
                 "shape.dynamic_shared_bytes = {}: expected at least the {} bytes kernel {} needs",
                 shape.dynamic_shared_bytes, kernel.meta.dynamic_shared_bytes,
                 codegen::spec_slug(kernel.spec));
  if (kernel.spec.arch != Arch::none) {
    const ArchInfo& arch = arch_info(kernel.spec.arch);
    if (shape.dynamic_shared_bytes > arch.max_shared_per_block)
      return error(Code::invalid_argument,
                   "shape.dynamic_shared_bytes = {}: expected at most the {} bytes a block may "
                   "use on {}",
                   shape.dynamic_shared_bytes, arch.max_shared_per_block, arch.name);
  }
  return {};
}

Result<bool> reverse_block_order_from_environment() {
  const std::optional<std::string> order = env_string("MOEJIT_HOST_BLOCK_ORDER");
  if (!order || *order == "forward") return false;
  if (*order == "reverse") return true;
  return error(Code::invalid_argument, "MOEJIT_HOST_BLOCK_ORDER = '{}': expected 'forward' or 'reverse'", *order);
}

Result<unsigned> host_threads_from_environment() {
  MOEJIT_ASSIGN_OR_RETURN(std::uint64_t v, env_u64("MOEJIT_HOST_THREADS", 0));
  if (v > 4096)
    return error(Code::invalid_argument, "MOEJIT_HOST_THREADS = {}: expected 1 to 4096", v);
  if (v > 0) return static_cast<unsigned>(v);
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

Status launch_host_kernel(const ResolvedKernel& kernel, const void* params,
                          std::size_t params_bytes, const HostLaunchShape& shape) {
  MOEJIT_TRY(check_launch(kernel, params, shape));
  MOEJIT_ASSIGN_OR_RETURN(const host::HostModule* module, host::load_host_module(kernel));
  if (params_bytes != module->params_bytes)
    return error(Code::invalid_argument,
                 "params_bytes = {}: expected {}, the size of the params type kernel {} was "
                 "compiled with",
                 params_bytes, module->params_bytes, codegen::spec_slug(kernel.spec));

  host::LaunchPlan plan;
  plan.entry = module->entry;
  plan.params = params;
  plan.grid = shape.grid;
  plan.block = shape.block;
  plan.block_threads = shape.block.x * shape.block.y * shape.block.z;
  plan.blocks = std::uint64_t{shape.grid.x} * shape.grid.y * shape.grid.z;
  plan.dynamic_shared_bytes = shape.dynamic_shared_bytes;
  plan.kernel_label = codegen::spec_slug(kernel.spec);
  MOEJIT_ASSIGN_OR_RETURN(plan.stack_bytes, host::fiber_stack_bytes_from_environment());
  MOEJIT_ASSIGN_OR_RETURN(std::uint64_t spin_ms,
                          env_u64("MOEJIT_HOST_SPIN_TIMEOUT_MS", kDefaultSpinTimeoutMs));
  plan.spin_timeout = std::chrono::milliseconds(spin_ms);
  MOEJIT_ASSIGN_OR_RETURN(plan.reverse_order, reverse_block_order_from_environment());
  MOEJIT_ASSIGN_OR_RETURN(unsigned threads, host_threads_from_environment());
  const std::uint64_t by_stacks = std::max<std::uint64_t>(1, kMaxFiberStacks / plan.block_threads);
  plan.workers = static_cast<unsigned>(
      std::min<std::uint64_t>({threads, plan.blocks, by_stacks}));

  host::LaunchState state(plan);
  auto work = [&state] {
    auto runner = host::BlockRunner::create(state);
    if (!runner.ok()) {
      state.fail(runner.status());
      return;
    }
    while (!state.aborted()) {
      const std::optional<std::uint64_t> b = state.take_block();
      if (!b) break;
      (*runner)->run(*b);
    }
  };
  // The caller is one of the workers, so a launch with one worker starts no thread.
  std::vector<std::thread> helpers;
  for (unsigned i = 1; i < plan.workers; ++i) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error& e) {
      log(LogLevel::warn, "host launch of {}: runs with {} worker threads, not {}: {}",
          plan.kernel_label, i, plan.workers, e.what());
      break;
    }
  }
  work();
  for (auto& h : helpers) h.join();
  return state.result();
}

}  // namespace moejit
