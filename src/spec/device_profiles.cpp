#include "spec/device_profiles.hpp"

#include <algorithm>
#include <array>

#include "spec/arch.hpp"

namespace moejit {
namespace {

constexpr std::uint64_t MiB = 1024ull * 1024;

// The first profile of each architecture is its default. Shared memory per SM is the
// configurable maximum from the CUDA C++ Programming Guide's compute-capability table (228 KB
// on 9.0/10.0, 164 KB on 8.0, 100 KB on 8.6/8.9/12.x); registers 64 K 32-bit everywhere.
constexpr std::array kProfiles = {
    DeviceProfile{"H200", Arch::sm_90a, 132, 1.98, 4.8e12, 228 * 1024, 65536, 2048, 32, 50 * MiB, 700,
                  "NVIDIA H200 Tensor Core GPU datasheet (SXM: 4.8 TB/s HBM3e); SM count, clock and L2 as H100 SXM5"},
    DeviceProfile{"H100-SXM", Arch::sm_90a, 132, 1.98, 3.35e12, 228 * 1024, 65536, 2048, 32, 50 * MiB, 700,
                  "NVIDIA H100 Tensor Core GPU datasheet and Hopper architecture whitepaper (SXM5: 132 SMs, 3.35 TB/s)"},
    DeviceProfile{"H100-PCIe", Arch::sm_90a, 114, 1.755, 2.0e12, 228 * 1024, 65536, 2048, 32, 50 * MiB, 700,
                  "NVIDIA H100 datasheet and Hopper whitepaper (PCIe: 114 SMs, 2.0 TB/s HBM2e)"},
    DeviceProfile{"B200", Arch::sm_100a, 148, 1.965, 8.0e12, 228 * 1024, 65536, 2048, 32, 126 * MiB, 700,
                  "NVIDIA HGX B200 datasheet (8 TB/s HBM3e per GPU); 148 SMs and L2 as reported by Chips and Cheese"},
    DeviceProfile{"RTX-PRO-6000", Arch::sm_120a, 188, 2.617, 1.792e12, 100 * 1024, 65536, 1536, 32, 128 * MiB, 600,
                  "NVIDIA RTX PRO 6000 Blackwell datasheet (188 SMs, 1792 GB/s GDDR7, 128 MB L2)"},
    DeviceProfile{"GB10", Arch::sm_121a, 48, 2.4, 273e9, 100 * 1024, 65536, 1536, 32, 24 * MiB, 600,
                  "NVIDIA DGX Spark datasheet (GB10: 6144 CUDA cores = 48 SMs, 273 GB/s LPDDR5x); clock and L2 "
                  "are our estimates (not published)"},
    DeviceProfile{"A100-SXM4", Arch::sm_80, 108, 1.41, 2.039e12, 164 * 1024, 65536, 2048, 32, 40 * MiB, 700,
                  "NVIDIA A100 datasheet (80 GB SXM4: 2039 GB/s) and Ampere architecture whitepaper"},
    DeviceProfile{"A10", Arch::sm_86, 72, 1.695, 600e9, 100 * 1024, 65536, 1536, 16, 6 * MiB, 600,
                  "NVIDIA A10 datasheet (72 SMs, 600 GB/s GDDR6)"},
    DeviceProfile{"L40S", Arch::sm_89, 142, 2.52, 864e9, 100 * 1024, 65536, 1536, 24, 96 * MiB, 600,
                  "NVIDIA L40S datasheet (142 SMs, 864 GB/s GDDR6, 96 MB L2)"},
};

// Hardware family of an arch: the `a` target and its plain form run on the same devices.
int family(Arch arch) { return arch_info(arch).sm; }

}  // namespace

std::span<const DeviceProfile> device_profiles() { return kProfiles; }

std::optional<DeviceProfile> device_profile(std::string_view name) {
  for (const auto& p : kProfiles)
    if (p.name == name) return p;
  return std::nullopt;
}

std::vector<DeviceProfile> device_profiles_for(Arch arch) {
  std::vector<DeviceProfile> out;
  for (const auto& p : kProfiles)
    if (family(p.arch) == family(arch)) out.push_back(p);
  return out;
}

std::optional<DeviceProfile> device_profile_for(Arch arch, std::uint32_t sms) {
  for (const auto& p : kProfiles)
    if (family(p.arch) == family(arch) && p.sms == sms) return p;
  return std::nullopt;
}

std::optional<DeviceProfile> default_device_profile(Arch arch) {
  for (const auto& p : kProfiles)
    if (family(p.arch) == family(arch)) return p;
  return std::nullopt;
}

std::vector<std::uint32_t> sm_counts_for(Arch arch) {
  std::vector<std::uint32_t> out;
  for (const auto& p : device_profiles_for(arch)) out.push_back(p.sms);
  if (out.empty()) out.push_back(kFallbackSms);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace moejit
