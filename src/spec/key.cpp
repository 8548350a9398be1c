#include "spec/key.hpp"

#include <fmt/format.h>

#include "spec/spec_fields.hpp"

namespace moejit {

std::string canonical_spec_text(const KernelSpec& spec) {
  std::string text;
  for (const auto& field : spec_fields())
    fmt::format_to(std::back_inserter(text), "spec.{}={}\n", field.name,
                   field_value_text(field, field.get(spec)));
  return text;
}

KernelKey make_kernel_key(const KernelSpec& spec, const KeyContext& context) {
  KernelKey key;
  key.material = fmt::format("moejit-key-schema={}\n", kKeySchemaVersion);
  key.material += canonical_spec_text(spec);
  fmt::format_to(std::back_inserter(key.material), "template={}\ncompiler={}\nflags={}\n",
                 context.template_hash, context.compiler, context.flags);
  key.hash = xxh3_128(key.material);
  return key;
}

}  // namespace moejit
