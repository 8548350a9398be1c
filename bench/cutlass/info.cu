// What this build of the baselines carries.

#include <string>

#include "bench/cutlass/cutlass_baselines.hpp"
#include "cutlass/arch/config.h"
#include "cutlass/version.h"

namespace moejit::bench::cutlass_baseline {

// The kernels are compiled when CMake's MOEJIT_CUTLASS_KERNELS is on (the default). They need
// nvcc 12.3+ (modifiable TMA descriptors, for the grouped kernels) and are compiled for sm_90a
// only (CMakeLists.txt; plan.hpp stops a build for plain sm_90). The
// SM90A_ENABLED macros exist only in device passes, so the host pass checks the toolkit and the
// architecture CMake passed.
bool available() {
#if MOEJIT_CUTLASS_KERNELS && defined(CUTLASS_ARCH_MMA_MODIFIABLE_TMA_SM90_SUPPORTED) && defined(MOEJIT_CUTLASS_ARCH)
  return true;
#else
  return false;
#endif
}

std::string build_info() {
  std::string info = "CUTLASS " + std::to_string(CUTLASS_MAJOR) + "." + std::to_string(CUTLASS_MINOR) + "." +
                     std::to_string(CUTLASS_PATCH) + ", nvcc " + std::to_string(__CUDACC_VER_MAJOR__) + "." +
                     std::to_string(__CUDACC_VER_MINOR__);
#if defined(MOEJIT_CUTLASS_ARCH)
  info += std::string(", ") + MOEJIT_CUTLASS_ARCH;
#endif
#if !MOEJIT_CUTLASS_KERNELS
  info += " (kernels not built: configured with -DMOEJIT_CUTLASS_KERNELS=OFF)";
#else
  if (!available()) info += " (kernels not built: nvcc 12.3+ and sm_90a needed)";
#endif
  return info;
}

}  // namespace moejit::bench::cutlass_baseline
