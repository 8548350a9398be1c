#pragma once
// What moejit knows about the GPUs it targets: multiprocessor count, clock, memory bandwidth,
// on-chip limits. The tile heuristic sizes its grid from the SM count (the context's device, or
// for warm-up the devices of a target architecture), and the static performance model
// (bench/perf_model) turns these numbers into the floor a kernel can reach. Every figure comes
// from the vendor's datasheet or architecture guide named in `source`; a figure that is our own
// estimate says so there.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "spec/kernel_spec.hpp"

namespace moejit {

struct DeviceProfile {
  std::string_view name;         // "H200"
  Arch arch;                     // the target moejit builds for it
  std::uint32_t sms;             // streaming multiprocessors
  double clock_ghz;              // boost clock
  double memory_bytes_per_s;     // DRAM bandwidth (datasheet)
  std::uint32_t shared_per_sm;   // bytes of shared memory an SM can give its blocks
  std::uint32_t registers_per_sm;
  std::uint32_t max_threads_per_sm;
  std::uint32_t max_blocks_per_sm;
  std::uint64_t l2_bytes;
  // Our assumption, not a datasheet figure: loaded DRAM latency the model uses in Little's law
  // (an unloaded HBM load takes ~500-600 ns on Hopper; under full load more). Bandwidth times
  // this is the number of bytes that must be in flight to reach the floor.
  double memory_latency_ns;
  // Tensor-core rate: bf16 m16n8k16 mma.sync warp-instructions (f32 accumulate, 2048 MACs each)
  // an SM completes per clock with every scheduler feeding it; e4m3 m16n8k32 and e2m1 m16n8k64
  // take the same time on the chips that run them natively (twice and four times the MACs).
  // Where mma.sync is the chip's fastest path this is the datasheet's dense bf16 peak; on
  // sm_90 and sm_100, where wgmma / tcgen05 are faster, our estimate from public measurements
  // of mma.sync (`mma_source` says which).
  double mma_per_clock;
  std::string_view source;
  std::string_view mma_source;
  // The same on the warpgroup MMA (wgmma, sm_90a), in m16n8k16 equivalents (2048 MACs) per SM
  // per clock, for 16-bit types; fp8 (e4m3) runs twice the MACs at the same rate, as an e4m3
  // m16n8k32 mma.sync counts as one m16n8k16. 0 where the chip has none. The grouped GEMM's sm_90a prefill tiles run on it
  // (kernels/grouped_gemm.hpp, gemm_uses_wgmma).
  double wgmma_per_clock = 0;
};

// Every profile, in a stable order.
std::span<const DeviceProfile> device_profiles();

std::optional<DeviceProfile> device_profile(std::string_view name);

// The profiles of the devices `arch` runs on (an `a` target and its plain form are the same
// hardware); warm-up enumerates the heuristic's choices over all of them.
std::vector<DeviceProfile> device_profiles_for(Arch arch);

// The profile of a device `arch` runs on with `sms` multiprocessors, if there is one (no
// allocation: the planner asks on its dispatch path).
std::optional<DeviceProfile> device_profile_for(Arch arch, std::uint32_t sms);

// The profile the static model and warm-up use for `arch` when no device is named: the first
// one listed for it (H200 for sm_90a, B200 for sm_100a, ...); nullopt for a family moejit has
// no profile of.
std::optional<DeviceProfile> default_device_profile(Arch arch);

// The SM counts of the devices of `arch`, ascending, without repeats. A family with no profile
// gets {kFallbackSms}.
inline constexpr std::uint32_t kFallbackSms = 132;
std::vector<std::uint32_t> sm_counts_for(Arch arch);

}  // namespace moejit
