#pragma once
// The tensor-core rate probe's kernel: every warp of a block runs `iterations` rounds of
// kMmaRateChains independent mma.sync chains (bf16 m16n8k16, or e4m3 m16n8k32 where the target
// has it natively) from register fragments, between two readings of the SM's cycle counter.
// One block per SM, so (mma's issued by the SM's blocks) / (cycles from the first start to the
// last end on that SM) is the rate DeviceProfile::mma_per_clock stands for. The accumulators
// come back so the run is checked: every chain ends at its start value plus `iterations` times
// the product of the fixed fragments, exact in f32 for the values make_mma_rate_fragments picks.
// The fragments' loads may still be in flight at the first reading: about a microsecond against a
// window of 0.2 ms and more at the default 8192 iterations.
//
// The kernel is not an op of the library: its template text lives here and compiles through
// codegen's generate_from_def, as the library's kernels do. bench/gpu/mma_rate.cpp runs it;
// bench/gpu/tests/test_mma_rate.cpp checks it on the host backend and in SASS, and the
// arithmetic below on hand-made readings.

#include <cstdint>
#include <random>
#include <vector>

#include "codegen/template_set.hpp"
#include "compile/compiler.hpp"
#include "runtime/resolved_kernel.hpp"
#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit::bench {

// Independent accumulator chains per warp: enough to cover the mma latency with one warp per
// scheduler (a chain's next mma waits for its previous result).
inline constexpr std::uint32_t kMmaRateChains = 8;

// The kernel's single argument; the template declares the same layout (mmarate::Params).
struct MmaRateParams {
  const std::uint32_t* fragments = nullptr;  // 32 lanes x 6 words: A (4 registers) then B (2)
  float* accumulators = nullptr;             // per thread of the grid: kMmaRateChains x 4
  std::uint64_t* cycles = nullptr;           // per warp of the grid: start, end
  std::uint32_t* sms = nullptr;              // per block: the SM it started on
  std::uint32_t iterations = 0;
};

// The template set with the probe's file added to the embedded templates.
codegen::TemplateSet mma_rate_templates();

// The spec the probe is compiled under for `arch` / `backend`: only act (the mma's input, bf16
// or e4m3), warps (per block), arch and backend matter. e4m3 needs has_e4m3_mma(arch).
KernelSpec mma_rate_spec(Arch arch, Backend backend, DType input, std::uint16_t warps);

// The probe compiled by `compiler` (NVRTC for the device backend, the host compiler for the
// host one) for `spec`, ready for either backend's launch.
Result<ResolvedKernel> build_mma_rate_kernel(const KernelCompiler& compiler, const KernelSpec& spec,
                                             const codegen::TemplateSet& templates);

// Fragments for 32 lanes (6 words each) holding random small integers (bf16: -4..4; e4m3:
// -3..3), so that every product sum is an integer far below 2^24 and exact in f32.
std::vector<std::uint32_t> make_mma_rate_fragments(DType input, std::mt19937_64& rng);

// What accumulator `element` (0..3) of chain `chain` in lane `lane` holds after `iterations`
// rounds: the chain's start value (the chain's index) plus iterations times D[row][col] of
// the fragments' product, positions as the PTX ISA lays out m16n8 C/D fragments.
std::vector<float> expected_mma_rate_accumulators(DType input, const std::vector<std::uint32_t>& fragments,
                                                  std::uint32_t iterations);

// What one launch's readings say: per SM that ran blocks, the mma's its blocks issued over the
// cycles from the earliest start to the latest end among their warps.
struct MmaRateReading {
  std::uint32_t sms = 0;           // SMs that ran at least one block
  std::uint32_t blocks_per_sm_max = 0;
  double median = 0;               // mma per SM per clock: median, lowest and highest SM
  double lowest = 0, highest = 0;
  double median_cycles = 0;        // cycles of the median SM's window
};

// `cycles`: start and end per warp (warps_per_block per block, blocks in order); `sms`: the SM of
// each block. An error when a warp's end precedes its start or the sizes disagree.
Result<MmaRateReading> read_mma_rate(const std::vector<std::uint64_t>& cycles, const std::vector<std::uint32_t>& sms,
                                     std::uint32_t warps_per_block, std::uint32_t iterations);

}  // namespace moejit::bench
