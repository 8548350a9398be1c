#pragma once
// Bundles: many store entries in one file, for shipping a warmed store to other machines.
// Format (cache/README.md): magic, version, count, then each entry's file bytes with its length,
// then an XXH3-64 of everything before it. Bundles are streamed both ways (memory holds one
// entry at a time), and import verifies the whole file and every entry before publishing any.

#include <functional>
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
// A requested key the store lacks, or a bad entry among those exported (any, without `keys`;
// one of `keys` with them), is an error; an entry evicted by another process while the bundle
// is written is left out unless requested.
Result<BundleSummary> export_bundle(const Store& store, const std::string& path,
                                    const std::optional<std::vector<Hash128>>& keys);

// Reads the bundle open at `fd` (`name` for messages) from its start, decoding and verifying
// each entry and calling `visit` with it in order; then checks the trailer. An entry over
// kMaxEntryBytes, a key that appears twice, trailing bytes or a bad trailer are errors. Since the
// trailer is checked last, a caller that must not act on a damaged bundle reads it twice
// (import does). `bytes` of the summary counts payload bytes.
Result<BundleSummary> read_bundle(int fd, const std::string& name,
                                  const std::function<Status(Entry&&)>& visit);

// Verifies the bundle at `path` (a regular file; a FIFO or device is refused, not waited on)
// and publishes its entries into the store's writable root, then prunes it once. Nothing is
// published from a bundle that fails verification, or whose entries the store's size bound
// cannot hold (they would evict one another), or into a memory-only store.
Result<BundleSummary> import_bundle(Store& store, const std::string& path);

}  // namespace moejit::store
