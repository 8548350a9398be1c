#include "host/host_launcher.hpp"

#include <cstring>

#include "host/launch.hpp"

namespace moejit {

Status HostLauncher::launch(const ResolvedKernel& kernel, const LaunchDims& dims, const void* params,
                            std::size_t params_bytes, void*) {
  HostLaunchShape shape;
  shape.grid = {dims.grid[0], dims.grid[1], dims.grid[2]};
  shape.block = {dims.block[0], dims.block[1], dims.block[2]};
  shape.dynamic_shared_bytes = dims.dynamic_shared_bytes;
  return launch_host_kernel(kernel, params, params_bytes, shape);
}

Status HostLauncher::copy_to_backend(void* dst, const void* src, std::size_t bytes, void*) {
  if (bytes != 0 && (dst == nullptr || src == nullptr))
    return error(Code::invalid_argument, "copy of {} bytes with a null pointer", bytes);
  if (bytes != 0) std::memmove(dst, src, bytes);
  return {};
}

Status HostLauncher::copy_from_backend(void* dst, const void* src, std::size_t bytes, void* stream) {
  return copy_to_backend(dst, src, bytes, stream);
}

Status HostLauncher::fill(void* dst, std::uint8_t value, std::size_t bytes, void*) {
  if (bytes != 0 && dst == nullptr) return error(Code::invalid_argument, "fill of {} bytes at a null pointer", bytes);
  if (bytes != 0) std::memset(dst, value, bytes);
  return {};
}

}  // namespace moejit
