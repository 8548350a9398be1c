#pragma once
// One table describes every KernelSpec field: its name (also its JSON key), how to read and write
// it as an integer, and, for enums, the name of each value. The canonical key encoding, the JSON
// reader and writer, and the key tests all walk this table, so a new field cannot be forgotten
// by one of them.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "spec/kernel_spec.hpp"

namespace moejit {

struct SpecField {
  std::string_view name;
  std::span<const std::string_view> value_names;  // enum: name of each value; number: empty
  std::uint32_t max_value;                        // largest value the field can hold
  std::uint32_t (*get)(const KernelSpec&);
  void (*set)(KernelSpec&, std::uint32_t);

  bool is_enum() const { return !value_names.empty(); }
};

std::span<const SpecField> spec_fields();
const SpecField* find_spec_field(std::string_view name);

// The value as text: the enum value's name, or the number in decimal.
std::string field_value_text(const SpecField& field, std::uint32_t value);

// Enum values as names ("moe_align", "bf16", ...).
std::string_view to_string(Op v);
std::string_view to_string(WeightFormat v);
std::string_view to_string(DType v);
std::string_view to_string(Layout v);
std::string_view to_string(Epilogue v);
std::string_view to_string(Backend v);
std::string_view to_string(ActScale v);
std::string_view to_string(Arch v);

}  // namespace moejit
