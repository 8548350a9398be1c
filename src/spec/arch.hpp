#pragma once
// Facts about each target architecture that specs are validated against.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "spec/kernel_spec.hpp"

namespace moejit {

struct ArchInfo {
  Arch arch;
  std::string_view name;                 // "sm_90a"
  int sm;                                // 90
  bool arch_specific;                    // the `a` form
  std::uint32_t max_shared_per_block;    // bytes of shared memory one block may opt in to
  std::uint32_t shared_per_sm;           // bytes of shared memory an SM gives its resident blocks
  std::uint32_t max_threads_per_sm;
};

// Precondition: arch != Arch::none.
const ArchInfo& arch_info(Arch arch);
std::span<const ArchInfo> all_archs();
std::optional<Arch> parse_arch(std::string_view name);

// Names indexed by Arch value: "none", "sm_80", ...
std::span<const std::string_view> arch_value_names();

// The targets moejit builds and tests for: the `a` form where the architecture has one.
std::span<const Arch> default_target_archs();

// The target a GPU of `arch`'s compute capability runs: the `a` form where there is one (a 9.0
// GPU runs sm_90a kernels, never sm_90 ones), else `arch`. Warm-up names are read through it,
// so a store warmed "for sm_90" holds what an H100 looks up.
Arch runtime_target(Arch arch);

// sm_120a and sm_121a (the `a` forms only) have mma.sync with ue8m0 block scales
// (kind::mxf8f6f4 and kind::mxf4): what MXFP4 activations need.
bool has_block_scale_mma(Arch arch);

// Whether mma.sync takes e4m3 operands in one instruction (m16n8k32, twice the MACs of a
// bf16 m16n8k16 in the same tensor-core time): sm_89 and sm_120/121. sm_90, sm_100/103 and
// sm_110 accept the instruction, but ptxas runs it as f16 mma's (the grouped GEMM converts its
// fragments to f16 there itself; templates/gemm/grouped_gemm.cuh, kE4m3ViaF16).
bool has_e4m3_mma(Arch arch);

}  // namespace moejit
