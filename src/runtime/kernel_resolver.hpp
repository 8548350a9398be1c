#pragma once
// Spec -> compiled kernel, through the layers of DESIGN §1: the in-memory table, the store,
// then codegen + compile + publish. A memory hit takes a shared lock and one hash probe: no
// allocation, no formatting, no key computation. A miss is single-flight within the process
// (concurrent callers for one spec wait for one build) and, through the store's per-key lock,
// across processes. A compile error is remembered for the spec, so that an engine retrying a
// bad shape every step does not recompile it every step.

#include <atomic>
#include <future>
#include <memory>
#include <shared_mutex>
#include <unordered_map>

#include "cache/store.hpp"
#include "codegen/template_set.hpp"
#include "compile/compile_pool.hpp"
#include "compile/compiler.hpp"
#include "runtime/resolved_kernel.hpp"
#include "spec/key.hpp"
#include "spec/kernel_spec.hpp"

namespace moejit {

enum class KernelSource { memory, disk, compiled };
std::string_view to_string(KernelSource source);

struct Resolution {
  const ResolvedKernel* kernel = nullptr;  // owned by the resolver, valid for its lifetime
  KernelSource source = KernelSource::memory;
};


struct ResolverStats {
  std::uint64_t memory_hits = 0;
  std::uint64_t disk_hits = 0;
  std::uint64_t compiles = 0;
  double compile_ms = 0;
  std::uint64_t compile_errors = 0;
  store::StoreStats store;
};

class KernelResolver {
 public:
  struct Options {
    store::StoreOptions store;
    unsigned compile_threads = 1;
    bool frozen = false;  // a miss in memory and store is an error, never a compile
    bool use_pch = false;
    bool lineinfo = false;
    std::shared_ptr<const codegen::TemplateSet> templates;  // null: from the environment

    // Everything from MOEJIT_* variables (see README).
    static Result<Options> from_environment();
  };

  static Result<std::unique_ptr<KernelResolver>> create(Options options);
  ~KernelResolver();

  Result<Resolution> resolve(const KernelSpec& spec);
  // Resolves in the compile pool; for warming many specs at once.
  std::future<Result<Resolution>> resolve_async(const KernelSpec& spec);

  // The key `spec` has under this resolver's templates and compiler (generates the source).
  Result<KernelKey> key_of(const KernelSpec& spec);

  ResolverStats stats() const;
  store::Store& store() { return *store_; }
  const codegen::TemplateSet& templates() const { return *templates_; }

 private:
  // Source, compiler and key of a spec: everything a store lookup or a compile needs.
  struct Prepared {
    codegen::GeneratedKernel generated;
    const KernelCompiler* compiler;
    KernelKey key;
  };

  explicit KernelResolver(Options options);
  Result<Prepared> prepare(const KernelSpec& spec);
  Result<Resolution> build(const KernelSpec& spec);
  Result<Resolution> build_uncached(const KernelSpec& spec);
  Result<const KernelCompiler*> compiler_for(Backend backend);
  const ResolvedKernel* insert(std::unique_ptr<ResolvedKernel> kernel);

  Options options_;
  std::shared_ptr<const codegen::TemplateSet> templates_;
  std::unique_ptr<store::Store> store_;

  mutable std::shared_mutex table_mutex_;
  std::unordered_map<KernelSpec, std::unique_ptr<ResolvedKernel>, KernelSpecHash> table_;

  std::mutex flight_mutex_;
  std::unordered_map<KernelSpec, std::shared_future<Result<Resolution>>, KernelSpecHash> in_flight_;
  // Specs whose source failed to compile, with the error: the same source and compiler fail
  // the same way, so a later call returns the error instead of compiling (and dumping) again.
  std::unordered_map<KernelSpec, Status, KernelSpecHash> failed_;

  std::mutex compiler_mutex_;
  std::unique_ptr<KernelCompiler> device_compiler_;
  std::unique_ptr<KernelCompiler> host_compiler_;

  struct Counters {
    std::atomic<std::uint64_t> memory_hits{0}, disk_hits{0}, compiles{0}, compile_us{0},
        compile_errors{0};
  };
  Counters counters_;
  // Last, so destroyed first: its destructor runs the compiles still queued, which use every
  // member above (declared before it, a resolver destroyed with work queued wrote into freed tables).
  CompilePool pool_;
};

}  // namespace moejit
