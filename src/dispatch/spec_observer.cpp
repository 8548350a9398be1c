#include "dispatch/spec_observer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "spec/spec_json.hpp"
#include "support/fs.hpp"
#include "support/log.hpp"

namespace moejit::dispatch {
namespace {

// The specs of a manifest's text, line by line; `bad` gets each line that does not parse (its
// number, whether it ends the text without a newline, why).
struct BadLine {
  std::size_t number;
  bool unterminated;
  std::string why;
};
std::vector<KernelSpec> manifest_specs(std::string_view text, std::vector<BadLine>& bad) {
  std::vector<KernelSpec> specs;
  std::unordered_set<KernelSpec, KernelSpecHash> seen;
  std::size_t line_no = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    const bool unterminated = end == std::string_view::npos;
    if (unterminated) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.empty()) continue;
    auto spec = parse_spec_json(line);
    if (!spec.ok()) bad.push_back({line_no, unterminated, spec.status().message()});
    else if (seen.insert(*spec).second) specs.push_back(*spec);
  }
  return specs;
}

}  // namespace

SpecObserver::SpecObserver(std::string manifest, bool print) : manifest_(std::move(manifest)), print_(print) {
  if (manifest_.empty()) return;
  // What earlier runs recorded; unreadable or absent, everything used is appended.
  if (auto text = read_file(manifest_); text.ok()) {
    std::vector<BadLine> bad;
    for (const KernelSpec& s : manifest_specs(*text, bad)) recorded_.insert(s);
  }
}

void SpecObserver::used(const KernelSpec& spec, const Decision& why) {
  {
    std::shared_lock lock(mutex_);
    if (seen_.count(spec) != 0) return;
  }
  std::unique_lock lock(mutex_);
  if (!seen_.insert(spec).second) return;
  const std::string json = spec_to_json(spec);
  // Asked for by name (MOEJIT_PRINT_CONFIGS=1): shown whatever MOEJIT_LOG_LEVEL says, and tagged
  // info, since a decision is not a problem.
  if (print_)
    log_message(LogLevel::info,
                fmt::format("config: {} <- {} m={} rows/expert={}", json, why.op, why.rows, why.rows_per_expert));
  if (manifest_.empty() || !recorded_.insert(spec).second) return;
  // O_APPEND keeps whole lines from several processes apart.
  UniqueFd fd(::open(manifest_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  Status s = fd.valid() ? write_all(fd.get(), json + "\n", manifest_)
                        : error(Code::io_error, "cannot open '{}': {}", manifest_, std::strerror(errno));
  if (!s.ok()) log(LogLevel::warn, "usage manifest: {}", s.message());
}

Result<std::vector<KernelSpec>> read_usage_manifest(const std::string& path) {
  MOEJIT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  std::vector<BadLine> bad;
  std::vector<KernelSpec> specs = manifest_specs(text, bad);
  for (const BadLine& b : bad) {
    if (!b.unterminated)
      return error(Code::invalid_argument, "{} line {}: {}", path, b.number, b.why);
    log(LogLevel::warn, "{} line {} is cut short (no newline; a run stopped while writing it): skipped ({})", path,
        b.number, b.why);
  }
  if (specs.empty())
    return error(Code::invalid_argument,
                 "{} lists no kernel spec: expected the usage manifest a run wrote (a context's usage_manifest "
                 "option), one spec JSON per line",
                 path);
  return specs;
}

}  // namespace moejit::dispatch
