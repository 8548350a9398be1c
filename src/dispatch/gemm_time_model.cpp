#include "dispatch/gemm_time_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace moejit::dispatch {
namespace {

constexpr double kIssuePerSmPerClock = 4;  // 4 schedulers, one warp-instruction each

}  // namespace

GemmTimeInputs time_inputs_of(const DeviceProfile& device) {
  GemmTimeInputs in;
  in.sms = device.sms;
  in.clock_ghz = device.clock_ghz;
  in.bandwidth = device.memory_bytes_per_s;
  in.latency_ns = device.memory_latency_ns;
  return in;
}

std::string_view to_string(TimeBound b) {
  switch (b) {
    case TimeBound::issue: return "issue";
    case TimeBound::latency: return "latency";
    case TimeBound::fill: return "fill";
    case TimeBound::mma: return "mma";
  }
  return "issue";
}

GemmTimeEstimate estimate_gemm_time(const GemmTimeInputs& in) {
  GemmTimeEstimate e;
  e.seconds = std::numeric_limits<double>::infinity();
  if (in.sms == 0 || in.ctas <= 0 || in.ctas_per_sm == 0 || in.bandwidth <= 0 || in.stage_bytes <= 0) return e;
  const double sms = in.sms;
  const double clock = in.clock_ghz * 1e9;
  const double latency = in.latency_ns * 1e-9;
  const double cta_bytes = std::max(in.stages_per_cta, 1.0) * in.stage_bytes;
  const double in_flight_per_cta = (in.stages > 0 ? in.stages - 1 : 0) * in.stage_bytes;

  e.busy_sms = std::min(sms, in.ctas);
  e.ctas_on_busiest_sm = std::ceil(in.ctas / sms);
  e.resident_ctas = std::min<double>(in.ctas_per_sm, e.ctas_on_busiest_sm);
  e.resident_warps = e.resident_ctas * in.warps_per_cta;
  e.waves = in.ctas / (sms * in.ctas_per_sm);
  e.inflight_bytes_per_sm = e.resident_ctas * in_flight_per_cta;
  e.needed_inflight_bytes = in.bandwidth * latency;
  e.floor_seconds = in.ctas * cta_bytes / in.bandwidth;

  // Bytes per second one SM moves with r CTAs resident, under each limit alone.
  auto issue_rate = [&](double r) {
    return in.bytes_per_warp_instruction * std::min(kIssuePerSmPerClock, r * in.warps_per_cta) * clock;
  };
  auto latency_rate = [&](double r) { return r * in_flight_per_cta / latency; };
  const double fill_rate = in.sm_fill_bytes_per_clock * clock;
  auto fill_rate_of = [&](double) { return fill_rate; };
  // The tensor pipe is the SM's, shared by its resident CTAs: the same rate for any r.
  const double tensor_rate = in.mma_per_cta > 0 && in.mma_per_clock > 0
                                 ? cta_bytes * in.mma_per_clock * clock / in.mma_per_cta
                                 : std::numeric_limits<double>::infinity();
  auto tensor_rate_of = [&](double) { return tensor_rate; };
  auto slowest_rate = [&](double r) { return std::min({issue_rate(r), latency_rate(r), fill_rate, tensor_rate}); };

  // The busiest SM's time: full rounds of ctas_per_sm CTAs, then the rest; `ramp` before each.
  const double full_rounds = std::floor(e.ctas_on_busiest_sm / in.ctas_per_sm);
  const double last_round = e.ctas_on_busiest_sm - full_rounds * in.ctas_per_sm;
  auto busiest_sm_seconds = [&](auto&& rate, double ramp) {
    auto round = [&](double r) {
      const double v = rate(r);
      return v > 0 ? ramp + r * cta_bytes / v : std::numeric_limits<double>::infinity();
    };
    double t = full_rounds > 0 ? full_rounds * round(static_cast<double>(in.ctas_per_sm)) : 0;
    if (last_round > 0) t += round(last_round);
    if (in.first_ramp_hidden && full_rounds + (last_round > 0 ? 1 : 0) > 0) t -= ramp;
    return t;
  };
  e.issue_seconds = busiest_sm_seconds(issue_rate, 0.0);
  e.latency_seconds = busiest_sm_seconds(latency_rate, latency);
  e.fill_seconds = busiest_sm_seconds(fill_rate_of, 0.0);
  e.mma_seconds = busiest_sm_seconds(tensor_rate_of, 0.0);
  const double reduction =
      in.split_k > 1 ? in.split_step_ns * 1e-9 + (in.split_k - 2.0) * in.split_partial_bytes / fill_rate : 0.0;
  e.busiest_seconds = busiest_sm_seconds(slowest_rate, latency) + reduction;
  return with_floor(e, e.floor_seconds);
}

GemmTimeEstimate with_floor(GemmTimeEstimate e, double floor_seconds) {
  if (e.busiest_seconds <= 0) return e;  // nothing runs
  e.floor_seconds = floor_seconds;
  auto bound_of = [&](double seconds) { return seconds > 0 ? std::min(1.0, floor_seconds / seconds) : 1.0; };
  e.issue = bound_of(e.issue_seconds);
  e.latency = bound_of(e.latency_seconds);
  e.fill = bound_of(e.fill_seconds);
  e.mma = bound_of(e.mma_seconds);
  e.fraction = bound_of(e.busiest_seconds);
  e.seconds = std::max(floor_seconds, e.busiest_seconds);

  e.binding = TimeBound::issue;
  double smallest = e.issue;
  if (e.latency < smallest) {
    smallest = e.latency;
    e.binding = TimeBound::latency;
  }
  if (e.fill < smallest) {
    smallest = e.fill;
    e.binding = TimeBound::fill;
  }
  if (e.mma < smallest) e.binding = TimeBound::mma;
  return e;
}

}  // namespace moejit::dispatch
