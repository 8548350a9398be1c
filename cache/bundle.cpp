#include "cache/bundle.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

#include "cache/byte_io.hpp"
#include "support/fs.hpp"

namespace moejit::store {
namespace {

constexpr char kBundleMagic[8] = {'M', 'O', 'E', 'J', 'I', 'T', 'B', 'N'};
constexpr std::uint32_t kBundleVersion = 1;
constexpr std::size_t kHeaderBytes = sizeof kBundleMagic + 4 + 4;
constexpr std::size_t kTrailerBytes = 8;

// Sequential reads of exactly n bytes from a descriptor, hashed as they pass.
class StreamReader {
 public:
  StreamReader(int fd, const std::string& name) : fd_(fd), name_(name) {}

  // Exactly `n` bytes into `out`, or an error (a short file is "truncated").
  Status read(std::size_t n, std::string& out, bool hash = true) {
    out.resize(n);
    std::size_t done = 0;
    while (done < n) {
      ssize_t got = ::pread(fd_, out.data() + done, n - done, static_cast<off_t>(offset_));
      if (got < 0) {
        if (errno == EINTR) continue;
        return error(Code::io_error, "cannot read '{}': {}", name_, std::strerror(errno));
      }
      if (got == 0) return error(Code::corrupt, "bundle '{}' is truncated at byte {}", name_, offset_);
      done += static_cast<std::size_t>(got);
      offset_ += static_cast<std::uint64_t>(got);
    }
    if (hash) hasher_.update(out);
    return {};
  }
  template <typename T>
  Result<T> read_int() {
    MOEJIT_TRY(read(sizeof(T), scratch_));
    T v{};
    std::memcpy(&v, scratch_.data(), sizeof(T));
    return v;
  }
  std::uint64_t offset() const { return offset_; }
  std::uint64_t digest() const { return hasher_.digest(); }

 private:
  int fd_;
  const std::string& name_;
  std::uint64_t offset_ = 0;
  Hasher64 hasher_;
  std::string scratch_;
};

// Writes that also feed the trailer's hash.
struct HashedWriter {
  AtomicFileWriter& file;
  Hasher64 hasher;
  std::uint64_t bytes = 0;
  Status put(std::string_view data) {
    hasher.update(data);
    bytes += data.size();
    return file.write(data);
  }
  template <typename T>
  Status put_int(T v) {
    return put(std::string_view(reinterpret_cast<const char*>(&v), sizeof v));
  }
};

}  // namespace

Result<BundleSummary> export_bundle(const Store& store, const std::string& path,
                                    const std::optional<std::vector<Hash128>>& keys) {
  // Later layers win nothing: the first copy of a key (read-only layers first) is exported.
  std::map<std::string, EntryInfo> chosen;  // key hex -> entry
  std::vector<EntryInfo> bad;                // only an error where it would be exported
  for (auto& info : store.list()) {
    if (!info.entry.ok()) {
      bad.push_back(std::move(info));
      continue;
    }
    std::string hex = info.entry->key.hex();
    chosen.emplace(std::move(hex), std::move(info));
  }
  auto bad_entry = [](const EntryInfo& info) {
    return error(Code::corrupt, "cannot export: entry '{}' is bad ({})", info.path, info.entry.status().message());
  };
  std::vector<const EntryInfo*> selected;
  if (keys) {
    for (const auto& k : *keys) {
      auto it = chosen.find(k.hex());
      if (it == chosen.end()) {
        // Named for the key but failing verification: say so rather than "no entry".
        for (const EntryInfo& info : bad)
          if (std::filesystem::path(info.path).filename().string().starts_with(k.hex())) return bad_entry(info);
        return error(Code::not_found, "cannot export: the store has no entry for key {}", k.hex());
      }
      if (std::find(selected.begin(), selected.end(), &it->second) == selected.end())
        selected.push_back(&it->second);
    }
  } else {
    if (!bad.empty()) return bad_entry(bad.front());
    for (auto& [hex, info] : chosen) selected.push_back(&info);
  }

  // The count is written last (an entry evicted meanwhile is left out), and the trailer is
  // hashed over the finished file, so nothing but one entry at a time is held in memory.
  MOEJIT_ASSIGN_OR_RETURN(AtomicFileWriter file, AtomicFileWriter::create(path));
  MOEJIT_TRY(file.write(std::string_view(kBundleMagic, sizeof kBundleMagic)));
  std::uint32_t version = kBundleVersion, count = 0;
  MOEJIT_TRY(file.write(std::string_view(reinterpret_cast<const char*>(&version), 4)));
  MOEJIT_TRY(file.write(std::string_view(reinterpret_cast<const char*>(&count), 4)));
  std::uint64_t size = kHeaderBytes;
  for (const EntryInfo* info : selected) {
    auto bytes = read_file(info->path, kMaxEntryBytes, Links::refuse);
    if (!bytes.ok() && bytes.status().code() == Code::not_found && !keys) continue;  // evicted
    if (!bytes.ok()) return bytes.status();
    // Re-verify: it could have been replaced since list().
    if (auto e = decode_entry(*bytes); !e.ok())
      return error(Code::corrupt, "cannot export: entry '{}' is bad ({})", info->path, e.status().message());
    std::uint64_t length = bytes->size();
    MOEJIT_TRY(file.write(std::string_view(reinterpret_cast<const char*>(&length), 8)));
    MOEJIT_TRY(file.write(*bytes));
    size += 8 + length;
    ++count;
  }
  MOEJIT_TRY(file.overwrite(sizeof kBundleMagic + 4, std::string_view(reinterpret_cast<const char*>(&count), 4)));
  Hasher64 hasher;
  std::string chunk(1 << 20, '\0');
  for (std::uint64_t offset = 0; offset < size;) {
    ssize_t got = ::pread(file.fd(), chunk.data(), std::min<std::uint64_t>(chunk.size(), size - offset),
                          static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0)
      return error(Code::io_error, "cannot read back '{}': {}", file.temporary_path(),
                   got < 0 ? std::strerror(errno) : "short file");
    hasher.update(chunk.data(), static_cast<std::size_t>(got));
    offset += static_cast<std::uint64_t>(got);
  }
  std::uint64_t trailer = hasher.digest();
  MOEJIT_TRY(file.write(std::string_view(reinterpret_cast<const char*>(&trailer), 8)));
  MOEJIT_TRY(file.commit());
  return BundleSummary{count, size + kTrailerBytes};
}

Result<BundleSummary> read_bundle(int fd, const std::string& name,
                                  const std::function<Status(Entry&&)>& visit) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return error(Code::io_error, "cannot stat '{}': {}", name, std::strerror(errno));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  StreamReader in(fd, name);
  std::string bytes;
  if (size < kHeaderBytes + kTrailerBytes || !in.read(sizeof kBundleMagic, bytes).ok() ||
      bytes != std::string_view(kBundleMagic, sizeof kBundleMagic))
    return error(Code::corrupt, "'{}' is not a moejit bundle", name);
  MOEJIT_ASSIGN_OR_RETURN(std::uint32_t version, in.read_int<std::uint32_t>());
  if (version != kBundleVersion)
    return error(Code::corrupt, "bundle '{}' has format version {} (expected {})", name, version, kBundleVersion);
  MOEJIT_ASSIGN_OR_RETURN(std::uint32_t count, in.read_int<std::uint32_t>());

  BundleSummary summary;
  std::set<std::pair<std::uint64_t, std::uint64_t>> seen;  // keys so far
  const std::uint64_t body_end = size - kTrailerBytes;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (in.offset() + 8 > body_end) return error(Code::corrupt, "bundle '{}' is truncated at entry {}", name, i);
    MOEJIT_ASSIGN_OR_RETURN(std::uint64_t length, in.read_int<std::uint64_t>());
    if (length > body_end - in.offset())
      return error(Code::corrupt, "bundle '{}' entry {} claims {} bytes; the file holds {} more", name, i, length,
                   body_end - in.offset());
    if (length > kMaxEntryBytes)
      return error(Code::corrupt, "bundle '{}' entry {} is {} bytes; expected at most {}", name, i, length,
                   kMaxEntryBytes);
    MOEJIT_TRY(in.read(static_cast<std::size_t>(length), bytes));
    auto e = decode_entry(bytes);
    if (!e.ok()) return error(Code::corrupt, "bundle '{}' entry {}: {}", name, i, e.status().message());
    if (!seen.insert({e->key.high, e->key.low}).second)
      return error(Code::corrupt, "bundle '{}' entry {} repeats key {}; expected each key once", name, i,
                   e->key.hex());
    summary.entries++;
    summary.bytes += e->payload.size();
    MOEJIT_TRY(visit(std::move(e).value()));
  }
  if (in.offset() != body_end)
    return error(Code::corrupt, "bundle '{}' has {} trailing bytes after {} entries", name, body_end - in.offset(),
                 count);
  const std::uint64_t expected = in.digest();
  MOEJIT_ASSIGN_OR_RETURN(std::uint64_t trailer, in.read_int<std::uint64_t>());
  if (trailer != expected)
    return error(Code::corrupt, "bundle '{}' failed its checksum (truncated or damaged)", name);
  return summary;
}

Result<BundleSummary> import_bundle(Store& store, const std::string& path) {
  if (store.memory_only()) return store.memory_only_error("import into");
  struct stat st {};
  MOEJIT_ASSIGN_OR_RETURN(UniqueFd fd, open_regular_file(path, Links::follow, &st));
  // Pass 1 verifies everything, holding one entry at a time; pass 2 publishes the same keys.
  std::vector<Hash128> keys;
  MOEJIT_ASSIGN_OR_RETURN(BundleSummary verified, read_bundle(fd.get(), path, [&](Entry&& e) -> Status {
                            keys.push_back(e.key);
                            return {};
                          }));
  // The entries' files, as the bundle holds them between its header, lengths and trailer.
  const std::uint64_t entry_bytes =
      static_cast<std::uint64_t>(st.st_size) - kHeaderBytes - kTrailerBytes - 8 * verified.entries;
  // Pruned as they arrive, the first entries would be evicted by the last: a bundle the bound
  // cannot hold is refused whole, and the store is pruned once, after the import.
  const std::uint64_t bound = store.options().max_bytes;
  if (bound > 0 && entry_bytes > bound)
    return error(Code::invalid_argument,
                 "bundle '{}' holds {} bytes of entries; the kernel store keeps at most {} (MOEJIT_CACHE_MAX_BYTES): "
                 "expected a bound of at least {}",
                 path, entry_bytes, bound, entry_bytes);
  std::size_t next = 0;
  auto imported = read_bundle(fd.get(), path, [&](Entry&& e) -> Status {
    if (next >= keys.size() || keys[next++] != e.key)
      return error(Code::corrupt, "bundle '{}' changed while it was imported", path);
    return store.publish(e, Store::AfterPublish::keep);
  });
  if (bound > 0) store.prune(bound);
  return imported;
}

}  // namespace moejit::store
