#include "support/log.hpp"

#include <cstdio>
#include <mutex>

#include "support/env.hpp"

namespace moejit {
namespace {

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::error: return "error";
    case LogLevel::warn: return "warning";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
  }
  return "?";
}

LogLevel level_from_env() {
  auto value = env_string("MOEJIT_LOG_LEVEL");
  if (!value) return LogLevel::warn;
  if (*value == "error") return LogLevel::error;
  if (*value == "info") return LogLevel::info;
  if (*value == "debug") return LogLevel::debug;
  return LogLevel::warn;
}

struct LogState {
  std::mutex mutex;
  LogSink sink;
  std::atomic<int> level{static_cast<int>(level_from_env())};
};

LogState& state() {
  static LogState s;
  return s;
}

}  // namespace

void set_log_sink(LogSink sink) {
  std::lock_guard lock(state().mutex);
  state().sink = std::move(sink);
}

void set_log_level(LogLevel level) { state().level.store(static_cast<int>(level)); }

bool log_enabled(LogLevel level) {
  return static_cast<int>(level) <= state().level.load(std::memory_order_relaxed);
}

void log_message(LogLevel level, std::string_view message) {
  auto& s = state();
  std::lock_guard lock(s.mutex);
  if (s.sink) {
    s.sink(level, message);
  } else {
    std::fprintf(stderr, "moejit: %s: %.*s\n", level_name(level), static_cast<int>(message.size()),
                 message.data());
  }
}

}  // namespace moejit
