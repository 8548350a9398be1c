#include "support/env.hpp"

#include <cctype>
#include <charconv>
#include <cstdlib>

namespace moejit {

std::optional<std::string> env_string(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

Result<std::uint64_t> parse_size(std::string_view text, std::string_view what) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  std::string_view suffix(end, static_cast<std::size_t>(text.data() + text.size() - end));
  std::uint64_t scale = 1;
  if (suffix == "K" || suffix == "k") scale = 1ull << 10;
  else if (suffix == "M" || suffix == "m") scale = 1ull << 20;
  else if (suffix == "G" || suffix == "g") scale = 1ull << 30;
  else if (!suffix.empty()) ec = std::errc::invalid_argument;
  if (ec != std::errc() || end == text.data() || value > UINT64_MAX / scale) {
    return error(Code::invalid_argument,
                 "{} = '{}': expected an unsigned integer with an optional K, M or G suffix", what,
                 text);
  }
  return value * scale;
}

Result<std::uint64_t> env_u64(const char* name, std::uint64_t fallback) {
  auto v = env_string(name);
  if (!v) return fallback;
  return parse_size(*v, name);
}

Result<bool> env_bool(const char* name, bool fallback) {
  auto v = env_string(name);
  if (!v) return fallback;
  std::string s;
  for (char c : *v) s.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  return error(Code::invalid_argument, "{} = '{}': expected 1/0, true/false, yes/no or on/off",
               name, *v);
}

}  // namespace moejit
