#include "dispatch/spec_observer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "dispatch/grouped_gemm_op.hpp"
#include "spec/spec_fields.hpp"
#include "spec/spec_json.hpp"
#include "support/fs.hpp"
#include "support/hash.hpp"
#include "support/json_input.hpp"
#include "support/log.hpp"

namespace moejit::dispatch {
namespace {

using json = nlohmann::json;

// A grouped GEMM call's fields in a manifest line, each with its largest value.
struct GemmCallField {
  const char* name;
  std::uint32_t max;
  std::uint32_t GemmCall::*member;
};
constexpr GemmCallField kGemmCallFields[] = {
    {"m", 2147483647, &GemmCall::m},
    {"rows_per_expert_hint", 4294967295u, &GemmCall::rows_per_expert_hint},
    {"topk_hint", 4294967295u, &GemmCall::topk_hint},
    {"global_experts_hint", 4294967295u, &GemmCall::global_experts_hint},
    {"weights_before_dependency", 1, &GemmCall::weights_before_dependency},
};

Result<GemmCall> parse_gemm_call(const json& doc) {
  if (!doc.is_object()) return error(Code::invalid_argument, "'gemm_call' = {}: expected an object", json_excerpt(doc));
  GemmCall call;
  for (const auto& [key, value] : doc.items()) {
    const GemmCallField* f = nullptr;
    for (const GemmCallField& g : kGemmCallFields)
      if (key == g.name) f = &g;
    if (f == nullptr)
      return error(Code::invalid_argument,
                   "gemm_call: unknown field '{}'; known fields: m, rows_per_expert_hint, topk_hint, "
                   "global_experts_hint, weights_before_dependency",
                   key);
    if (!value.is_number_unsigned() || value.get<std::uint64_t>() > f->max)
      return error(Code::invalid_argument, "gemm_call field '{}' = {}: expected an unsigned integer in [0, {}]", key,
                   json_excerpt(value), f->max);
    call.*(f->member) = static_cast<std::uint32_t>(value.get<std::uint64_t>());
  }
  return call;
}

// One manifest line: a spec's JSON, or {"spec": SPEC, "gemm_call": CALL} for a grouped GEMM.
Result<UsageRecord> parse_usage_line(std::string_view line) {
  MOEJIT_ASSIGN_OR_RETURN(json doc, parse_json_input(line, "usage record"));
  if (!doc.is_object() || !doc.contains("spec")) {
    MOEJIT_ASSIGN_OR_RETURN(KernelSpec spec, spec_from_json(doc));
    return UsageRecord{spec, std::nullopt};
  }
  UsageRecord record;
  for (const auto& [key, value] : doc.items())
    if (key != "spec" && key != "gemm_call")
      return error(Code::invalid_argument, "usage record: unknown field '{}'; expected 'spec' and 'gemm_call'", key);
  MOEJIT_ASSIGN_OR_RETURN(record.spec, spec_from_json(doc["spec"]));
  if (doc.contains("gemm_call")) {
    if (record.spec.op != Op::grouped_gemm)
      return error(Code::invalid_argument, "usage record: 'gemm_call' with a {} spec: expected it only with grouped_gemm",
                   to_string(record.spec.op));
    MOEJIT_ASSIGN_OR_RETURN(record.gemm, parse_gemm_call(doc["gemm_call"]));
  }
  return record;
}

// The records of a manifest's text, line by line; `bad` gets each line that does not parse (its
// number, whether it ends the text without a newline, why).
struct BadLine {
  std::size_t number;
  bool unterminated;
  std::string why;
};
std::vector<UsageRecord> manifest_records(std::string_view text, std::vector<BadLine>& bad) {
  std::vector<UsageRecord> records;
  std::unordered_set<UsageRecord, UsageRecordHash> seen;
  std::size_t line_no = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    const bool unterminated = end == std::string_view::npos;
    if (unterminated) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.empty()) continue;
    auto record = parse_usage_line(line);
    if (!record.ok()) bad.push_back({line_no, unterminated, record.status().message()});
    else if (seen.insert(*record).second) records.push_back(*record);
  }
  return records;
}

}  // namespace

std::size_t UsageRecordHash::operator()(const UsageRecord& r) const noexcept {
  const GemmCall c = r.gemm.value_or(GemmCall{});
  const std::uint64_t words[] = {KernelSpecHash{}(r.spec), r.gemm.has_value(), c.m, c.rows_per_expert_hint,
                                 c.topk_hint,                c.global_experts_hint, c.weights_before_dependency};
  return static_cast<std::size_t>(xxh3_64(words, sizeof words));
}

std::string usage_record_json(const UsageRecord& r) {
  const std::string spec = spec_to_json(r.spec);
  if (!r.gemm) return spec;
  const GemmCall& c = *r.gemm;
  return fmt::format(
      R"({{"spec":{},"gemm_call":{{"m":{},"rows_per_expert_hint":{},"topk_hint":{},"global_experts_hint":{},)"
      R"("weights_before_dependency":{}}}}})",
      spec, c.m, c.rows_per_expert_hint, c.topk_hint, c.global_experts_hint, c.weights_before_dependency);
}

namespace {
// What a use is remembered by: the record, except that the calls of a grouped GEMM whose tile does
// not depend on the call (prefill tiles, and decode tiles the fused layer picks below its rows:
// stand_in_call) are all one, so that its first call stands for the rest (a prefill server would
// otherwise add a line per distinct M).
UsageRecord remembered_as(const UsageRecord& r) {
  if (!r.gemm) return r;
  auto stand_in = stand_in_call(r.spec, r.gemm);
  return stand_in ? UsageRecord{r.spec, stand_in} : r;
}
}  // namespace

SpecObserver::SpecObserver(std::string manifest, bool print) : manifest_(std::move(manifest)), print_(print) {
  if (manifest_.empty()) return;
  // What earlier runs recorded; unreadable or absent, everything used is appended.
  if (auto text = read_file(manifest_); text.ok()) {
    std::vector<BadLine> bad;
    for (const UsageRecord& r : manifest_records(*text, bad)) recorded_.insert(remembered_as(r));
  }
}

void SpecObserver::used(const KernelSpec& spec, const Decision& why) {
  const UsageRecord record{spec, why.gemm};
  const UsageRecord key = remembered_as(record);
  {
    std::shared_lock lock(mutex_);
    if (seen_.count(key) != 0) return;
  }
  std::unique_lock lock(mutex_);
  if (!seen_.insert(key).second) return;
  const std::string json = usage_record_json(record);
  // Asked for by name (MOEJIT_PRINT_CONFIGS=1): shown whatever MOEJIT_LOG_LEVEL says, and tagged
  // info, since a decision is not a problem.
  if (print_)
    log_message(LogLevel::info,
                fmt::format("config: {} <- {} m={} rows/expert={}", json, why.op, why.rows, why.rows_per_expert));
  if (manifest_.empty() || !recorded_.insert(key).second) return;
  // O_APPEND keeps whole lines from several processes apart.
  UniqueFd fd(::open(manifest_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  Status s = fd.valid() ? write_all(fd.get(), json + "\n", manifest_)
                        : error(Code::io_error, "cannot open '{}': {}", manifest_, std::strerror(errno));
  if (!s.ok()) log(LogLevel::warn, "usage manifest: {}", s.message());
}

Result<std::vector<UsageRecord>> read_usage_manifest(const std::string& path) {
  MOEJIT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  std::vector<BadLine> bad;
  std::vector<UsageRecord> specs = manifest_records(text, bad);
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
