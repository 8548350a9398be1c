#include "compile/ptxas_report.hpp"

#include <charconv>
#include <string>

#include <fmt/format.h>

namespace moejit {
namespace {

// The number just before `unit` in `line` ("0 bytes spill stores" -> 0), if present.
bool number_before(std::string_view line, std::string_view unit, std::uint32_t& out) {
  std::size_t pos = line.find(unit);
  if (pos == std::string_view::npos) return false;
  std::size_t end = pos;
  while (end > 0 && line[end - 1] == ' ') --end;
  std::size_t begin = end;
  while (begin > 0 && line[begin - 1] >= '0' && line[begin - 1] <= '9') --begin;
  if (begin == end) return false;
  std::from_chars(line.data() + begin, line.data() + end, out);
  return true;
}

// "C7511: <reason>" of ptxas's line "(C7511) Potential Performance Loss: wgmma.mma_async
// instructions are serialized due to <reason> in the function '<name>'", as much as is there.
std::string serialization_reason(std::string_view line) {
  std::string code;
  if (const std::size_t open = line.find("(C"), close = line.find(')', open);
      open != std::string_view::npos && close != std::string_view::npos)
    code = std::string(line.substr(open + 1, close - open - 1));
  constexpr std::string_view kDueTo = "serialized due to ";
  std::string_view reason;
  if (const std::size_t due = line.find(kDueTo); due != std::string_view::npos) {
    reason = line.substr(due + kDueTo.size());
    reason = reason.substr(0, reason.find(" in the function"));
  }
  if (code.empty()) return std::string(reason.empty() ? line : reason);
  return reason.empty() ? code : fmt::format("{}: {}", code, reason);
}

}  // namespace

Result<KernelReport> parse_ptxas_report(std::string_view log, std::string_view lowered_name) {
  // ptxas info    : Compiling entry function '<name>' for 'sm_90a'
  // ptxas info    : Function properties for <name>
  // ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  // ptxas info    : Used 10 registers, used 1 barriers, 256 bytes smem, ...
  // ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are
  //                 serialized due to <reason> in the function '<name>'   (before its entry)
  const std::string quoted = fmt::format("'{}'", lowered_name);
  KernelReport r;
  bool in_entry = false;
  bool found_registers = false;
  std::size_t pos = 0;
  while (pos < log.size()) {
    std::size_t end = log.find('\n', pos);
    if (end == std::string_view::npos) end = log.size();
    std::string_view line = log.substr(pos, end - pos);
    pos = end + 1;
    if (line.find("wgmma.mma_async instructions are serialized") != std::string_view::npos &&
        line.find(quoted) != std::string_view::npos) {
      r.wgmma_serialized = true;
      r.wgmma_serialization = serialization_reason(line);
      continue;
    }
    if (line.find("Compiling entry function") != std::string_view::npos) {
      in_entry = line.find(quoted) != std::string_view::npos;
      continue;
    }
    if (!in_entry) continue;
    if (line.find("bytes stack frame") != std::string_view::npos) {
      number_before(line, " bytes stack frame", r.stack_bytes);
      number_before(line, " bytes spill stores", r.spill_store_bytes);
      number_before(line, " bytes spill loads", r.spill_load_bytes);
    } else if (line.find("Used ") != std::string_view::npos &&
               number_before(line, " registers", r.registers)) {
      found_registers = true;
      number_before(line, " barriers", r.barriers);
      number_before(line, " bytes smem", r.static_shared_bytes);
    }
  }
  if (!found_registers)
    return error(Code::internal, "no ptxas resource report for kernel '{}' in the NVRTC log",
                 lowered_name);
  return r;
}

}  // namespace moejit
