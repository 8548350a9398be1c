#pragma once
// How long a weight-streaming grouped GEMM takes against its memory floor (DESIGN §10): the one
// time model that the tile planner (tile_configs.cpp) chooses by and that the static
// performance model (bench/perf_model) evaluates on the compiled kernels. It is an estimate: it
// knows the device from its profile and the kernel from a few figures, and it says which limit
// binds.
//
// The busiest SM runs ceil(CTAs / SMs) CTAs (the block scheduler spreads them evenly), in
// rounds of at most CTAs-per-SM at once; a round of r CTAs of b bytes each takes r * b / rate(r):
//   issue:   bytes per warp-instruction * min(4, resident warps) * clock  (4 schedulers per SM)
//   latency: r * (stages - 1) * stage bytes / latency (Little's law); each round first waits
//            one latency for its first stage
//   fill:    what L2 delivers to one SM (sm_fill_bytes_per_clock * clock); SMs without CTAs
//            move nothing
//   mma:     the SM's tensor cores: a CTA's bytes per its mma instructions, times the mma
//            instructions the SM completes per clock (every row of a tile is multiplied, those
//            without a token too, so padded rows cost here and nowhere else)
// Each bound is the floor time (all CTAs' bytes at DRAM bandwidth) over the busiest SM's time
// under that rate alone, at most 1; the fraction takes each round at its smallest rate, with the
// latency ramp (not for the first round when the kernel ahead hides it), so it is at most the
// smallest bound. A split K adds its reduction once, after the last split: one step
// (kSplitStepNs), and the partial tiles of the splits past the second streamed from L2 into the
// one SM that sums them, at the fill rate.

#include <cstdint>
#include <string_view>

#include "spec/device_profiles.hpp"

namespace moejit::dispatch {

// Bytes per clock L2 can hand one SM when every SM streams: our assumption, the aggregate L2 read
// bandwidth of the A100 whitepaper (5120 B/clk over 108 SMs, about 47), taken lower for margin;
// no per-SM figure is published for Hopper or Blackwell. A run on a GPU (bench/gpu) calibrates it.
inline constexpr double kSmFillBytesPerClock = 40;

// The split-K reduction's fixed cost: the last split's partial tile stored and fenced, the
// tile's counter incremented, and one other split's partial tile read back from L2. Our estimate
// (a few L2 round trips); unmeasured.
inline constexpr double kSplitStepNs = 1000;

struct GemmTimeInputs {
  // The device.
  std::uint32_t sms = 0;
  double clock_ghz = 0;
  double bandwidth = 0;   // DRAM bytes per second
  double latency_ns = 0;  // loaded DRAM latency
  double sm_fill_bytes_per_clock = kSmFillBytesPerClock;
  // The kernel.
  double bytes_per_warp_instruction = 0;  // HBM bytes (weights, scales, zeros) per main-loop warp-instruction
  double stage_bytes = 0;                 // HBM bytes of one stage of one CTA
  std::uint32_t stages = 0;               // pipeline depth: stages - 1 are in flight while one computes
  double stages_per_cta = 0;              // k stages one CTA streams (K / bk / split-K)
  std::uint32_t warps_per_cta = 0;
  std::uint32_t ctas_per_sm = 0;
  double ctas = 0;  // CTAs with work (may be an expectation)
  std::uint32_t split_k = 1;         // split-K: the last split to finish sums the partial tiles
  double split_partial_bytes = 0;    // one split's f32 partial tile (bm x bn x 4; rows without tokens skip it)
  // Tensor-core work: warp-level mma instructions one CTA issues (its whole k range), and how
  // many of them an SM completes per clock (DeviceProfile::mma_per_clock for the kernel's mma
  // kind). Either 0: no mma bound.
  double mma_per_cta = 0;
  double mma_per_clock = 0;
  // The first round's weights are requested before the kernel ahead finishes (programmatic
  // dependent launch, GroupedGemmParams::weights_before_dependency): its latency ramp is hidden.
  bool first_ramp_hidden = false;
  double split_step_ns = kSplitStepNs;
};

// The device fields of the inputs, from a profile; the kernel's are left for the caller.
GemmTimeInputs time_inputs_of(const DeviceProfile& device);

enum class TimeBound : char { issue = 'I', latency = 'L', fill = 'F', mma = 'M' };
std::string_view to_string(TimeBound b);

struct GemmTimeEstimate {
  double issue = 0, latency = 0, fill = 0, mma = 1;
  double fraction = 0;                 // of the floor, the four limits together; 0: nothing runs
  TimeBound binding = TimeBound::issue;  // the smallest bound
  double floor_seconds = 0;            // all CTAs' bytes at DRAM bandwidth
  double seconds = 0;                  // floor / fraction (infinite when nothing fits)
  // The busiest SM's time under each rate alone, and under all of them with the ramps and the
  // split-K reduction: the bounds and the fraction are the floor over these (0: nothing runs).
  double issue_seconds = 0, latency_seconds = 0, fill_seconds = 0, mma_seconds = 0, busiest_seconds = 0;
  // What they were computed from.
  double busy_sms = 0;            // SMs with at least one CTA
  double ctas_on_busiest_sm = 0;  // ceil(CTAs / SMs)
  double resident_ctas = 0;       // CTAs at once on the busiest SM
  double resident_warps = 0;
  double inflight_bytes_per_sm = 0;
  double needed_inflight_bytes = 0;  // bandwidth x latency, across the device
  double waves = 0;                  // CTAs / (SMs x CTAs per SM)
};

GemmTimeEstimate estimate_gemm_time(const GemmTimeInputs& in);

// `e` against another floor of `floor_seconds` (the static model's: each active expert's bytes
// once, where estimate_gemm_time's floor counts every CTA's, an expert's second row tile too):
// the bounds, fraction, binding bound and seconds again, from the same busiest-SM times.
GemmTimeEstimate with_floor(GemmTimeEstimate e, double floor_seconds);

}  // namespace moejit::dispatch
