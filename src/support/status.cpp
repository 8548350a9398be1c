#include "support/status.hpp"

namespace moejit {

const char* code_name(Code code) {
  switch (code) {
    case Code::ok: return "ok";
    case Code::invalid_argument: return "invalid_argument";
    case Code::not_found: return "not_found";
    case Code::unavailable: return "unavailable";
    case Code::compile_error: return "compile_error";
    case Code::io_error: return "io_error";
    case Code::corrupt: return "corrupt";
    case Code::frozen_miss: return "frozen_miss";
    case Code::unsupported: return "unsupported";
    case Code::internal: return "internal";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return fmt::format("{}: {}", code_name(code_), message_);
}

}  // namespace moejit
