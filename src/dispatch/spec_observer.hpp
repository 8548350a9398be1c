#pragma once
// Makes every dispatch decision observable (DESIGN §8): the first time a context uses a kernel
// spec, it is printed (MOEJIT_PRINT_CONFIGS=1) with the reason it was chosen, and appended to
// the usage manifest (one JSON record per line) that `moejit warmup --from-usage` reads to warm
// exactly what a previous run used, or what another target's heuristic would pick for the same
// calls. Later uses cost one shared-lock hash probe, no allocation.

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit::dispatch {

// Why a spec was chosen: the op and the problem size the heuristic saw. Plain data, so that
// recording a use costs nothing when the spec has been seen before.
// A grouped GEMM call's inputs to its tile choice that its spec does not hold (the rest, N, K,
// formats, layout and the indexed layout's tile rows, are in the spec). With them, warm-up asks
// another target's heuristic what it would pick for the same call.
struct GemmCall {
  std::uint32_t m = 0;  // at most 2^31 - 1, as the GEMM's
  std::uint32_t rows_per_expert_hint = 0, topk_hint = 0, global_experts_hint = 0;
  std::uint32_t weights_before_dependency = 0;
  friend bool operator==(const GemmCall&, const GemmCall&) = default;
};

struct Decision {
  const char* op = "";
  std::int64_t rows = 0;             // M as the op received it (pairs, rows, max rows)
  std::int64_t rows_per_expert = 0;  // what the tile choice was made from
  std::optional<GemmCall> gemm;      // grouped GEMMs: the call the tile was chosen for
};

// One line of a usage manifest: a spec a context used, and for a grouped GEMM the call that chose
// it. Lines written before calls were recorded hold the spec alone.
struct UsageRecord {
  KernelSpec spec{};
  std::optional<GemmCall> gemm;
  friend bool operator==(const UsageRecord&, const UsageRecord&) = default;
};
struct UsageRecordHash {
  std::size_t operator()(const UsageRecord& r) const noexcept;
};

// The manifest line of `record`: the spec's JSON alone, or {"spec": ..., "gemm_call": ...}.
std::string usage_record_json(const UsageRecord& record);

class SpecObserver {
 public:
  // `manifest`: file to append used specs to ("" for none); records it already lists (from
  // earlier runs) are not appended again, so it does not grow with every restart: a grouped GEMM
  // adds a line per spec and problem size (M) it was called with where its tile depends on M
  // (decode tiles), a line per spec otherwise (stand_in_call). `print`: log each first use.
  SpecObserver(std::string manifest, bool print);

  void used(const KernelSpec& spec, const Decision& why);

  const std::string& manifest() const { return manifest_; }

 private:
  std::string manifest_;
  bool print_;
  std::shared_mutex mutex_;
  // Both hold records as remembered_as (spec_observer.cpp) keys them.
  std::unordered_set<UsageRecord, UsageRecordHash> seen_;      // used by this context
  std::unordered_set<UsageRecord, UsageRecordHash> recorded_;  // in the manifest
};

// Records listed in a usage manifest, in order, without repeats. Malformed lines are errors
// naming the file and line, except a last line without its newline (a writer stopped in the
// middle of it), which is skipped with a warning. A manifest that lists no spec is an error.
Result<std::vector<UsageRecord>> read_usage_manifest(const std::string& path);

}  // namespace moejit::dispatch
