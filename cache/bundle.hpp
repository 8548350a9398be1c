#pragma once
// Bundles: many store entries in one file, for shipping a warmed store to other machines.
// Format (cache/README.md): magic, version, count, then each entry's file bytes with its length,
// then an XXH3-64 of everything before it. Import verifies the whole file and every entry before
// publishing any of them.

#include <optional>
#include <string>
#include <vector>

#include "cache/store.hpp"

namespace moejit::store {

struct BundleSummary {
  std::size_t entries = 0;
  std::uint64_t bytes = 0;
};

// Writes the store's entries (all layers; only `keys` if given) to `path`, atomically.
// A requested key the store lacks, or any bad entry among those exported, is an error.
Result<BundleSummary> export_bundle(const Store& store, const std::string& path,
                                    const std::optional<std::vector<Hash128>>& keys);

// Verifies `path` and publishes its entries into the store's writable root.
Result<BundleSummary> import_bundle(Store& store, const std::string& path);

}  // namespace moejit::store
