#pragma once
// Advisory per-key locks between processes (flock on a file in a node-local directory). They
// make concurrent processes compile a key once; correctness never depends on them, so a lock
// that cannot be had in time is given up on (logged) and the caller proceeds unlocked.

#include <chrono>
#include <string>

#include "support/fs.hpp"

namespace moejit::store {

class KeyLock {
 public:
  KeyLock() = default;  // not held
  KeyLock(KeyLock&&) = default;
  KeyLock& operator=(KeyLock&&) = default;
  ~KeyLock();  // releases (closing the descriptor releases the flock)

  bool held() const { return fd_.valid(); }
  // Milliseconds spent waiting for it (0 when it was free).
  double waited_ms() const { return waited_ms_; }
  bool timed_out() const { return timed_out_; }

  // Takes an exclusive flock on `path` (created 0600 if missing), waiting at most `timeout`.
  // A link at `path`, or a file that is not the effective user's, is not locked (nor waited on).
  static KeyLock acquire(const std::string& path, std::chrono::milliseconds timeout);

 private:
  UniqueFd fd_;
  double waited_ms_ = 0;
  bool timed_out_ = false;
};

}  // namespace moejit::store
