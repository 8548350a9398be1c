#pragma once
// Diagnostics. Messages go to a sink (stderr by default; engines install their own through the
// C ABI). The threshold comes from MOEJIT_LOG_LEVEL (error|warn|info|debug, default warn).

#include <fmt/format.h>

#include <atomic>
#include <functional>
#include <string_view>

namespace moejit {

enum class LogLevel : int { error = 0, warn = 1, info = 2, debug = 3 };

using LogSink = std::function<void(LogLevel, std::string_view)>;

// Replaces the sink; an empty function restores the stderr sink.
void set_log_sink(LogSink sink);
void set_log_level(LogLevel level);
bool log_enabled(LogLevel level);
void log_message(LogLevel level, std::string_view message);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (log_enabled(level)) log_message(level, fmt::format(format, std::forward<Args>(args)...));
}

// Logs a warning the first time `once` is passed in; later calls are silent.
template <typename... Args>
void warn_once(std::atomic<bool>& once, fmt::format_string<Args...> format, Args&&... args) {
  if (!once.exchange(true)) log(LogLevel::warn, format, std::forward<Args>(args)...);
}

}  // namespace moejit
