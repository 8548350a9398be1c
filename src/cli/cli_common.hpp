#pragma once
// Shared pieces of the `moejit` command: global options, output in JSON or text, errors.

#include <nlohmann/json.hpp>

#include <string>

#include "runtime/kernel_resolver.hpp"
#include "support/status.hpp"

namespace moejit::cli {

using Json = nlohmann::ordered_json;

struct GlobalOptions {
  bool json = false;
  std::string cache_dir;  // overrides MOEJIT_CACHE_DIR when set
};

// Prints `doc` as one JSON object (--json) or as "key: value" lines; returns 0.
int print(const GlobalOptions& g, const Json& doc);

// Prints the failure (as {"error": {...}} with --json) to stdout/stderr; returns 1.
int fail(const GlobalOptions& g, const Status& status);

// Resolver options from the environment, with the global overrides applied.
Result<KernelResolver::Options> resolver_options(const GlobalOptions& g);

// Store options from the environment, with the global overrides applied.
Result<store::StoreOptions> store_options(const GlobalOptions& g);

}  // namespace moejit::cli
