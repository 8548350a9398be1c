#include "spec/arch.hpp"

#include <array>

namespace moejit {
namespace {

// Shared memory per block (opt-in maximum) from the CUDA C++ Programming Guide's
// compute-capability table: 163 KB on 8.0/8.7, 99 KB on 8.6/8.9/12.x, 227 KB on 9.0/10.x/11.x.
constexpr std::uint32_t kSmem163K = 166912;
constexpr std::uint32_t kSmem99K = 101376;
constexpr std::uint32_t kSmem227K = 232448;
// Per SM (the configurable maximum of the same table); 1 KB of it is reserved per block.
constexpr std::uint32_t kSm164K = 167936, kSm100K = 102400, kSm228K = 233472;

constexpr std::array kArchs = {
    ArchInfo{Arch::sm_80, "sm_80", 80, false, kSmem163K, kSm164K, 2048},
    ArchInfo{Arch::sm_86, "sm_86", 86, false, kSmem99K, kSm100K, 1536},
    ArchInfo{Arch::sm_87, "sm_87", 87, false, kSmem163K, kSm164K, 2048},
    ArchInfo{Arch::sm_89, "sm_89", 89, false, kSmem99K, kSm100K, 1536},
    ArchInfo{Arch::sm_90, "sm_90", 90, false, kSmem227K, kSm228K, 2048},
    ArchInfo{Arch::sm_90a, "sm_90a", 90, true, kSmem227K, kSm228K, 2048},
    ArchInfo{Arch::sm_100, "sm_100", 100, false, kSmem227K, kSm228K, 2048},
    ArchInfo{Arch::sm_100a, "sm_100a", 100, true, kSmem227K, kSm228K, 2048},
    ArchInfo{Arch::sm_103, "sm_103", 103, false, kSmem227K, kSm228K, 2048},
    ArchInfo{Arch::sm_103a, "sm_103a", 103, true, kSmem227K, kSm228K, 2048},
    ArchInfo{Arch::sm_110, "sm_110", 110, false, kSmem227K, kSm228K, 2048},
    ArchInfo{Arch::sm_110a, "sm_110a", 110, true, kSmem227K, kSm228K, 2048},
    ArchInfo{Arch::sm_120, "sm_120", 120, false, kSmem99K, kSm100K, 1536},
    ArchInfo{Arch::sm_120a, "sm_120a", 120, true, kSmem99K, kSm100K, 1536},
    ArchInfo{Arch::sm_121, "sm_121", 121, false, kSmem99K, kSm100K, 1536},
    ArchInfo{Arch::sm_121a, "sm_121a", 121, true, kSmem99K, kSm100K, 1536},
};

using namespace std::string_view_literals;

constexpr std::array kArchNames = [] {
  std::array<std::string_view, kArchs.size() + 1> names{};
  names[0] = "none"sv;
  for (std::size_t i = 0; i < kArchs.size(); ++i) names[i + 1] = kArchs[i].name;
  return names;
}();

constexpr std::array kDefaultTargets = {Arch::sm_80,   Arch::sm_86,   Arch::sm_89,  Arch::sm_90a,
                                        Arch::sm_100a, Arch::sm_120a, Arch::sm_121a};

}  // namespace

const ArchInfo& arch_info(Arch arch) { return kArchs[static_cast<std::size_t>(arch) - 1]; }

std::span<const ArchInfo> all_archs() { return kArchs; }

std::optional<Arch> parse_arch(std::string_view name) {
  for (const auto& a : kArchs)
    if (a.name == name) return a.arch;
  return std::nullopt;
}

std::span<const std::string_view> arch_value_names() { return kArchNames; }

std::span<const Arch> default_target_archs() { return kDefaultTargets; }

bool has_block_scale_mma(Arch arch) {
  if (arch == Arch::none) return false;
  const ArchInfo& info = arch_info(arch);
  return info.arch_specific && (info.sm == 120 || info.sm == 121);
}

bool has_e4m3_mma(Arch arch) {
  if (arch == Arch::none) return false;
  const int sm = arch_info(arch).sm;
  return sm == 89 || sm == 120 || sm == 121;
}

Arch runtime_target(Arch arch) {
  if (arch == Arch::none || arch_info(arch).arch_specific) return arch;
  for (const ArchInfo& a : kArchs)
    if (a.sm == arch_info(arch).sm && a.arch_specific) return a.arch;
  return arch;
}

static_assert([] {
  for (std::size_t i = 0; i < kArchs.size(); ++i)
    if (static_cast<std::size_t>(kArchs[i].arch) != i + 1) return false;
  return true;
}(), "kArchs must be indexed by Arch value - 1");

}  // namespace moejit
