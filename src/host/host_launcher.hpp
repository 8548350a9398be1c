#pragma once
// The host backend's Launcher: kernels run on moejit's SIMT executor, memory is host memory,
// everything is synchronous (streams are ignored).

#include "runtime/launcher.hpp"
#include "spec/device_profiles.hpp"

namespace moejit {

class HostLauncher final : public Launcher {
 public:
  // `arch` bounds tile choices (shared memory) as that GPU would; sm_90a by default.
  explicit HostLauncher(Arch arch = Arch::sm_90a)
      : arch_(arch), sms_(default_device_profile(arch) ? default_device_profile(arch)->sms : kFallbackSms) {}

  Backend backend() const override { return Backend::host; }
  Arch arch() const override { return arch_; }
  std::uint32_t sm_count() const override { return sms_; }
  Status launch(const ResolvedKernel& kernel, const LaunchDims& dims, const void* params,
                std::size_t params_bytes, void* stream) override;
  Status copy_to_backend(void* dst, const void* src, std::size_t bytes, void* stream) override;
  Status copy_from_backend(void* dst, const void* src, std::size_t bytes, void* stream) override;
  Status fill(void* dst, std::uint8_t value, std::size_t bytes, void* stream) override;
  Status synchronize(void*) override { return {}; }
  Result<bool> capturing(void*) override { return false; }
  // Host kernels are loaded by the resolver and launched as calls: nothing to prepare.
  Status prepare(const ResolvedKernel&, std::uint32_t) override { return {}; }

 private:
  Arch arch_;
  std::uint32_t sms_;
};

}  // namespace moejit
