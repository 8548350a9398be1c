#include "bench/gpu/mma_rate_probe.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "codegen/generate.hpp"
#include "kernels/kernel_def.hpp"
#include "common/mma.cuh"
#include "common/numeric.cuh"
#include "spec/spec_fields.hpp"

namespace moejit::bench {
namespace {

constexpr const char* kEntry = "bench/mma_rate.cuh";

// The chains start at distinct values so that no two are the same computation, and the
// iteration count is a run-time value so that the compiler keeps the loop a loop.
constexpr const char* kSource = R"(#pragma once
#include "common/clock.cuh"
#include "common/mma.cuh"
#include "common/platform.cuh"
#include "common/sync.cuh"

namespace mmarate {
struct Params {
  const moejit::u32* fragments;
  float* accumulators;
  moejit::u64* cycles;
  moejit::u32* sms;
  moejit::u32 iterations;
};
}  // namespace mmarate

namespace moejit::kernels {

template <class Spec>
MOEJIT_GLOBAL void mma_rate(mmarate::Params p) {
  using namespace moejit::prim;
  constexpr u32 kChains = Spec::kChains;
  const u32 thread = thread_x(), lane = thread % 32;
  const u32* f = p.fragments + lane * 6;
  const u32 a[4] = {f[0], f[1], f[2], f[3]};
  const u32 b[2] = {f[4], f[5]};
  float acc[kChains][4];
  MOEJIT_UNROLL
  for (u32 c = 0; c < kChains; ++c)
    for (u32 i = 0; i < 4; ++i) acc[c][i] = static_cast<float>(c);
  block_sync();
  const u64 start = sm_cycles();
  for (u32 it = 0; it < p.iterations; ++it) {
    MOEJIT_UNROLL
    for (u32 c = 0; c < kChains; ++c) {
      if constexpr (Spec::kE4m3) mma_m16n8k32_e4m3(acc[c], a, b, acc[c]);
      else mma_m16n8k16_bf16(acc[c], a, b, acc[c]);
    }
  }
  const u64 end = sm_cycles();
  const u32 global_thread = block_x() * block_threads() + thread;
  float* out = p.accumulators + global_thread * kChains * 4;
  MOEJIT_UNROLL
  for (u32 c = 0; c < kChains; ++c)
    for (u32 i = 0; i < 4; ++i) out[c * 4 + i] = acc[c][i];
  if (lane == 0) {
    p.cycles[global_thread / 32 * 2] = start;
    p.cycles[global_thread / 32 * 2 + 1] = end;
  }
  if (thread == 0) p.sms[block_x()] = sm_id();
}

}  // namespace moejit::kernels
)";

const KernelDef kDef{
    .entry = kEntry,
    .kernel = "moejit::kernels::mma_rate",
    .params_type = "mmarate::Params",
    .validate_fields = [](const KernelSpec&) { return Status{}; },
    .check =
        [](const KernelSpec& s) -> Status {
      if (s.act != DType::bf16 && s.act != DType::e4m3)
        return error(Code::invalid_argument, "field 'act' = {}: the mma rate probe takes bf16 or e4m3",
                     to_string(s.act));
      if (s.warps < 1 || s.warps > 32)
        return error(Code::invalid_argument, "field 'warps' = {}: expected 1..32", s.warps);
      return Status{};
    },
    .constants =
        [](const KernelSpec& s) {
          return std::vector<SpecConstant>{{"unsigned", "kChains", std::to_string(kMmaRateChains)},
                                           {"bool", "kE4m3", s.act == DType::e4m3 ? "true" : "false"}};
        },
    .block_threads = [](const KernelSpec& s) { return 32u * s.warps; },
    .dynamic_shared_bytes = [](const KernelSpec&) { return 0u; },
};

}  // namespace

codegen::TemplateSet mma_rate_templates() {
  std::map<std::string, std::string> files;
  for (const auto& [path, text] : codegen::TemplateSet::embedded()->files()) files.emplace(path, text);
  files[kEntry] = kSource;
  return codegen::TemplateSet(std::move(files));
}

KernelSpec mma_rate_spec(Arch arch, Backend backend, DType input, std::uint16_t warps) {
  KernelSpec s;
  s.act = input;
  s.warps = warps;
  s.arch = arch;
  s.backend = backend;
  return s;
}

Result<ResolvedKernel> build_mma_rate_kernel(const KernelCompiler& compiler, const KernelSpec& spec,
                                             const codegen::TemplateSet& templates) {
  MOEJIT_ASSIGN_OR_RETURN(auto generated, codegen::generate_from_def(spec, kDef, templates));
  MOEJIT_ASSIGN_OR_RETURN(CompiledKernel compiled, compiler.compile(generated, templates, spec));
  ResolvedKernel k;
  k.spec = spec;
  k.key = xxh3_128(generated.source);
  k.meta.kind = spec.backend == Backend::host ? store::PayloadKind::host_shared_object : store::PayloadKind::cubin;
  k.meta.kernel_name = compiled.lowered_name;
  k.meta.registers = compiled.report.registers;
  k.meta.spill_store_bytes = compiled.report.spill_store_bytes;
  k.meta.spill_load_bytes = compiled.report.spill_load_bytes;
  k.meta.block_threads = generated.block_threads;
  k.binary = std::move(compiled.binary);
  return k;
}

std::vector<std::uint32_t> make_mma_rate_fragments(DType input, std::mt19937_64& rng) {
  const bool e4m3 = input == DType::e4m3;
  std::uniform_int_distribution<int> value(e4m3 ? -3 : -4, e4m3 ? 3 : 4);
  std::vector<std::uint32_t> words(32 * 6);
  for (std::uint32_t& w : words) {
    if (e4m3) {
      w = 0;
      for (int byte = 0; byte < 4; ++byte)
        w |= static_cast<std::uint32_t>(prim::twin::f32_to_e4m3(static_cast<float>(value(rng)))) << (8 * byte);
    } else {
      w = static_cast<std::uint32_t>(prim::twin::f32_to_bf16(static_cast<float>(value(rng)))) |
          static_cast<std::uint32_t>(prim::twin::f32_to_bf16(static_cast<float>(value(rng)))) << 16;
    }
  }
  return words;
}

std::vector<float> expected_mma_rate_accumulators(DType input, const std::vector<std::uint32_t>& fragments,
                                                  std::uint32_t iterations) {
  const auto in = input == DType::e4m3 ? prim::twin::MmaInput::e4m3 : prim::twin::MmaInput::bf16;
  prim::twin::MmaLane lanes[32];
  for (std::uint32_t l = 0; l < 32; ++l) {
    for (std::uint32_t r = 0; r < 4; ++r) lanes[l].a[r] = fragments[l * 6 + r];
    for (std::uint32_t r = 0; r < 2; ++r) lanes[l].b[r] = fragments[l * 6 + 4 + r];
    for (float& c : lanes[l].c) c = 0;
  }
  std::vector<float> expected(32 * kMmaRateChains * 4);
  for (std::uint32_t l = 0; l < 32; ++l) {
    float product[4];
    prim::twin::mma_m16n8_lane(in, lanes, l, product);
    for (std::uint32_t c = 0; c < kMmaRateChains; ++c)
      for (std::uint32_t i = 0; i < 4; ++i)
        expected[(l * kMmaRateChains + c) * 4 + i] =
            static_cast<float>(c) + static_cast<float>(iterations) * product[i];
  }
  return expected;
}

Result<MmaRateReading> read_mma_rate(const std::vector<std::uint64_t>& cycles, const std::vector<std::uint32_t>& sms,
                                     std::uint32_t warps_per_block, std::uint32_t iterations) {
  if (warps_per_block == 0 || cycles.size() != 2ull * warps_per_block * sms.size())
    return error(Code::invalid_argument, "mma rate readings: {} cycle values for {} blocks of {} warps (expected {})",
                 cycles.size(), sms.size(), warps_per_block, 2ull * warps_per_block * sms.size());
  struct Window {
    std::uint64_t start = ~0ull, end = 0;
    std::uint32_t blocks = 0;
  };
  std::map<std::uint32_t, Window> by_sm;
  for (std::size_t b = 0; b < sms.size(); ++b) {
    Window& w = by_sm[sms[b]];
    ++w.blocks;
    for (std::size_t warp = b * warps_per_block; warp < (b + 1) * warps_per_block; ++warp) {
      const std::uint64_t start = cycles[2 * warp], end = cycles[2 * warp + 1];
      if (end <= start)
        return error(Code::internal, "mma rate readings: warp {} of block {} ends at cycle {}, not after its start {}",
                     warp - b * warps_per_block, b, end, start);
      w.start = std::min(w.start, start);
      w.end = std::max(w.end, end);
    }
  }
  struct Rate {
    double rate, cycles;
  };
  std::vector<Rate> rates;
  MmaRateReading r;
  for (const auto& [sm, w] : by_sm) {
    const double mma = static_cast<double>(w.blocks) * warps_per_block * iterations * kMmaRateChains;
    const double window = static_cast<double>(w.end - w.start);
    rates.push_back({mma / window, window});
    r.blocks_per_sm_max = std::max(r.blocks_per_sm_max, w.blocks);
  }
  if (rates.empty()) return error(Code::invalid_argument, "mma rate readings: no blocks");
  std::sort(rates.begin(), rates.end(), [](const Rate& a, const Rate& b) { return a.rate < b.rate; });
  r.sms = static_cast<std::uint32_t>(rates.size());
  r.lowest = rates.front().rate;
  r.highest = rates.back().rate;
  r.median = rates[rates.size() / 2].rate;
  r.median_cycles = rates[rates.size() / 2].cycles;
  return r;
}

}  // namespace moejit::bench
