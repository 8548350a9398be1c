#include "bench/perf_model/model.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "dispatch/tile_configs.hpp"
#include "spec/arch.hpp"

namespace moejit::perf {
namespace {

constexpr std::uint32_t kRegisterAllocationUnit = 256;  // registers per warp are allocated in these
constexpr std::uint32_t kSharedReservePerBlock = 1024;  // the system's shared memory per block, sm_80+

constexpr std::string_view kAssumptions[] = {
    "Main loop: the innermost loop (backward branch) holding the most mma instructions, the smallest such range. "
    "Its body is counted as straight-line code, every instruction once (both sides of a branch, loops nested in it "
    "once). If it covers only part of a pipeline stage (mma count = 1/r of a stage's) and its enclosing loop holds "
    "no other mma, the enclosing loop is counted instead, with the inner body r times.",
    "Unroll factor u = main-loop mma / (bm*bn*bk / warps / MACs per mma warp-instruction), the m16n8k16 mma doing "
    "2048 MACs; mma under complementary predicates (@P0 / @!P0, an if-converted branch) count once for u (all of "
    "them issue, so all count as instructions); a u that is not a positive integer is rounded (at least 1) and "
    "reported in 'warning'.",
    "HBM bytes per counted iteration per warp = u * (bn*bk/2 weight + bn*scale_bytes*bk/group scale + "
    "bn*bk/group zero-point (int4_asym)) / warps; per warp-instruction: divided by the counted instructions. "
    "Activations are assumed to come from L2.",
    "The busiest SM runs ceil(CTAs / SMs) CTAs (the block scheduler spreads them evenly), in rounds of at most "
    "CTAs-per-SM resident at once; a round of r CTAs of b HBM bytes each takes r * b / rate(r). Each bound is the "
    "floor time (below) over the busiest SM's time under one rate alone, at most 1.",
    "Issue rate = HBM bytes per warp-instruction * min(4, resident warps) * boost clock: 4 schedulers per SM, one "
    "warp-instruction each per clock, every issue slot spent in the main loop.",
    "Latency rate (Little's law) = r * (stages - 1) * HBM bytes of one stage / loaded latency, and each round "
    "first waits one latency for its first stage.",
    "Fill rate = 40 bytes per clock per SM from L2 (our estimate: the A100 whitepaper's 5120 B/clk of L2 read "
    "bandwidth over 108 SMs is about 47; no figure is published for later chips): SMs without CTAs move nothing, "
    "and an SM with more CTAs than its share takes longer (wave quantization).",
    "Mma rate = a CTA's HBM bytes / its mma warp-instructions (bm*bn*bk/warps/MACs per mma per stage and warp, "
    "times warps and stages; rows without a token are multiplied too) * the profile's mma instructions per SM per "
    "clock * boost clock. That figure is bf16 m16n8k16 mma.sync, f32 accumulate; e4m3 m16n8k32 and e2m1 m16n8k64 "
    "are taken to issue at the same rate where native. On sm_90 and sm_100 it is our estimate from public "
    "measurements (mma.sync is not their fastest tensor-core path); elsewhere the datasheet's dense peak. "
    "Warpgroup mma's (wgmma, sm_90a) count in m16n8k16 equivalents at the profile's wgmma rate: 2048 MACs each for "
    "16-bit types, 4096 for fp8 (its dense rate is twice 16-bit's).",
    "Predicted fraction of the HBM floor = floor time / the busiest SM's time with each round at its smallest "
    "rate (and the latency ramp): at most the smallest bound, which is reported as binding.",
    "CTAs = grid x (ceil(N / bn)) * expected active tiles * split-K, grid and block from the real launch shape; "
    "expected active tiles for uniform random top-k routing over the local experts: each expert's rows "
    "~ Binomial(T, topk / E), E[ceil(rows / bm)] computed exactly.",
    "Occupancy: registers allocated per warp in units of 256 (per-thread count rounded up to 8), 64 K per SM; "
    "shared memory per block = static + dynamic + 1 KB system reserve (sm_80+); threads and blocks per SM from the "
    "device profile.",
    "Floor = expected active experts (E * (1 - (1 - topk/E)^T)) * (N*K/2 + scale + zero-point bytes) / datasheet "
    "DRAM bandwidth: an expert's weights come from DRAM once, and the CTAs of its other row tiles (neighbours in "
    "the grid) find them in L2, though their bytes still count in their SMs' times; predicted time = floor / "
    "predicted fraction = max(floor, the busiest SM's time). Activations, outputs and routing are not in the "
    "floor. (The planner's own estimate charges every CTA's bytes at DRAM bandwidth, the cautious side.)",
    "Device figures (SMs, boost clock, bandwidth, loaded latency, mma rate) are src/spec/device_profiles.cpp's.",
    "Token counts above 64 (decode is T <= 64, DESIGN §10) are flagged prefill: they are mostly bound by the "
    "tensor cores, which the mma rate models; the fraction of the HBM floor is then small by nature, and the "
    "mma share of the main loop (tiles of 64 rows or more) says how close the loop comes to feeding them.",
};

}  // namespace

std::span<const std::string_view> model_assumptions() { return kAssumptions; }

Occupancy occupancy(const KernelResources& k, const DeviceProfile& d) {
  Occupancy o;
  const std::uint32_t warps = std::max<std::uint32_t>(1, (k.threads_per_block + 31) / 32);
  o.registers_per_warp = (k.registers_per_thread * 32 + kRegisterAllocationUnit - 1) / kRegisterAllocationUnit *
                         kRegisterAllocationUnit;
  o.by_registers = o.registers_per_warp == 0 ? d.max_blocks_per_sm : d.registers_per_sm / o.registers_per_warp / warps;
  const bool reserve = arch_info(d.arch).sm >= 80;
  o.shared_per_block = k.shared_bytes_per_block + (reserve ? kSharedReservePerBlock : 0);
  o.by_shared = o.shared_per_block == 0 ? d.max_blocks_per_sm : d.shared_per_sm / o.shared_per_block;
  o.by_threads = d.max_threads_per_sm / (warps * 32);
  o.by_blocks = d.max_blocks_per_sm;
  o.ctas_per_sm = o.by_blocks;
  o.limiter = "blocks";
  const std::pair<std::uint32_t, std::string_view> limits[] = {
      {o.by_registers, "registers"}, {o.by_shared, "shared"}, {o.by_threads, "threads"}};
  for (const auto& [n, name] : limits)
    if (n < o.ctas_per_sm) {
      o.ctas_per_sm = n;
      o.limiter = name;
    }
  return o;
}

double expected_active_tiles(std::uint64_t tokens, std::uint32_t topk, std::uint32_t experts, std::uint32_t bm) {
  if (tokens == 0 || experts == 0 || topk == 0 || bm == 0) return 0;
  return dispatch::expected_row_tiles(static_cast<double>(tokens) * topk, experts, experts, topk,
                                      static_cast<std::uint16_t>(std::min<std::uint32_t>(bm, 65535)));
}

double expected_wgmma_rows(std::uint64_t tokens, std::uint32_t topk, std::uint32_t experts, std::uint32_t bm) {
  if (tokens == 0 || experts == 0 || topk == 0 || bm == 0) return 0;
  return dispatch::expected_wgmma_rows(static_cast<double>(tokens) * topk, experts, experts, topk,
                                       static_cast<std::uint16_t>(std::min<std::uint32_t>(bm, 65535)));
}

double expected_active_experts(std::uint64_t tokens, std::uint32_t topk, std::uint32_t experts) {
  if (experts == 0) return 0;
  const double p = std::min(1.0, static_cast<double>(topk) / experts);
  return experts * (1 - std::pow(1 - p, static_cast<double>(tokens)));
}

StageBytes stage_hbm_bytes(std::uint32_t bn, std::uint32_t bk, const FormatBytes& f) {
  StageBytes b;
  b.weight = static_cast<double>(bn) * bk / 2;
  // Scale rows per stage = bk / group: several rows when the group is shorter than the stage,
  // a share of one row (read from HBM once for group / bk stages) when it is longer.
  const double scale_rows = static_cast<double>(bk) / f.group;
  b.scale = bn * f.scale_bytes * scale_rows;
  b.zero = f.zero_points ? bn * scale_rows : 0;
  return b;
}

StageBytes expert_hbm_bytes(std::uint32_t n, std::uint32_t k, const FormatBytes& f) {
  // One "stage" as wide as the whole matrix.
  return stage_hbm_bytes(n, k, f);
}

}  // namespace moejit::perf
