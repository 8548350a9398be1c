#pragma once
// XXH3 hashing (xxHash, used header-only) behind a small interface.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace moejit {

struct Hash128 {
  std::uint64_t high = 0;
  std::uint64_t low = 0;

  friend bool operator==(const Hash128&, const Hash128&) = default;
  std::string hex() const;                                        // 32 lowercase hex digits
  static std::optional<Hash128> from_hex(std::string_view text);  // inverse of hex()
};

std::uint64_t xxh3_64(const void* data, std::size_t size);
Hash128 xxh3_128(const void* data, std::size_t size);
inline Hash128 xxh3_128(std::string_view s) { return xxh3_128(s.data(), s.size()); }

// Incremental XXH3-128 over several pieces.
class Hasher128 {
 public:
  Hasher128();
  ~Hasher128();
  Hasher128(const Hasher128&) = delete;
  Hasher128& operator=(const Hasher128&) = delete;

  void update(const void* data, std::size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  Hash128 digest() const;

 private:
  void* state_;
};

// Incremental XXH3-64 over several pieces (a bundle's trailer, streamed).
class Hasher64 {
 public:
  Hasher64();
  ~Hasher64();
  Hasher64(const Hasher64&) = delete;
  Hasher64& operator=(const Hasher64&) = delete;

  void update(const void* data, std::size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::uint64_t digest() const;

 private:
  void* state_;
};

}  // namespace moejit
