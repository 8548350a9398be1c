#pragma once
// The grid of one kernel launch. Ops compute only this; the block size and dynamic shared
// memory of a launch come from the resolved kernel (runtime/resolved_kernel.hpp), which holds
// what its kernel definition said when it was compiled.

#include <cstdint>

namespace moejit {

struct LaunchGrid {
  std::uint32_t x = 1, y = 1, z = 1;
  bool empty() const { return x == 0 || y == 0 || z == 0; }
};

}  // namespace moejit
