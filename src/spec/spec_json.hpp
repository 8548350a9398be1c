#pragma once
// KernelSpec <-> JSON. The schema is flat: one key per KernelSpec field (see spec_fields.hpp and
// the README), enum values by name, numbers as JSON integers. Absent keys are 0 / none; unknown
// keys are errors, so a typo never silently drops a setting.

#include <string>
#include <string_view>

#include "spec/kernel_spec.hpp"
#include "support/json_input.hpp"
#include "support/status.hpp"

namespace moejit {

// Parses (does not validate) a spec. Errors name the offending key and what was expected.
Result<KernelSpec> parse_spec_json(std::string_view text);
// The same for a spec already parsed (read with parse_json_input), e.g. inside a larger record.
Result<KernelSpec> spec_from_json(const nlohmann::json& doc);

// Reads and parses a spec file; errors name the file.
Result<KernelSpec> load_spec_file(const std::string& path);

// Compact JSON with the fields that are set (non-zero), in table order.
std::string spec_to_json(const KernelSpec& spec);

}  // namespace moejit
