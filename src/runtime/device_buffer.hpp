#pragma once
// An owned allocation of device memory (cuMemAlloc / cuMemFree through a DeviceLauncher), for
// tests, benchmarks and tools. Engines bring their own memory; the library never allocates on
// the launch path.

#include <cstddef>

#include "runtime/device_launcher.hpp"

namespace moejit {

class DeviceBuffer {
 public:
  // `bytes` (at least 1) of device memory in the context `launcher` works in; the launcher must
  // outlive the buffer.
  static Result<DeviceBuffer> allocate(DeviceLauncher& launcher, std::size_t bytes);

  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();  // a failed free is logged, never thrown

  // Frees now and reports how that went.
  Status reset();

  void* data() const { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(ptr_)); }
  template <typename T>
  T* as() const { return static_cast<T*>(data()); }
  CUdeviceptr ptr() const { return ptr_; }
  std::size_t size() const { return size_; }
  explicit operator bool() const { return ptr_ != 0; }

 private:
  DeviceLauncher* launcher_ = nullptr;
  CUdeviceptr ptr_ = 0;
  std::size_t size_ = 0;
};

}  // namespace moejit
