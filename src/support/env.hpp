#pragma once
// Reading MOEJIT_* environment variables. A malformed value is an error naming the variable,
// never silently replaced by a default.

#include <cstdint>
#include <optional>
#include <string>

#include "support/status.hpp"

namespace moejit {

// The variable's value, or nullopt when unset or empty.
std::optional<std::string> env_string(const char* name);

// Unsigned integer with an optional K/M/G suffix (powers of 1024); `fallback` when unset.
Result<std::uint64_t> env_u64(const char* name, std::uint64_t fallback);

// "1", "true", "yes", "on" / "0", "false", "no", "off"; `fallback` when unset.
Result<bool> env_bool(const char* name, bool fallback);

// Parses the same syntax as env_u64 ("512M", "4096"); `what` names the source in errors.
Result<std::uint64_t> parse_size(std::string_view text, std::string_view what);

}  // namespace moejit
