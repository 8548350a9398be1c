#include "spec/spec_json.hpp"

#include <nlohmann/json.hpp>

#include "spec/spec_fields.hpp"
#include "support/fs.hpp"
#include "support/json_input.hpp"

namespace moejit {
namespace {

using json = nlohmann::json;

std::string expected_names(const SpecField& f) {
  std::string s;
  for (std::size_t i = 1; i < f.value_names.size(); ++i) {
    if (!s.empty()) s += ", ";
    s += f.value_names[i];
  }
  return s;
}

Result<std::uint32_t> field_value(const SpecField& f, const json& v) {
  if (f.is_enum()) {
    if (v.is_string()) {
      auto name = v.get<std::string>();
      for (std::size_t i = 0; i < f.value_names.size(); ++i)
        if (f.value_names[i] == name) return static_cast<std::uint32_t>(i);
    }
    return error(Code::invalid_argument, "spec field '{}' = {}: expected one of: {}", f.name,
                 json_excerpt(v), expected_names(f));
  }
  if (!v.is_number_unsigned() || v.get<std::uint64_t>() > f.max_value)
    return error(Code::invalid_argument,
                 "spec field '{}' = {}: expected an unsigned integer in [0, {}]", f.name, json_excerpt(v),
                 f.max_value);
  return static_cast<std::uint32_t>(v.get<std::uint64_t>());
}

}  // namespace

Result<KernelSpec> parse_spec_json(std::string_view text) {
  MOEJIT_ASSIGN_OR_RETURN(json doc, parse_json_input(text, "spec"));
  return spec_from_json(doc);
}

Result<KernelSpec> spec_from_json(const json& doc) {
  if (!doc.is_object())
    return error(Code::invalid_argument, "spec: expected a JSON object of KernelSpec fields");
  KernelSpec spec{};
  for (const auto& [key, value] : doc.items()) {
    const SpecField* f = find_spec_field(key);
    if (f == nullptr) {
      std::string known;
      for (const auto& g : spec_fields()) known += (known.empty() ? "" : ", ") + std::string(g.name);
      return error(Code::invalid_argument, "spec: unknown field '{}'; known fields: {}", key, known);
    }
    MOEJIT_ASSIGN_OR_RETURN(std::uint32_t v, field_value(*f, value));
    f->set(spec, v);
  }
  return spec;
}

Result<KernelSpec> load_spec_file(const std::string& path) {
  MOEJIT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  auto spec = parse_spec_json(text);
  if (!spec.ok())
    return Status(spec.status().code(), path + ": " + spec.status().message());
  return spec;
}

std::string spec_to_json(const KernelSpec& spec) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::object();
  for (const auto& f : spec_fields()) {
    std::uint32_t v = f.get(spec);
    if (v == 0) continue;
    if (f.is_enum()) doc[std::string(f.name)] = field_value_text(f, v);
    else doc[std::string(f.name)] = v;
  }
  return doc.dump();
}

}  // namespace moejit
