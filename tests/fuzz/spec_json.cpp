// Fuzz target: the spec JSON reader (parse_spec_json) on arbitrary bytes. Besides not crashing,
// a spec it accepts must survive the writer: spec_to_json then parse_spec_json gives it back,
// and its canonical key text can be formed.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "spec/key.hpp"
#include "spec/spec_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = moejit::parse_spec_json(text);
  if (!spec.ok()) {
    if (spec.status().message().empty()) __builtin_trap();  // every error says what was expected
    return 0;
  }
  auto again = moejit::parse_spec_json(moejit::spec_to_json(*spec));
  if (!again.ok() || !(*again == *spec)) __builtin_trap();
  if (moejit::canonical_spec_text(*spec).empty()) __builtin_trap();
  return 0;
}
