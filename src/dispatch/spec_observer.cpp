#include "dispatch/spec_observer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <mutex>
#include <type_traits>

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
    {"fused_layer", 1, &GemmCall::fused_layer},
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
                   "global_experts_hint, weights_before_dependency, fused_layer",
                   key);
    if (!value.is_number_unsigned() || value.get<std::uint64_t>() > f->max)
      return error(Code::invalid_argument, "gemm_call field '{}' = {}: expected an unsigned integer in [0, {}]", key,
                   json_excerpt(value), f->max);
    call.*(f->member) = static_cast<std::uint32_t>(value.get<std::uint64_t>());
  }
  return call;
}

// A fused layer call's fields in a manifest line: enums by the value names of the KernelSpec
// field `names_from`, numbers up to `max`.
struct LayerCallField {
  const char* name;
  const char* names_from;  // nullptr: a number
  std::uint32_t max;
  std::uint32_t (*get)(const LayerCall&);
  void (*set)(LayerCall&, std::uint32_t);
};
template <auto Member>
std::uint32_t get_layer_field(const LayerCall& c) {
  return static_cast<std::uint32_t>(c.*Member);
}
template <auto Member>
void set_layer_field(LayerCall& c, std::uint32_t v) {
  c.*Member = static_cast<std::remove_cvref_t<decltype(c.*Member)>>(v);
}
template <auto Member>
constexpr LayerCallField layer_field(const char* name, const char* names_from, std::uint32_t max = 0) {
  return {name, names_from, max, &get_layer_field<Member>, &set_layer_field<Member>};
}
constexpr LayerCallField kLayerCallFields[] = {
    layer_field<&LayerCall::arch>("arch", "arch"),
    layer_field<&LayerCall::backend>("backend", "backend"),
    layer_field<&LayerCall::w13_weight>("w13_weight", "weight"),
    layer_field<&LayerCall::w13_scale>("w13_scale", "scale"),
    layer_field<&LayerCall::w13_group_size>("w13_group_size", nullptr, 4294967295u),
    layer_field<&LayerCall::w13_packed_for>("w13_packed_for", "act"),
    layer_field<&LayerCall::w2_weight>("w2_weight", "weight"),
    layer_field<&LayerCall::w2_scale>("w2_scale", "scale"),
    layer_field<&LayerCall::w2_group_size>("w2_group_size", nullptr, 4294967295u),
    layer_field<&LayerCall::w2_packed_for>("w2_packed_for", "act"),
    layer_field<&LayerCall::act>("act", "act"),
    layer_field<&LayerCall::act_scale>("act_scale", "act_scale"),
    layer_field<&LayerCall::out>("out", "out"),
    layer_field<&LayerCall::activation>("activation", "epilogue"),
    layer_field<&LayerCall::hidden>("hidden", nullptr, 4294967295u),
    layer_field<&LayerCall::intermediate>("intermediate", nullptr, 4294967295u),
    layer_field<&LayerCall::experts>("experts", nullptr, 4294967295u),
    layer_field<&LayerCall::global_experts>("global_experts", nullptr, 4294967295u),
    layer_field<&LayerCall::topk>("topk", nullptr, 4294967295u),
    layer_field<&LayerCall::tokens_from>("tokens_from", nullptr, kLayerMaxTokens),
    layer_field<&LayerCall::tokens_to>("tokens_to", nullptr, kLayerMaxTokens),
};

std::string layer_call_json(const LayerCall& c) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::object();
  for (const LayerCallField& f : kLayerCallFields) {
    const std::uint32_t v = f.get(c);
    if (f.names_from != nullptr) doc[f.name] = field_value_text(*find_spec_field(f.names_from), v);
    else doc[f.name] = v;
  }
  return nlohmann::ordered_json{{"fused_moe", std::move(doc)}}.dump();
}

// Every field is required: a layer is planned again from all of them. The shapes are checked
// where the layer is planned (fused_moe_specs), the token range here.
Result<LayerCall> parse_layer_call(const json& doc) {
  if (!doc.is_object()) return error(Code::invalid_argument, "'fused_moe' = {}: expected an object", json_excerpt(doc));
  LayerCall call;
  for (const auto& [key, value] : doc.items())
    if (std::none_of(std::begin(kLayerCallFields), std::end(kLayerCallFields),
                     [&](const LayerCallField& f) { return key == f.name; }))
      return error(Code::invalid_argument, "fused_moe: unknown field '{}'", key);
  for (const LayerCallField& f : kLayerCallFields) {
    if (!doc.contains(f.name)) return error(Code::invalid_argument, "fused_moe: missing field '{}'", f.name);
    const json& value = doc[f.name];
    if (f.names_from == nullptr) {
      if (!value.is_number_unsigned() || value.get<std::uint64_t>() > f.max)
        return error(Code::invalid_argument, "fused_moe field '{}' = {}: expected an unsigned integer in [0, {}]", f.name,
                     json_excerpt(value), f.max);
      f.set(call, static_cast<std::uint32_t>(value.get<std::uint64_t>()));
      continue;
    }
    const SpecField& names = *find_spec_field(f.names_from);
    const auto it = value.is_string() ? std::find(names.value_names.begin(), names.value_names.end(),
                                                  value.get<std::string>())
                                      : names.value_names.end();
    if (it == names.value_names.end())
      return error(Code::invalid_argument, "fused_moe field '{}' = {}: expected one of {}", f.name, json_excerpt(value),
                   fmt::join(names.value_names, ", "));
    f.set(call, static_cast<std::uint32_t>(it - names.value_names.begin()));
  }
  if (call.tokens_to == 0 || layer_token_range(call.tokens_to) != std::pair{call.tokens_from, call.tokens_to})
    return error(Code::invalid_argument,
                 "fused_moe fields 'tokens_from' = {}, 'tokens_to' = {}: expected a range as a run records it (from = "
                 "to for 1 to {}; above, to a power of two and from one more than half of it)",
                 call.tokens_from, call.tokens_to, kLayerExactTokens);
  return call;
}

// One manifest line: a spec's JSON, {"spec": SPEC, "gemm_call": CALL} for a grouped GEMM, or
// {"fused_moe": LAYER}.
Result<UsageRecord> parse_usage_line(std::string_view line) {
  MOEJIT_ASSIGN_OR_RETURN(json doc, parse_json_input(line, "usage record"));
  if (doc.is_object() && doc.contains("fused_moe")) {
    if (doc.size() != 1)
      return error(Code::invalid_argument, "usage record: a 'fused_moe' record with other fields; expected it alone");
    MOEJIT_ASSIGN_OR_RETURN(LayerCall layer, parse_layer_call(doc["fused_moe"]));
    return UsageRecord{KernelSpec{}, std::nullopt, layer};
  }
  if (!doc.is_object() || !doc.contains("spec")) {
    MOEJIT_ASSIGN_OR_RETURN(KernelSpec spec, spec_from_json(doc));
    return UsageRecord{spec, std::nullopt, std::nullopt};
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

std::pair<std::uint32_t, std::uint32_t> layer_token_range(std::uint32_t tokens) {
  if (tokens <= kLayerExactTokens) return {tokens, tokens};
  const std::uint32_t to = std::bit_ceil(tokens);
  return {to / 2 + 1, to};
}

std::size_t UsageRecordHash::operator()(const UsageRecord& r) const noexcept {
  const GemmCall c = r.gemm.value_or(GemmCall{});
  std::uint64_t words[3 + std::size(kGemmCallFields) + std::size(kLayerCallFields)] = {
      KernelSpecHash{}(r.spec), r.gemm.has_value(), r.layer.has_value()};
  std::size_t n = 3;
  for (const GemmCallField& f : kGemmCallFields) words[n++] = c.*(f.member);
  if (r.layer)
    for (const LayerCallField& f : kLayerCallFields) words[n++] = f.get(*r.layer);
  return static_cast<std::size_t>(xxh3_64(words, n * sizeof words[0]));
}

std::string usage_record_json(const UsageRecord& r) {
  if (r.layer) return layer_call_json(*r.layer);
  const std::string spec = spec_to_json(r.spec);
  if (!r.gemm) return spec;
  const GemmCall& c = *r.gemm;
  return fmt::format(
      R"({{"spec":{},"gemm_call":{{"m":{},"rows_per_expert_hint":{},"topk_hint":{},"global_experts_hint":{},)"
      R"("weights_before_dependency":{},"fused_layer":{}}}}})",
      spec, c.m, c.rows_per_expert_hint, c.topk_hint, c.global_experts_hint, c.weights_before_dependency,
      c.fused_layer);
}

namespace {
// What a use is remembered by: the record, except that the calls of a grouped GEMM whose tile does
// not depend on the call (prefill tiles, and decode tiles the fused layer picks below its rows:
// stand_in_call) are all one, so that its first call stands for the rest (a prefill server would
// otherwise add a line per distinct M).
UsageRecord remembered_as(const UsageRecord& r) {
  if (!r.gemm) return r;
  auto stand_in = stand_in_call(r.spec, r.gemm);
  return stand_in ? UsageRecord{r.spec, stand_in, std::nullopt} : r;
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

void SpecObserver::used(const KernelSpec& spec, const Decision& why) { remember({spec, why.gemm, std::nullopt}, &why); }

void SpecObserver::used_layer(const LayerCall& call) {
  if (manifest_.empty()) return;
  remember({KernelSpec{}, std::nullopt, call}, nullptr);
}

void SpecObserver::remember(const UsageRecord& record, const Decision* why) {
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
  if (print_ && why != nullptr)
    log_message(LogLevel::info,
                fmt::format("config: {} <- {} m={} rows/expert={}", json, why->op, why->rows, why->rows_per_expert));
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
                 "{} lists no kernel spec or layer: expected the usage manifest a run wrote (a context's usage_manifest "
                 "option), one spec JSON per line",
                 path);
  return specs;
}

}  // namespace moejit::dispatch
