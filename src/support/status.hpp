#pragma once
// Status and Result: how every fallible moejit call reports failure. A message always names the
// bad argument or resource and what was expected; codes mirror moejit_status_t in the C ABI.

#include <fmt/format.h>

#include <string>
#include <utility>
#include <variant>

#include "moejit/moejit.h"

namespace moejit {

enum class Code : int {
  ok = MOEJIT_OK,
  invalid_argument = MOEJIT_ERROR_INVALID_ARGUMENT,
  not_found = MOEJIT_ERROR_NOT_FOUND,
  unavailable = MOEJIT_ERROR_UNAVAILABLE,
  compile_error = MOEJIT_ERROR_COMPILE,
  io_error = MOEJIT_ERROR_IO,
  corrupt = MOEJIT_ERROR_CORRUPT,
  frozen_miss = MOEJIT_ERROR_FROZEN_MISS,
  unsupported = MOEJIT_ERROR_UNSUPPORTED,
  internal = MOEJIT_ERROR_INTERNAL,
};

const char* code_name(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message, int system_error = 0)
      : code_(code), message_(std::move(message)), system_error_(system_error) {}

  bool ok() const { return code_ == Code::ok; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // The errno of the system call whose failure this is (0: not a system call's, or not known).
  // For callers that must tell a full disk from a transient failure.
  int system_error() const { return system_error_; }

  // "invalid_argument: field 'bm' must be ..." — for logs and CLI output.
  std::string to_string() const;

 private:
  Code code_ = Code::ok;
  std::string message_;
  int system_error_ = 0;
};

inline Status ok_status() { return {}; }

template <typename... Args>
Status error(Code code, fmt::format_string<Args...> format, Args&&... args) {
  return Status(code, fmt::format(format, std::forward<Args>(args)...));
}

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status ok_value;
    return ok() ? ok_value : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace moejit

// Propagates a failed Status or Result out of the enclosing function.
#define MOEJIT_TRY(expr)                                   \
  do {                                                     \
    if (auto moejit_try_s_ = (expr); !moejit_try_s_.ok())  \
      return ::moejit::detail::status_of(moejit_try_s_);   \
  } while (0)

// Binds `lhs` to the value of a Result, or returns its Status.
#define MOEJIT_ASSIGN_OR_RETURN(lhs, expr) MOEJIT_ASSIGN_OR_RETURN_I(lhs, expr, MOEJIT_CAT(moejit_r_, __LINE__))
#define MOEJIT_ASSIGN_OR_RETURN_I(lhs, expr, tmp) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
#define MOEJIT_CAT(a, b) MOEJIT_CAT_I(a, b)
#define MOEJIT_CAT_I(a, b) a##b

namespace moejit::detail {
inline const Status& status_of(const Status& s) { return s; }
template <typename T>
const Status& status_of(const Result<T>& r) { return r.status(); }
}  // namespace moejit::detail
