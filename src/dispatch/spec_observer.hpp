#pragma once
// Makes every dispatch decision observable (DESIGN §8): the first time a context uses a kernel
// spec, it is printed (MOEJIT_PRINT_CONFIGS=1) with the reason it was chosen, and appended to
// the usage manifest (one spec JSON per line) that `moejit warmup --from-usage` reads to warm
// exactly what a previous run used. Later uses cost one shared-lock hash probe, no allocation.

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit::dispatch {

// Why a spec was chosen: the op and the problem size the heuristic saw. Plain data, so that
// recording a use costs nothing when the spec has been seen before.
struct Decision {
  const char* op = "";
  std::int64_t rows = 0;             // M as the op received it (pairs, rows, max rows)
  std::int64_t rows_per_expert = 0;  // what the tile choice was made from
};

class SpecObserver {
 public:
  // `manifest`: file to append used specs to ("" for none); specs it already lists (from earlier
  // runs) are not appended again, so it does not grow with every restart. `print`: log each
  // first use.
  SpecObserver(std::string manifest, bool print);

  void used(const KernelSpec& spec, const Decision& why);

  const std::string& manifest() const { return manifest_; }

 private:
  std::string manifest_;
  bool print_;
  std::shared_mutex mutex_;
  std::unordered_set<KernelSpec, KernelSpecHash> seen_;      // used by this context
  std::unordered_set<KernelSpec, KernelSpecHash> recorded_;  // in the manifest
};

// Specs listed in a usage manifest, in order, without repeats. Malformed lines are errors
// naming the file and line, except a last line without its newline (a writer stopped in the
// middle of it), which is skipped with a warning. A manifest that lists no spec is an error.
Result<std::vector<KernelSpec>> read_usage_manifest(const std::string& path);

}  // namespace moejit::dispatch
