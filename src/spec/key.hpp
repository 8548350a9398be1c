#pragma once
// The store key (DESIGN §3): XXH3-128 over a canonical, versioned text that names every spec
// field, the template include closure's content hash, the compiler identity and the normalized
// compile flags. The text itself ("key material") is kept in each store entry, so a load can
// prove an entry belongs to the spec asking for it and `moejit cache ls` can show what it is.

#include <string>
#include <string_view>

#include "spec/kernel_spec.hpp"
#include "support/hash.hpp"

namespace moejit {

// Bump when the material's layout or the meaning of any field changes.
inline constexpr int kKeySchemaVersion = 1;

// What besides the spec decides the binary.
struct KeyContext {
  std::string_view template_hash;  // content hash of the template's include closure (hex)
  std::string_view compiler;       // e.g. "nvrtc 13.0 V13.0.88 CL-36424714"
  std::string_view flags;          // normalized flags; logical include roots only, no paths
};

struct KernelKey {
  Hash128 hash;
  std::string material;
};

// "op=moe_align\nweight=none\n..." — every field, in table order, enum values by name.
std::string canonical_spec_text(const KernelSpec& spec);

KernelKey make_kernel_key(const KernelSpec& spec, const KeyContext& context);

}  // namespace moejit
