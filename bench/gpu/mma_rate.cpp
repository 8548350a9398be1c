// The tensor cores' mma.sync rate on this GPU, in warp-instructions per SM per clock: the number
// the time model takes from DeviceProfile::mma_per_clock, which for sm_90 and sm_100 is our
// estimate. One block per SM runs independent mma chains (bench/gpu/mma_rate_probe.hpp) for
// 1, 2 and 4 warps per scheduler; the best of them is the SM's rate. The accumulators of every
// launch are checked exactly, and the launch is also timed, which gives the SM clock the
// kernel ran at (cycles / time). Prints one JSON document (--out: to a file). Exit status: 0
// measured, 1 a failure (a wrong accumulator, a compile or launch error), 2 no usable GPU.
//
//   build/bench/gpu/mma_rate --out mma_rate.json

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench/gpu/gpu_timer.hpp"
#include "bench/gpu/mma_rate_probe.hpp"
#include "bench/utc_now.hpp"
#include "compile/nvrtc_compiler.hpp"
#include "moejit_build_commit.h"  // MOEJIT_BUILD_COMMIT
#include "runtime/device_buffer.hpp"
#include "runtime/device_launcher.hpp"
#include "spec/arch.hpp"
#include "spec/device_profiles.hpp"
#include "spec/spec_fields.hpp"
#include "support/status.hpp"

using namespace moejit;
using namespace moejit::bench;
using Json = nlohmann::ordered_json;

namespace {

constexpr int kExitFailed = 1;
constexpr int kExitNoGpu = 2;

struct Settings {
  std::string out;
  int device = 0;
  std::uint32_t iterations = 8192;
  std::vector<std::uint16_t> warps{4, 8, 16};
  int samples = 5;
};

void write(const Settings& s, const Json& j) {
  if (s.out.empty()) {
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::ofstream f(s.out, std::ios::trunc);
  f << j.dump(2) << "\n";
}

Json error_json(const Status& st) { return {{"code", code_name(st.code())}, {"message", st.message()}}; }

// One (input, warps) configuration: compiled, launched `samples` times with every accumulator
// checked, read, and timed.
Result<Json> measure(DeviceLauncher& l, const NvrtcCompiler& nvrtc, const codegen::TemplateSet& set, CUstream stream,
                     DType input, std::uint16_t warps, const Settings& s, std::mt19937_64& rng) {
  const KernelSpec spec = mma_rate_spec(l.arch(), Backend::device, input, warps);
  MOEJIT_ASSIGN_OR_RETURN(const ResolvedKernel kernel, build_mma_rate_kernel(nvrtc, spec, set));

  const std::uint32_t blocks = l.sm_count(), threads = 32u * warps;
  const std::vector<std::uint32_t> fragments = make_mma_rate_fragments(input, rng);
  const std::vector<float> expected = expected_mma_rate_accumulators(input, fragments, s.iterations);
  const std::size_t accumulator_count = std::size_t{blocks} * threads * kMmaRateChains * 4;
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_fragments, DeviceBuffer::allocate(l, fragments.size() * 4));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_acc, DeviceBuffer::allocate(l, accumulator_count * 4));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_cycles, DeviceBuffer::allocate(l, std::size_t{blocks} * warps * 2 * 8));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_sms, DeviceBuffer::allocate(l, std::size_t{blocks} * 4));
  MOEJIT_TRY(l.copy_to_backend(d_fragments.data(), fragments.data(), fragments.size() * 4, stream));

  MmaRateParams p;
  p.fragments = d_fragments.as<const std::uint32_t>();
  p.accumulators = d_acc.as<float>();
  p.cycles = d_cycles.as<std::uint64_t>();
  p.sms = d_sms.as<std::uint32_t>();
  p.iterations = s.iterations;
  LaunchDims dims;
  dims.grid[0] = blocks;
  dims.block[0] = threads;
  MOEJIT_TRY(l.prepare(kernel));

  std::vector<float> acc(accumulator_count);
  std::vector<std::uint64_t> cycles(std::size_t{blocks} * warps * 2);
  std::vector<std::uint32_t> sms(blocks);
  std::vector<MmaRateReading> readings;
  for (int sample = 0; sample <= s.samples; ++sample) {  // sample 0 warms up
    MOEJIT_TRY(l.fill(d_acc.data(), 0xff, accumulator_count * 4, stream));  // NaN: a lane that writes nothing fails
    MOEJIT_TRY(l.launch(kernel, dims, &p, sizeof p, stream));
    MOEJIT_TRY(l.copy_from_backend(acc.data(), d_acc.data(), accumulator_count * 4, stream));
    MOEJIT_TRY(l.copy_from_backend(cycles.data(), d_cycles.data(), cycles.size() * 8, stream));
    MOEJIT_TRY(l.copy_from_backend(sms.data(), d_sms.data(), sms.size() * 4, stream));
    MOEJIT_TRY(l.synchronize(stream));
    for (std::size_t t = 0; t < std::size_t{blocks} * threads; ++t) {
      const std::size_t lane = t % 32;
      for (std::size_t i = 0; i < kMmaRateChains * 4; ++i) {
        const float got = acc[t * kMmaRateChains * 4 + i], want = expected[lane * kMmaRateChains * 4 + i];
        if (!(got == want))
          return error(Code::internal, "thread {} accumulator {} is {}, expected {} (launch {})", t, i, got, want,
                       sample);
      }
    }
    MOEJIT_ASSIGN_OR_RETURN(MmaRateReading r, read_mma_rate(cycles, sms, warps, s.iterations));
    if (sample > 0) readings.push_back(r);
  }
  std::sort(readings.begin(), readings.end(),
            [](const MmaRateReading& a, const MmaRateReading& b) { return a.median < b.median; });
  const MmaRateReading& mid = readings[readings.size() / 2];

  // The same launch timed (graph replay, median): the SM clock it ran at is cycles / time.
  TimingOptions options;
  options.samples = s.samples;
  options.target_sample_ms = 5;
  MOEJIT_ASSIGN_OR_RETURN(Timing t, time_launches(
                                        l.driver(), stream,
                                        [&](std::uint64_t) { return l.launch(kernel, dims, &p, sizeof p, stream); },
                                        options));
  Json j;
  j["input"] = to_string(input);
  j["macs_per_mma"] = input == DType::e4m3 ? 4096 : 2048;
  j["warps_per_block"] = warps;
  j["registers"] = kernel.meta.registers;
  j["spill_bytes"] = kernel.meta.spill_store_bytes + kernel.meta.spill_load_bytes;
  j["samples"] = readings.size();
  j["mma_per_sm_per_clock"] = mid.median;
  j["lowest_sm"] = mid.lowest;
  j["highest_sm"] = mid.highest;
  j["sms"] = mid.sms;
  j["blocks_per_sm_max"] = mid.blocks_per_sm_max;
  j["cycles"] = mid.median_cycles;
  j["launch_median_us"] = t.median_us;
  j["timing"] = t.mode;
  j["sm_clock_ghz"] = t.median_us > 0 ? mid.median_cycles / (t.median_us * 1e3) : 0.0;
  j["accumulators_checked"] = static_cast<std::uint64_t>(readings.size() + 1) * accumulator_count;
  std::fprintf(stderr, "mma_rate: %s %2u warps/SM: %.3f mma/SM/clk (SMs %.3f..%.3f), %.0f cycles in %.1f us\n",
               std::string(to_string(input)).c_str(), warps, mid.median, mid.lowest, mid.highest, mid.median_cycles,
               t.median_us);
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  CLI::App app{"the tensor cores' mma.sync rate per SM per clock on this GPU, against the time model's figure"};
  app.add_option("--out", s.out, "write the JSON here instead of stdout");
  app.add_option("--device", s.device, "CUDA device ordinal")->check(CLI::NonNegativeNumber);
  app.add_option("--iterations", s.iterations, "rounds of the mma chains per warp")->check(CLI::Range(16, 16384));
  app.add_option("--warps", s.warps, "warps per block (one block per SM) to try")->check(CLI::Range(1, 32));
  app.add_option("--samples", s.samples, "checked launches per configuration (median reported)")
      ->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);

  Json j;
  j["benchmark"] = "mma_rate";
  j["date"] = utc_now();
  j["build_commit"] = MOEJIT_BUILD_COMMIT;
  j["chains_per_warp"] = kMmaRateChains;
  j["iterations"] = s.iterations;

  auto created = DeviceLauncher::create(s.device);
  if (!created.ok()) {
    j["error"] = error_json(created.status());
    write(s, j);
    std::fprintf(stderr, "mma_rate: no GPU: %s\n", created.status().message().c_str());
    const Code c = created.status().code();
    return c == Code::unavailable || c == Code::unsupported ? kExitNoGpu : kExitFailed;
  }
  DeviceLauncher& l = **created;
  const DeviceInfo& info = l.info();
  j["gpu"] = {{"name", info.name},
              {"compute_capability", std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor)},
              {"arch", to_string(info.arch)},
              {"sms", info.multiprocessors},
              {"driver_version", info.driver_version}};
  const auto profile = device_profile_for(info.arch, l.sm_count());
  j["profile"] = profile ? Json{{"name", profile->name},
                                {"mma_per_clock", profile->mma_per_clock},
                                {"clock_ghz", profile->clock_ghz},
                                {"mma_source", profile->mma_source}}
                         : Json(nullptr);

  // The primary context, current for the whole run; popped before the launcher goes.
  auto context = PrimaryContextScope::enter(l);
  if (!context.ok()) {
    j["error"] = error_json(context.status());
    write(s, j);
    return kExitNoGpu;
  }

  int failed = 0;
  {
    auto stream = Stream::create(l.driver());
    auto nvrtc = NvrtcCompiler::create({});
    if (!stream.ok() || !nvrtc.ok()) {
      j["error"] = error_json(stream.ok() ? nvrtc.status() : stream.status());
      write(s, j);
      return kExitFailed;
    }
    const codegen::TemplateSet set = mma_rate_templates();
    std::mt19937_64 rng(std::random_device{}());
    std::vector<DType> inputs{DType::bf16};
    if (has_e4m3_mma(info.arch)) inputs.push_back(DType::e4m3);
    j["runs"] = Json::array();
    Json best = Json::object();
    for (DType input : inputs)
      for (std::uint16_t warps : s.warps) {
        auto r = measure(l, **nvrtc, set, stream->get(), input, warps, s, rng);
        if (!r.ok()) {
          ++failed;
          std::fprintf(stderr, "mma_rate: %s %u warps: %s\n", std::string(to_string(input)).c_str(), warps,
                       r.status().message().c_str());
          j["runs"].push_back({{"input", to_string(input)}, {"warps_per_block", warps}, {"error", error_json(r.status())}});
          continue;
        }
        const std::string name(to_string(input));
        const double rate = (*r)["mma_per_sm_per_clock"].get<double>();
        if (!best.contains(name) || rate > best[name].get<double>()) best[name] = rate;
        j["runs"].push_back(*r);
        write(s, j);
      }
    j["best_mma_per_sm_per_clock"] = best;
    if (profile && best.contains("bf16"))
      j["bf16_measured_over_profile"] = best["bf16"].get<double>() / profile->mma_per_clock;
  }
  write(s, j);
  return failed ? kExitFailed : 0;
}
