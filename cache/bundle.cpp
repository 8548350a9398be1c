#include "cache/bundle.hpp"

#include <algorithm>
#include <map>

#include "cache/byte_io.hpp"
#include "support/fs.hpp"

namespace moejit::store {
namespace {

constexpr char kBundleMagic[8] = {'M', 'O', 'E', 'J', 'I', 'T', 'B', 'N'};
constexpr std::uint32_t kBundleVersion = 1;

}  // namespace

Result<BundleSummary> export_bundle(const Store& store, const std::string& path,
                                    const std::optional<std::vector<Hash128>>& keys) {
  // Later layers win nothing: the first copy of a key (read-only layers first) is exported.
  std::map<std::string, std::string> chosen;  // key hex -> entry path
  for (const auto& info : store.list()) {
    if (!info.entry.ok())
      return error(Code::corrupt, "cannot export: entry '{}' is bad ({})", info.path,
                   info.entry.status().message());
    chosen.emplace(info.entry->key.hex(), info.path);
  }
  std::vector<std::string> selected;
  if (keys) {
    for (const auto& k : *keys) {
      auto it = chosen.find(k.hex());
      if (it == chosen.end())
        return error(Code::not_found, "cannot export: the store has no entry for key {}", k.hex());
      selected.push_back(it->second);
    }
    std::sort(selected.begin(), selected.end());
    selected.erase(std::unique(selected.begin(), selected.end()), selected.end());
  } else {
    for (auto& [hex, p] : chosen) selected.push_back(p);
  }

  std::string out;
  ByteWriter w(out);
  w.bytes(std::string_view(kBundleMagic, sizeof kBundleMagic));
  w.u32(kBundleVersion);
  w.u32(static_cast<std::uint32_t>(selected.size()));
  for (const auto& p : selected) {
    MOEJIT_ASSIGN_OR_RETURN(std::string bytes, read_file(p));
    MOEJIT_TRY(decode_entry(bytes));  // re-verify: it could have changed since list()
    w.u64(bytes.size());
    w.bytes(bytes);
  }
  w.u64(xxh3_64(out.data(), out.size()));
  MOEJIT_TRY(write_file_atomic(path, out));
  return BundleSummary{selected.size(), out.size()};
}

Result<BundleSummary> import_bundle(Store& store, const std::string& path) {
  MOEJIT_ASSIGN_OR_RETURN(std::string data, read_file(path));
  if (data.size() < sizeof kBundleMagic + 16 ||
      std::string_view(data.data(), sizeof kBundleMagic) != std::string_view(kBundleMagic, 8))
    return error(Code::corrupt, "'{}' is not a moejit bundle", path);
  std::uint64_t trailer = 0;
  std::memcpy(&trailer, data.data() + data.size() - 8, 8);
  if (trailer != xxh3_64(data.data(), data.size() - 8))
    return error(Code::corrupt, "bundle '{}' failed its checksum (truncated or damaged)", path);

  ByteReader r(std::string_view(data).substr(0, data.size() - 8));
  r.bytes(sizeof kBundleMagic);
  if (std::uint32_t v = r.u32(); v != kBundleVersion)
    return error(Code::corrupt, "bundle '{}' has format version {} (expected {})", path, v,
                 kBundleVersion);
  std::uint32_t count = r.u32();
  std::vector<Entry> entries;
  for (std::uint32_t i = 0; i < count; ++i) {
    std::string_view bytes = r.bytes(r.u64());
    if (!r.ok()) return error(Code::corrupt, "bundle '{}' is truncated at entry {}", path, i);
    auto e = decode_entry(bytes);
    if (!e.ok())
      return error(Code::corrupt, "bundle '{}' entry {}: {}", path, i, e.status().message());
    entries.push_back(std::move(e).value());
  }
  if (r.position() != data.size() - 8)
    return error(Code::corrupt, "bundle '{}' has trailing bytes after {} entries", path, count);

  BundleSummary summary;
  for (const auto& e : entries) {
    MOEJIT_TRY(store.publish(e));
    summary.entries++;
    summary.bytes += e.payload.size();
  }
  return summary;
}

}  // namespace moejit::store
