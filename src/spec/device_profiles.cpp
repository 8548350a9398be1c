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
// Sources of DeviceProfile::mma_per_clock (bf16 m16n8k16 mma.sync per SM per clock; MACs per
// SM per clock = TFLOP/s / 2 / SMs / clock, over the 2048 MACs of one instruction).
constexpr std::string_view kMmaHopper =
    "mma.sync is not Hopper's fastest path (wgmma: 989 TFLOP/s = 2048 MACs/SM/clk at 1.83 GHz, 132 SMs). Public "
    "reports of mma.sync put it at 50-65% of that (arXiv 2501.12084 as cited by others; no table we could read); "
    "0.6 (1229 MACs/SM/clk) is our estimate, to be measured by bench/gpu/mma_rate";
// Hopper's wgmma rate, DeviceProfile::wgmma_per_clock: the datasheet's dense bf16 989.4 TFLOP/s
// (H100 SXM5) is 2048 MACs per SM per clock at 1.83 GHz on 132 SMs, one m16n8k16 equivalent.
constexpr double kWgmmaHopper = 1.0;
constexpr std::string_view kMmaB200 =
    "legacy mma.sync on sm_100 (not tcgen05): an Nsight Compute analysis of FlashAttention-2 on B200 finds 1024 "
    "MACs/SM/clk, a B300 pipe measurement about 1475; 0.5 is the lower, our estimate until bench/gpu/mma_rate "
    "measures it";
constexpr std::string_view kMmaRtxPro6000 =
    "datasheet dense bf16 with f32 accumulate, 503.8 TFLOP/s = 512 MACs/SM/clk at 2.617 GHz, 188 SMs (full rate, "
    "unlike GeForce parts); public mma.sync probes measure 512";
constexpr std::string_view kMmaGb10 =
    "our estimate: 512 MACs/SM/clk as the other sm_12x parts (a published 92 TFLOP/s bf16 matmul on 48 SMs rules "
    "out half rate)";
constexpr std::string_view kMmaA100 =
    "datasheet dense bf16 312 TFLOP/s = 1024 MACs/SM/clk at 1.41 GHz, 108 SMs; mma.sync is Ampere's peak path";
constexpr std::string_view kMmaA10 =
    "datasheet dense bf16 125 TFLOP/s = 512 MACs/SM/clk at 1.695 GHz, 72 SMs (the A40, same GA102, lists 149.7 "
    "with f32 accumulate: 512 too)";
constexpr std::string_view kMmaL40s =
    "datasheet dense bf16 362 TFLOP/s = 506 MACs/SM/clk at 2.52 GHz, 142 SMs (512 per SM at the rated clock)";

constexpr std::array kProfiles = {
    DeviceProfile{"H200", Arch::sm_90a, 132, 1.98, 4.8e12, 228 * 1024, 65536, 2048, 32, 50 * MiB, 700, 0.6,
                  "NVIDIA H200 Tensor Core GPU datasheet (SXM: 4.8 TB/s HBM3e); SM count, clock and L2 as H100 SXM5",
                  kMmaHopper, kWgmmaHopper},
    DeviceProfile{"H100-SXM", Arch::sm_90a, 132, 1.98, 3.35e12, 228 * 1024, 65536, 2048, 32, 50 * MiB, 700, 0.6,
                  "NVIDIA H100 Tensor Core GPU datasheet and Hopper architecture whitepaper (SXM5: 132 SMs, 3.35 TB/s)",
                  kMmaHopper, kWgmmaHopper},
    DeviceProfile{"H100-PCIe", Arch::sm_90a, 114, 1.755, 2.0e12, 228 * 1024, 65536, 2048, 32, 50 * MiB, 700, 0.6,
                  "NVIDIA H100 datasheet and Hopper whitepaper (PCIe: 114 SMs, 2.0 TB/s HBM2e)",
                  kMmaHopper, kWgmmaHopper},
    DeviceProfile{"B200", Arch::sm_100a, 148, 1.965, 8.0e12, 228 * 1024, 65536, 2048, 32, 126 * MiB, 700, 0.5,
                  "NVIDIA HGX B200 datasheet (8 TB/s HBM3e per GPU); 148 SMs and L2 as reported by Chips and Cheese",
                  kMmaB200},
    DeviceProfile{"RTX-PRO-6000", Arch::sm_120a, 188, 2.617, 1.792e12, 100 * 1024, 65536, 1536, 32, 128 * MiB, 600,
                  0.25,
                  "NVIDIA RTX PRO 6000 Blackwell datasheet (188 SMs, 1792 GB/s GDDR7, 128 MB L2)",
                  kMmaRtxPro6000},
    DeviceProfile{"GB10", Arch::sm_121a, 48, 2.4, 273e9, 100 * 1024, 65536, 1536, 32, 24 * MiB, 600, 0.25,
                  "NVIDIA DGX Spark datasheet (GB10: 6144 CUDA cores = 48 SMs, 273 GB/s LPDDR5x); clock and L2 "
                  "are our estimates (not published)",
                  kMmaGb10},
    DeviceProfile{"A100-SXM4", Arch::sm_80, 108, 1.41, 2.039e12, 164 * 1024, 65536, 2048, 32, 40 * MiB, 700, 0.5,
                  "NVIDIA A100 datasheet (80 GB SXM4: 2039 GB/s) and Ampere architecture whitepaper",
                  kMmaA100},
    DeviceProfile{"A10", Arch::sm_86, 72, 1.695, 600e9, 100 * 1024, 65536, 1536, 16, 6 * MiB, 600, 0.25,
                  "NVIDIA A10 datasheet (72 SMs, 600 GB/s GDDR6)",
                  kMmaA10},
    DeviceProfile{"L40S", Arch::sm_89, 142, 2.52, 864e9, 100 * 1024, 65536, 1536, 24, 96 * MiB, 600, 0.25,
                  "NVIDIA L40S datasheet (142 SMs, 864 GB/s GDDR6, 96 MB L2)",
                  kMmaL40s},
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
