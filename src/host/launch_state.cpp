#include "host/launch_state.hpp"

namespace moejit::host {

void LaunchState::fail(Status status) {
  {
    std::lock_guard lock(error_mutex_);
    if (error_.ok()) error_ = std::move(status);
  }
  aborted_.store(true, std::memory_order_relaxed);
}

Status LaunchState::result() const {
  std::lock_guard lock(error_mutex_);
  return error_;
}

}  // namespace moejit::host
