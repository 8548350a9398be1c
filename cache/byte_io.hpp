#pragma once
// Little-endian encoding of the fixed-width fields of store entries and bundles.

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace moejit::store {

class ByteWriter {
 public:
  explicit ByteWriter(std::string& out) : out_(out) {}
  void u32(std::uint32_t v) { put(&v, 4); }
  void u64(std::uint64_t v) { put(&v, 8); }
  void f64(double v) { put(&v, 8); }
  void bytes(std::string_view s) { out_.append(s); }
  void str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    bytes(s);
  }

 private:
  static_assert(std::endian::native == std::endian::little, "moejit's formats are little-endian");
  void put(const void* p, std::size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string& out_;
};

// Reads fields in order; any read past the end makes ok() false and returns zeros.
class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  std::uint32_t u32() { return get<std::uint32_t>(); }
  std::uint64_t u64() { return get<std::uint64_t>(); }
  double f64() { return get<double>(); }
  std::string_view bytes(std::size_t n) {
    if (n > in_.size() - pos_) {
      ok_ = false;
      return {};
    }
    auto s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::string_view str() { return bytes(u32()); }
  std::size_t position() const { return pos_; }
  bool ok() const { return ok_; }

 private:
  template <typename T>
  T get() {
    T v{};
    auto s = bytes(sizeof(T));
    if (ok_) std::memcpy(&v, s.data(), sizeof(T));
    return v;
  }
  std::string_view in_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

}  // namespace moejit::store
