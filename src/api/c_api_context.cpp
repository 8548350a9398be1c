// C ABI: contexts and statistics.

#include <algorithm>
#include <cstring>
#include <mutex>

#include "api/api_support.hpp"
#include "runtime/device_launcher.hpp"
#include "host/host_launcher.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"
#include "support/env.hpp"
#include "support/log.hpp"

using namespace moejit;

Result<Launcher*> moejit_context_s::require_launcher() {
  if (launcher) return launcher.get();
  return launcher_error;
}

namespace {

Result<std::unique_ptr<moejit_context_s>> make_context(const moejit_context_options_t& o) {
  if (o.backend < MOEJIT_BACKEND_AUTO || o.backend > MOEJIT_BACKEND_HOST)
    return error(Code::invalid_argument, "argument 'options->backend' = {}: expected AUTO, DEVICE or HOST",
                 static_cast<int>(o.backend));
  if (o.device_ordinal < 0)
    return error(Code::invalid_argument, "argument 'options->device_ordinal' = {}: expected >= 0", o.device_ordinal);
  if (o.read_only_dir_count > 0 && o.read_only_dirs == nullptr)
    return error(Code::invalid_argument,
                 "argument 'options->read_only_dirs' is null: expected an array of read_only_dir_count = {} paths",
                 o.read_only_dir_count);

  if (o.log != nullptr) {
    // The sink is process-wide: the last context that sets one receives every message.
    moejit_log_fn fn = o.log;
    void* user = o.log_user_data;
    set_log_sink([fn, user](LogLevel level, std::string_view message) {
      std::string text(message);
      fn(user, static_cast<moejit_log_level_t>(level), text.c_str());
    });
  }

  auto ctx = std::make_unique<moejit_context_s>();
  MOEJIT_ASSIGN_OR_RETURN(KernelResolver::Options ro, KernelResolver::Options::from_environment());
  if (o.cache_dir != nullptr) ro.store.dir = o.cache_dir;
  for (std::uint32_t i = 0; i < o.read_only_dir_count; ++i) {
    if (o.read_only_dirs[i] == nullptr)
      return error(Code::invalid_argument, "argument 'options->read_only_dirs[{}]' is null: expected a directory path", i);
    ro.store.read_only.emplace_back(o.read_only_dirs[i]);
  }
  if (o.compile_threads > 0) ro.compile_threads = o.compile_threads;
  if (o.frozen != 0) ro.frozen = true;
  MOEJIT_ASSIGN_OR_RETURN(ctx->resolver, KernelResolver::create(std::move(ro)));

  MOEJIT_ASSIGN_OR_RETURN(bool print, env_bool("MOEJIT_PRINT_CONFIGS", false));
  MOEJIT_ASSIGN_OR_RETURN(ctx->check_inputs_on_device, env_bool("MOEJIT_CHECK_INPUTS", false));
  ctx->observer = std::make_unique<dispatch::SpecObserver>(o.usage_manifest ? o.usage_manifest : "", print);

  Arch host_arch = Arch::sm_90a;
  if (o.host_arch != nullptr) {
    const auto parsed = parse_arch(o.host_arch);
    if (!parsed)
      return error(Code::invalid_argument, "argument 'options->host_arch' = '{}': expected sm_80 ... sm_121a",
                   o.host_arch);
    host_arch = *parsed;
  }
  if (o.backend == MOEJIT_BACKEND_HOST) {
    ctx->backend = Backend::host;
    ctx->launcher = std::make_unique<HostLauncher>(host_arch);
    return ctx;
  }
  auto device = DeviceLauncher::create(o.device_ordinal);
  if (device.ok()) {
    ctx->backend = Backend::device;
    ctx->launcher = std::move(device).value();
  } else if (o.backend == MOEJIT_BACKEND_AUTO && !CudaDriver::get().ok()) {
    // AUTO means "the GPU if there is one": with no driver or no device the caller cannot hold
    // device pointers, so the host backend is safe; it is said out loud, never silently. A GPU
    // that is there (one without a moejit target, or one that fails) is an error below: the
    // caller's pointers are then device memory the CPU must not touch.
    log(LogLevel::warn, "backend AUTO: no CUDA driver or device ({}); using the host backend", device.status().message());
    ctx->backend = Backend::host;
    ctx->launcher = std::make_unique<HostLauncher>(host_arch);
  } else if (o.backend == MOEJIT_BACKEND_AUTO) {
    return device.status();  // names the device and, when unsupported, its compute capability
  } else {
    // A device context without a GPU still warms the store; launches report why they cannot run.
    ctx->backend = Backend::device;
    ctx->launcher_error = device.status();
  }
  return ctx;
}

}  // namespace

extern "C" {

void moejit_context_options_init(moejit_context_options_t* options) {
  if (options == nullptr) return;
  *options = moejit_context_options_t{};
  options->struct_size = sizeof(moejit_context_options_t);
  options->backend = MOEJIT_BACKEND_AUTO;
}

moejit_status_t moejit_context_create(const moejit_context_options_t* options, moejit_context_t* context) {
  return api::guarded([&]() -> Status {
    if (context == nullptr)
      return error(Code::invalid_argument, "argument 'context' is null: expected where to store the new context");
    *context = nullptr;
    moejit_context_options_t o;
    moejit_context_options_init(&o);
    if (options != nullptr) {
      MOEJIT_TRY(api::check_struct(options, options->struct_size,
                                   MOEJIT_STRUCT_FIRST_SIZE(moejit_context_options_t, host_arch), "options"));
      // A caller built before the later fields gives a shorter struct: they keep their defaults.
      std::memcpy(&o, options, std::min<std::size_t>(options->struct_size, sizeof o));
      o.struct_size = sizeof o;
    }
    MOEJIT_ASSIGN_OR_RETURN(auto ctx, make_context(o));
    *context = ctx.release();
    return {};
  });
}

moejit_status_t moejit_context_destroy(moejit_context_t context) {
  return api::guarded([&]() -> Status {
    delete context;
    return {};
  });
}

moejit_status_t moejit_context_backend(moejit_context_t context, moejit_backend_t* backend, const char** arch) {
  return api::guarded([&]() -> Status {
    MOEJIT_TRY(api::check_context(context));
    if (backend != nullptr) *backend = static_cast<moejit_backend_t>(context->backend);
    if (arch != nullptr) {
      *arch = nullptr;
      if (context->launcher) *arch = to_string(context->launcher->arch()).data();  // static names, NUL-terminated
    }
    return {};
  });
}

void moejit_stats_init(moejit_stats_t* stats) {
  if (stats == nullptr) return;
  *stats = moejit_stats_t{};
  stats->struct_size = sizeof(moejit_stats_t);
}

moejit_status_t moejit_get_stats(moejit_context_t context, moejit_stats_t* stats) {
  return api::guarded([&]() -> Status {
    MOEJIT_TRY(api::check_context(context));
    MOEJIT_TRY(api::check_struct(stats, stats ? stats->struct_size : 0, sizeof(moejit_stats_t), "stats"));
    const ResolverStats s = context->resolver->stats();
    stats->memory_hits = s.memory_hits;
    stats->disk_hits = s.disk_hits;
    stats->compiles = s.compiles;
    stats->compile_ms = s.compile_ms;
    stats->compile_errors = s.compile_errors;
    stats->corrupt_entries = s.store.corrupt;
    stats->lock_waits = s.store.lock_waits;
    stats->lock_wait_ms = s.store.lock_wait_ms;
    stats->launches = context->launches.load();
    return {};
  });
}

}  // extern "C"
