#include "support/hash.hpp"

#include <xxhash.h>

#include <fmt/format.h>

namespace moejit {

std::string Hash128::hex() const { return fmt::format("{:016x}{:016x}", high, low); }

std::optional<Hash128> Hash128::from_hex(std::string_view text) {
  if (text.size() != 32) return std::nullopt;
  Hash128 h;
  for (std::size_t i = 0; i < 32; ++i) {
    char c = text[i];
    std::uint64_t d;
    if (c >= '0' && c <= '9') d = static_cast<std::uint64_t>(c - '0');
    else if (c >= 'a' && c <= 'f') d = static_cast<std::uint64_t>(c - 'a' + 10);
    else return std::nullopt;
    std::uint64_t& word = i < 16 ? h.high : h.low;
    word = (word << 4) | d;
  }
  return h;
}

std::uint64_t xxh3_64(const void* data, std::size_t size) { return XXH3_64bits(data, size); }

Hash128 xxh3_128(const void* data, std::size_t size) {
  XXH128_hash_t h = XXH3_128bits(data, size);
  return {h.high64, h.low64};
}

Hasher128::Hasher128() : state_(XXH3_createState()) {
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}

Hasher128::~Hasher128() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Hasher128::update(const void* data, std::size_t size) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}

Hash128 Hasher128::digest() const {
  XXH128_hash_t h = XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_));
  return {h.high64, h.low64};
}

Hasher64::Hasher64() : state_(XXH3_createState()) {
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

Hasher64::~Hasher64() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void Hasher64::update(const void* data, std::size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}

std::uint64_t Hasher64::digest() const { return XXH3_64bits_digest(static_cast<XXH3_state_t*>(state_)); }

}  // namespace moejit
