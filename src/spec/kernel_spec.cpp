#include "spec/kernel_spec.hpp"

#include "support/hash.hpp"

namespace moejit {

std::size_t KernelSpecHash::operator()(const KernelSpec& spec) const noexcept {
  return static_cast<std::size_t>(xxh3_64(&spec, sizeof spec));
}

}  // namespace moejit
