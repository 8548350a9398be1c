#pragma once
// Helpers for the GPU suites (tests/test_device_*.cpp, doctest suite "device"): the launcher of
// the GPU under test, or a skip that says exactly what is missing.
//
// A suite skips (MESSAGE "skipped: ...", then returns) only when there is no driver, no device,
// a device without a moejit target, or no NVRTC; any other failure to set up the device is a
// test failure. With MOEJIT_REQUIRE_GPU=1 (bench/gpu/check.sh sets it once it has seen a GPU)
// a skip is a failure too, so a GPU run can never pass by skipping.

#include <doctest/doctest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "compile/nvrtc_library.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/device_launcher.hpp"
#include "spec/spec_fields.hpp"
#include "support/env.hpp"
#include "test_support.hpp"

namespace moejit::test {

// Why `s` is a reason to skip a GPU test rather than a failure.
inline bool is_missing_gpu(const Status& s) {
  return s.code() == Code::unavailable || s.code() == Code::unsupported;
}

// The process-wide launcher of device $MOEJIT_TEST_DEVICE (default 0), created once: the
// primary context and the loaded modules then outlive each test case.
inline Result<DeviceLauncher*> shared_device_launcher() {
  static Result<DeviceLauncher*> launcher = []() -> Result<DeviceLauncher*> {
    MOEJIT_ASSIGN_OR_RETURN(std::uint64_t ordinal, env_u64("MOEJIT_TEST_DEVICE", 0));
    MOEJIT_ASSIGN_OR_RETURN(auto created, DeviceLauncher::create(static_cast<int>(ordinal)));
    return created.release();  // for the process: the driver outlives every test
  }();
  return launcher;
}

inline bool gpu_required() {
  auto required = env_bool("MOEJIT_REQUIRE_GPU", false);
  return required.ok() && *required;
}

// The launcher, or null after a "skipped: <why>" MESSAGE (a failure when MOEJIT_REQUIRE_GPU=1
// or when the reason is not a missing GPU). `needs_nvrtc`: the test compiles kernels.
inline DeviceLauncher* device_launcher_or_skip(bool needs_nvrtc = true) {
  auto launcher = shared_device_launcher();
  if (!launcher.ok()) {
    const Status& s = launcher.status();
    if (!is_missing_gpu(s) || gpu_required()) {
      FAIL_CHECK("no GPU to test on: " << s.to_string());
      return nullptr;
    }
    MESSAGE("skipped: " << s.message());
    return nullptr;
  }
  if (needs_nvrtc) {
    auto nvrtc = NvrtcLibrary::get();
    if (!nvrtc.ok()) {
      if (gpu_required()) FAIL_CHECK("no NVRTC to compile device kernels: " << nvrtc.status().message());
      else toolchain_missing("no NVRTC to compile device kernels: " + nvrtc.status().message());
      return nullptr;
    }
  }
  return *launcher;
}

// "NVIDIA H200 (device 0, sm_90a, CC 9.0, driver 13000)", for MESSAGEs.
inline std::string describe_device(const DeviceLauncher& l) {
  const DeviceInfo& i = l.info();
  return i.name + " (device " + std::to_string(i.ordinal) + ", " + std::string(to_string(i.arch)) + ", CC " +
         std::to_string(i.cc_major) + "." + std::to_string(i.cc_minor) + ", driver " +
         std::to_string(i.driver_version) + ")";
}

}  // namespace moejit::test
