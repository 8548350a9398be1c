#pragma once
// The one way moejit reads JSON that users hand it (spec files, model configs, usage manifests):
// nesting is bounded and the parse never recurses, so hostile depth cannot overflow the stack
// (nlohmann's own copy, compare and dump recurse, and every later step of ours walks the value);
// a key repeated in one object is an error, since which copy wins differs between readers and a
// silently dropped setting is a wrong kernel.

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

#include "support/status.hpp"

namespace moejit {

// Deeper than any real spec or config (Hugging Face configs nest 3-4 levels) and shallow enough
// that the recursive operations on the parsed value stay far from the stack's end.
inline constexpr std::size_t kJsonMaxDepth = 64;

// Parses `text`. `source` names it in errors ("spec", a file path), which say what was expected:
// "<source>: not valid JSON: ...", "... nested deeper than 64 ...", "... duplicate key 'k' ...".
Result<nlohmann::json> parse_json_input(std::string_view text, std::string_view source,
                                        std::size_t max_depth = kJsonMaxDepth);

// `value` as compact JSON for an error message, cut to about `max_chars` (a field's bad value
// may be a 100 KB string); invalid UTF-8 cannot occur in parsed input but is replaced, not thrown.
std::string json_excerpt(const nlohmann::json& value, std::size_t max_chars = 64);

}  // namespace moejit
