#pragma once
// One store entry: a self-verifying file holding a compiled kernel (format in cache/README.md).

#include <cstdint>
#include <string>
#include <string_view>

#include "support/hash.hpp"
#include "support/status.hpp"

namespace moejit::store {

inline constexpr char kEntryMagic[8] = {'M', 'O', 'E', 'J', 'I', 'T', 'K', 'E'};
inline constexpr std::uint32_t kEntryFormatVersion = 1;
inline constexpr std::string_view kEntrySuffix = ".mjk";

enum class PayloadKind : std::uint32_t { cubin = 1, host_shared_object = 2 };

// The largest entry file the store reads: a CUBIN or host shared object is a few MB at most;
// the cap keeps a hostile or damaged file from exhausting memory.
inline constexpr std::uint64_t kMaxEntryBytes = 1ull << 30;

struct EntryMeta {
  PayloadKind kind = PayloadKind::cubin;
  std::string kernel_name;  // lowered symbol in the payload
  std::string compiler;     // compiler identity that produced it
  std::uint32_t registers = 0;
  std::uint32_t spill_store_bytes = 0;
  std::uint32_t spill_load_bytes = 0;
  std::uint32_t stack_bytes = 0;
  std::uint32_t static_shared_bytes = 0;
  std::uint32_t dynamic_shared_bytes = 0;
  std::uint32_t block_threads = 0;
  std::uint32_t barriers = 0;
  double compile_ms = 0;
  std::int64_t created_unix_ms = 0;
};

struct Entry {
  Hash128 key;
  std::string key_material;
  EntryMeta meta;
  std::string payload;
};

std::string encode_entry(const Entry& entry);

// Whether a payload of `kind` is what the backend named in the key material runs (a CUBIN for
// device, a shared object for host). Material without a backend line is not checked.
Status check_payload_kind(PayloadKind kind, std::string_view material);

// Decodes and verifies structure, header checksum, payload checksum and payload kind. Does not
// compare the key with any expectation; that is the caller's (the store's) job.
Result<Entry> decode_entry(std::string_view bytes);

}  // namespace moejit::store
