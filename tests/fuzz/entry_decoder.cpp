// Fuzz target: the store entry decoder (decode_entry) on arbitrary bytes. Random bytes rarely pass
// the two checksums, which would leave the field parsing behind them unexplored, so each input is
// also decoded a second time with both checksums recomputed where its own header says they sit.
// An entry that decodes must be exactly what the encoder writes for it.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "cache/entry_format.hpp"
#include "support/hash.hpp"

namespace {

void check(std::string_view bytes) {
  auto entry = moejit::store::decode_entry(bytes);
  if (!entry.ok()) {
    if (entry.status().message().empty()) __builtin_trap();
    return;
  }
  if (moejit::store::encode_entry(*entry) != bytes) __builtin_trap();
}

// Layout (cache/README.md): magic (8), version (4), header size (4), fields ..., payload size (8),
// payload hash (8), header hash (8) ending the header, then the payload.
std::string with_checksums(std::string bytes) {
  if (bytes.size() < 16) return bytes;
  std::uint32_t header_size = 0;
  std::memcpy(&header_size, bytes.data() + 12, 4);
  if (header_size < 32 || header_size > bytes.size()) return bytes;
  const std::uint64_t payload_hash = moejit::xxh3_64(bytes.data() + header_size, bytes.size() - header_size);
  std::memcpy(bytes.data() + header_size - 16, &payload_hash, 8);
  const std::uint64_t header_hash = moejit::xxh3_64(bytes.data(), header_size - 8);
  std::memcpy(bytes.data() + header_size - 8, &header_hash, 8);
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  check(bytes);
  check(with_checksums(bytes));
  return 0;
}
