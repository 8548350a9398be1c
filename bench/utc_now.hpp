#pragma once
// The time stamp every benchmark result carries: UTC, ISO 8601 to the second.

#include <ctime>
#include <string>

namespace moejit::bench {

inline std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace moejit::bench
