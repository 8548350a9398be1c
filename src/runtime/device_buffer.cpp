#include "runtime/device_buffer.hpp"

#include <utility>

#include "support/log.hpp"

namespace moejit {

Result<DeviceBuffer> DeviceBuffer::allocate(DeviceLauncher& launcher, std::size_t bytes) {
  MOEJIT_ASSIGN_OR_RETURN(CUdeviceptr p, launcher.allocate(bytes));
  DeviceBuffer b;
  b.launcher_ = &launcher;
  b.ptr_ = p;
  b.size_ = bytes;
  return b;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : launcher_(std::exchange(other.launcher_, nullptr)),
      ptr_(std::exchange(other.ptr_, 0)),
      size_(std::exchange(other.size_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    (void)reset();
    launcher_ = std::exchange(other.launcher_, nullptr);
    ptr_ = std::exchange(other.ptr_, 0);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (Status s = reset(); !s.ok()) log(LogLevel::warn, "device buffer not freed: {}", s.message());
}

Status DeviceBuffer::reset() {
  if (ptr_ == 0) return {};
  Status s = launcher_->release(std::exchange(ptr_, 0));
  size_ = 0;
  return s;
}

}  // namespace moejit
