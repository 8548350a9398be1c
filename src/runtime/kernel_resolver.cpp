#include "runtime/kernel_resolver.hpp"

#include <chrono>
#include <mutex>

#include "codegen/generate.hpp"
#include "compile/host_compiler.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "spec/spec_fields.hpp"
#include "spec/spec_json.hpp"
#include "support/env.hpp"
#include "support/log.hpp"

namespace moejit {

std::string_view to_string(KernelSource source) {
  switch (source) {
    case KernelSource::memory: return "memory";
    case KernelSource::disk: return "disk";
    case KernelSource::compiled: return "compiled";
  }
  return "?";
}

Result<KernelResolver::Options> KernelResolver::Options::from_environment() {
  Options o;
  MOEJIT_ASSIGN_OR_RETURN(o.store, store::StoreOptions::from_environment());
  MOEJIT_ASSIGN_OR_RETURN(o.compile_threads, compile_threads_from_environment());
  MOEJIT_ASSIGN_OR_RETURN(o.frozen, env_bool("MOEJIT_FROZEN", false));
  MOEJIT_ASSIGN_OR_RETURN(NvrtcOptions nvrtc, NvrtcCompiler::options_from_environment());
  o.use_pch = nvrtc.use_pch;
  o.lineinfo = nvrtc.lineinfo;
  MOEJIT_ASSIGN_OR_RETURN(o.templates, codegen::TemplateSet::from_environment());
  return o;
}

KernelResolver::KernelResolver(Options options)
    : options_(std::move(options)),
      templates_(options_.templates ? options_.templates : codegen::TemplateSet::embedded()),
      store_(std::make_unique<store::Store>(options_.store)),
      pool_(options_.compile_threads) {}

KernelResolver::~KernelResolver() = default;

Result<std::unique_ptr<KernelResolver>> KernelResolver::create(Options options) {
  return std::unique_ptr<KernelResolver>(new KernelResolver(std::move(options)));
}

Result<Resolution> KernelResolver::resolve(const KernelSpec& spec) {
  {
    std::shared_lock lock(table_mutex_);
    if (auto it = table_.find(spec); it != table_.end()) {
      counters_.memory_hits.fetch_add(1, std::memory_order_relaxed);
      return Resolution{it->second.get(), KernelSource::memory};
    }
  }
  return build(spec);
}

std::future<Result<Resolution>> KernelResolver::resolve_async(const KernelSpec& spec) {
  return pool_.submit([this, spec] { return resolve(spec); });
}

Result<Resolution> KernelResolver::build(const KernelSpec& spec) {
  // Single flight: the first caller for a spec builds, later ones wait for its result.
  std::promise<Result<Resolution>> promise;
  std::shared_future<Result<Resolution>> pending;
  {
    std::lock_guard lock(flight_mutex_);
    if (auto f = failed_.find(spec); f != failed_.end()) return f->second;
    if (auto it = in_flight_.find(spec); it != in_flight_.end()) {
      pending = it->second;
    } else {
      // Re-check under the flight lock: a build may have finished since the table probe.
      std::shared_lock table_lock(table_mutex_);
      if (auto t = table_.find(spec); t != table_.end())
        return Resolution{t->second.get(), KernelSource::memory};
      in_flight_.emplace(spec, promise.get_future().share());
    }
  }
  if (pending.valid()) {
    Result<Resolution> r = pending.get();
    if (r.ok()) r.value().source = KernelSource::memory;  // built by another caller
    return r;
  }
  // Whatever happens in the build, the waiters get a result and the spec leaves in_flight_:
  // an exception escaping here would leave them waiting for ever.
  Result<Resolution> r = [&]() -> Result<Resolution> {
    try {
      return build_uncached(spec);
    } catch (const std::exception& e) {
      return error(Code::internal, "building the {} kernel for {}: {}", to_string(spec.op),
                   to_string(spec.arch), e.what());
    } catch (...) {
      return error(Code::internal, "building the {} kernel for {}: unknown exception",
                   to_string(spec.op), to_string(spec.arch));
    }
  }();
  {
    std::lock_guard lock(flight_mutex_);
    in_flight_.erase(spec);
    if (!r.ok() && r.status().code() == Code::compile_error) failed_.emplace(spec, r.status());
  }
  promise.set_value(r);
  return r;
}

Result<const KernelCompiler*> KernelResolver::compiler_for(Backend backend) {
  std::lock_guard lock(compiler_mutex_);
  switch (backend) {
    case Backend::device:
      if (!device_compiler_) {
        NvrtcOptions o{.use_pch = options_.use_pch, .lineinfo = options_.lineinfo};
        MOEJIT_ASSIGN_OR_RETURN(device_compiler_, NvrtcCompiler::create(o));
      }
      return static_cast<const KernelCompiler*>(device_compiler_.get());
    case Backend::host:
      if (!host_compiler_) {
        MOEJIT_ASSIGN_OR_RETURN(HostCompilerOptions o, HostCompiler::options_from_environment());
        MOEJIT_ASSIGN_OR_RETURN(host_compiler_, HostCompiler::create(std::move(o)));
      }
      return static_cast<const KernelCompiler*>(host_compiler_.get());
    case Backend::none: break;
  }
  return error(Code::invalid_argument, "field 'backend' = {}: expected device or host",
               to_string(backend));
}

Result<KernelResolver::Prepared> KernelResolver::prepare(const KernelSpec& spec) {
  MOEJIT_ASSIGN_OR_RETURN(auto generated, codegen::generate_kernel(spec, *templates_));
  MOEJIT_ASSIGN_OR_RETURN(const KernelCompiler* compiler, compiler_for(spec.backend));
  std::string template_hash = generated.template_hash.hex();
  std::string flags = compiler->key_flags(spec);
  KernelKey key = make_kernel_key(spec, {template_hash, compiler->identity(), flags});
  return Prepared{std::move(generated), compiler, std::move(key)};
}

Result<KernelKey> KernelResolver::key_of(const KernelSpec& spec) {
  MOEJIT_ASSIGN_OR_RETURN(Prepared p, prepare(spec));
  return std::move(p.key);
}

Result<Resolution> KernelResolver::build_uncached(const KernelSpec& spec) {
  MOEJIT_ASSIGN_OR_RETURN(Prepared prepared, prepare(spec));
  auto& [generated, compiler, key] = prepared;

  auto from_entry = [&](store::Entry&& e) {
    auto k = std::make_unique<ResolvedKernel>();
    k->spec = spec;
    k->key = e.key;
    k->meta = std::move(e.meta);
    k->binary = std::move(e.payload);
    counters_.disk_hits++;
    return Resolution{insert(std::move(k)), KernelSource::disk};
  };
  if (auto e = store_->load(key.hash, key.material)) return from_entry(std::move(*e));
  if (options_.frozen)
    return error(Code::frozen_miss,
                 "frozen mode: no kernel for spec {} (key {}) in the store; warm the store "
                 "(moejit warmup) before freezing",
                 spec_to_json(spec), key.hash.hex());

  // Another process may be compiling this key: wait for it (bounded), then look again.
  store::KeyLock lock = store_->lock_key(key.hash);
  if (auto e = store_->load(key.hash, key.material)) return from_entry(std::move(*e));

  Result<CompiledKernel> compiled = [&] {
    CompilePool::Slot slot(pool_);
    return compiler->compile(generated, *templates_, spec);
  }();
  if (!compiled.ok()) {
    counters_.compile_errors++;
    return compiled.status();
  }
  counters_.compiles++;
  counters_.compile_us += static_cast<std::uint64_t>(compiled->compile_ms * 1000);

  store::Entry entry;
  entry.key = key.hash;
  entry.key_material = std::move(key.material);
  auto& m = entry.meta;
  m.kind = spec.backend == Backend::device ? store::PayloadKind::cubin
                                           : store::PayloadKind::host_shared_object;
  m.kernel_name = compiled->lowered_name;
  m.compiler = compiler->identity();
  m.registers = compiled->report.registers;
  m.spill_store_bytes = compiled->report.spill_store_bytes;
  m.spill_load_bytes = compiled->report.spill_load_bytes;
  m.stack_bytes = compiled->report.stack_bytes;
  m.static_shared_bytes = compiled->report.static_shared_bytes;
  m.barriers = compiled->report.barriers;
  m.dynamic_shared_bytes = generated.dynamic_shared_bytes;
  m.block_threads = generated.block_threads;
  m.compile_ms = compiled->compile_ms;
  m.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  entry.payload = std::move(compiled->binary);
  if (Status s = store_->publish(entry); !s.ok())
    log(LogLevel::debug, "kernel {} not stored: {}", entry.key.hex(), s.message());

  auto k = std::make_unique<ResolvedKernel>();
  k->spec = spec;
  k->key = entry.key;
  k->meta = std::move(entry.meta);
  k->binary = std::move(entry.payload);
  return Resolution{insert(std::move(k)), KernelSource::compiled};
}

const ResolvedKernel* KernelResolver::insert(std::unique_ptr<ResolvedKernel> kernel) {
  std::unique_lock lock(table_mutex_);
  auto [it, inserted] = table_.emplace(kernel->spec, std::move(kernel));
  return it->second.get();
}

ResolverStats KernelResolver::stats() const {
  ResolverStats s;
  s.memory_hits = counters_.memory_hits;
  s.disk_hits = counters_.disk_hits;
  s.compiles = counters_.compiles;
  s.compile_ms = static_cast<double>(counters_.compile_us.load()) / 1000.0;
  s.compile_errors = counters_.compile_errors;
  s.store = store_->stats();
  return s;
}

}  // namespace moejit
