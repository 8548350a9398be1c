// Fuzz target: the bundle reader (read_bundle) on arbitrary bytes, given to it as a file (a
// memfd) the way import opens one. Random bytes rarely match the trailer's checksum, which the
// reader checks last; each input is therefore also read with its trailer recomputed, so that the
// walk over lengths and entries is explored past the checksum too. Every entry the reader hands
// out must be one the encoder would write, and a bundle it accepts must hold each key once.

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <utility>

#include "cache/bundle.hpp"
#include "support/fs.hpp"
#include "support/hash.hpp"

namespace {

void check(const std::string& bytes) {
  moejit::UniqueFd fd(::memfd_create("bundle", MFD_CLOEXEC));
  if (!fd.valid()) __builtin_trap();
  if (!moejit::write_all(fd.get(), bytes, "bundle").ok()) __builtin_trap();
  std::set<std::pair<std::uint64_t, std::uint64_t>> keys;
  auto read = moejit::store::read_bundle(fd.get(), "bundle", [&](moejit::store::Entry&& e) -> moejit::Status {
    if (!keys.insert({e.key.high, e.key.low}).second) __builtin_trap();  // duplicates must be refused first
    if (!moejit::store::decode_entry(moejit::store::encode_entry(e)).ok()) __builtin_trap();
    return {};
  });
  if (!read.ok()) {
    if (read.status().message().empty()) __builtin_trap();
    return;
  }
  if (read->entries != keys.size()) __builtin_trap();
}

// The trailer (cache/README.md) is an XXH3-64 of everything before its last 8 bytes.
std::string with_trailer(std::string bytes) {
  if (bytes.size() < 8) return bytes;
  const std::uint64_t trailer = moejit::xxh3_64(bytes.data(), bytes.size() - 8);
  std::memcpy(bytes.data() + bytes.size() - 8, &trailer, 8);
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  check(bytes);
  check(with_trailer(bytes));
  return 0;
}
