// bench_gemm: moejit's grouped GEMM on the GPU (device backend, weights packed by src/quant) at
// the MoE layer shapes of four models, decode and prefill token counts, MXFP4 and INT4 g128
// weights, bf16 activations (and f16 ones; W4A8: e4m3 ones with scales per token or per 128 k; W4A4 on
// sm_120a / sm_121a: MXFP4 ones; each beside the same case with bf16), random top-k routing;
// each case against its memory floor (the
// bytes that must move at the device's measured copy bandwidth). Prints or writes one JSON
// object; bench/gpu/README.md documents its fields.
//
// Exit status: 0 all cases ran; 1 some case failed (its error is in the JSON) or bad arguments;
// 2 no usable GPU (the message says what is missing). --dry-run needs no GPU.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <utility>

#include "bench/gpu/baselines.hpp"
#include "bench/gpu/device_data.hpp"
#include "bench/gpu/gemm_cases.hpp"
#include "bench/gpu/gpu_timer.hpp"
#include "bench/gpu/host_overhead.hpp"
#include "bench/gpu/layer_cases.hpp"
#include "bench/gpu/result_json.hpp"
#include "bench/gpu/routing.hpp"
#include "bench/gpu/weight_set.hpp"
#include "bench/utc_now.hpp"
#include "codegen/generate.hpp"
#include "common/numeric.cuh"
#include "compile/nvrtc_library.hpp"
#include "kernels/grouped_gemm.hpp"
#include "dispatch/fused_moe_op.hpp"
#include "dispatch/grouped_gemm_op.hpp"
#include "dispatch/tile_configs.hpp"
#include "moe/align_params.cuh"
#include "quant/pack.hpp"
#include "reference/quantize.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/kernel_resolver.hpp"
#include "spec/arch.hpp"
#include "spec/device_profiles.hpp"
#include "spec/spec_fields.hpp"

#include "moejit_build_commit.h"  // MOEJIT_BUILD_COMMIT, stamped each build

namespace {

using namespace moejit;
using namespace moejit::bench;
using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

constexpr int kExitCaseFailed = 1;
constexpr int kExitNoGpu = 2;

struct Settings {
  bool quick = false;
  int device = 0;
  std::string out;
  std::string commit;
  std::string arch = "sm_90a";  // for --dry-run's tile choice
  double max_seconds = 270;
  int samples = 9;
  double target_sample_ms = 2.0;
  int routings = 8;
  std::uint64_t rotate_bytes = std::uint64_t{1} << 30;
  std::uint64_t copy_bytes = std::uint64_t{1} << 30;
  int copy_samples = 15;
  bool baselines = true;                // the CUTLASS baselines and the dense bf16 GEMM rate
  bool layers = true;                   // the whole-layer cases (moejit_fused_moe)
  bool split_sweep = true;              // T = 1 cases timed at every split-K, beside the planner's
  std::uint32_t gemm_rate_size = 8192;  // m = n = k of the dense GEMM that sets the FLOP ceiling
  std::vector<std::string> models, formats;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string cuda_version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

// Writes `j` to `path` through a temporary file, so a reader (or a timeout) never sees half.
void write_json(const std::string& path, const Json& j) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << "\n";
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::fprintf(stderr, "bench_gemm: cannot write %s: %s\n", path.c_str(), ec.message().c_str());
}

bool selected(const std::vector<std::string>& filter, std::string_view name) {
  return filter.empty() || std::find(filter.begin(), filter.end(), name) != filter.end();
}

// The cases selected that `arch` can run (the others are listed in "not_applicable").
std::vector<GemmCase> selected_cases(const Settings& s, Arch arch) {
  std::vector<GemmCase> out;
  for (const GemmCase& c : enumerate_cases(s.quick))
    if (selected(s.models, c.model->name) && selected(s.formats, c.format->name) &&
        unsupported_on(*c.format, arch).empty())
      out.push_back(c);
  return out;
}

std::vector<LayerCase> selected_layer_cases(const Settings& s, Arch arch) {
  std::vector<LayerCase> out;
  for (const LayerCase& c : enumerate_layer_cases(s.quick))
    if (selected(s.models, c.model->name) && selected(s.formats, c.format->name) &&
        unsupported_on(*c.format, arch).empty())
      out.push_back(c);
  return out;
}

// The align block size (tile rows) the fused layer chooses for the case's model and T: the
// library's own choice (dispatch::fused_moe_specs), which weighs the tile that covers the rows
// per busy expert against one half as tall.
std::uint16_t layer_block_rows(const GemmCase& c, Arch arch, std::uint32_t sms) {
  const PackedOrder order = quant::packed_order_for(c.format->act, c.format->weight);
  const MoeModel& m = *c.model;
  dispatch::FusedMoeRequest r;
  r.w13 = {c.format->weight, c.format->group, c.format->scale, m.experts, 2 * m.intermediate, m.hidden, true,
           nullptr, nullptr, nullptr, nullptr, order};
  r.w2 = {c.format->weight, c.format->group, c.format->scale, m.experts, m.hidden, m.intermediate, false,
          nullptr, nullptr, nullptr, nullptr, order};
  r.act = c.format->act;
  r.act_scale = case_act_scale(*c.format);
  r.out = out_dtype(*c.format);
  r.activation = m.activation;
  r.tokens = static_cast<std::int32_t>(c.tokens);
  r.topk = m.topk;
  r.global_experts = m.experts;
  Result<dispatch::FusedMoeSpecs> specs = dispatch::fused_moe_specs(r, arch, Backend::device, sms);
  if (!specs.ok()) {  // the cases are enumerated from valid formats: a library change broke one
    std::fprintf(stderr, "bench_gemm: %s %s T=%u: the fused layer's tile rows: %s\n", std::string(m.name).c_str(),
                 std::string(c.format->name).c_str(), c.tokens, specs.status().message().c_str());
    std::exit(kExitCaseFailed);
  }
  return specs->align.bm;
}

// The kernel moejit_grouped_gemm picks for the case on a device of `sms` multiprocessors: the
// library's own request -> spec path (dispatch::grouped_gemm_spec), with the align block size the
// fused layer chooses (layer_block_rows).
KernelSpec case_spec(const GemmCase& c, Arch arch, std::uint32_t sms) {
  dispatch::GroupedGemmRequest r;
  r.weights.format = c.format->weight;
  r.weights.scale = c.format->scale;
  r.weights.group_size = c.format->group;
  r.weights.experts = c.model->experts;
  r.weights.n = c.n();
  r.weights.k = c.k();
  r.weights.act_and_mul = c.projection == Projection::gate_up;
  r.weights.order = quant::packed_order_for(c.format->act, c.format->weight);
  r.act = c.format->act;
  r.act_scale = case_act_scale(*c.format);
  r.out = out_dtype(*c.format);
  r.layout = Layout::indexed;
  r.epilogue = c.epilogue();
  r.params.m = static_cast<i32>(c.pairs());
  r.topk_hint = c.model->topk;
  r.global_experts_hint = c.model->experts;
  r.block_size = layer_block_rows(c, arch, sms);
  Result<KernelSpec> spec = dispatch::grouped_gemm_spec(r, arch, Backend::device, sms);
  if (!spec.ok()) {  // the cases are enumerated from valid formats: a library change broke one
    std::fprintf(stderr, "bench_gemm: %s %s %s T=%u: %s\n", std::string(c.model->name).c_str(),
                 std::string(c.format->name).c_str(), std::string(to_string(c.projection)).c_str(), c.tokens,
                 spec.status().message().c_str());
    std::exit(kExitCaseFailed);
  }
  return *spec;
}
KernelSpec case_spec(const GemmCase& c, DeviceLauncher& l) { return case_spec(c, l.arch(), l.sm_count()); }

KernelSpec with_split(KernelSpec spec, std::uint16_t split_k) {
  spec.split_k = static_cast<std::uint8_t>(split_k);  // at most 64: the sweep's 8, or the planner's
  return spec;
}

// The splits the sweep times for a case whose planner picked `spec`: every split of its tile's k
// stages up to 8 that leaves no split empty (the planner's rule), and the planner's own.
std::vector<std::uint16_t> sweep_splits(const KernelSpec& spec) {
  const std::uint32_t stages = spec.k / spec.bk;
  std::vector<std::uint16_t> out;
  for (std::uint32_t split = 1; split <= std::min<std::uint32_t>(stages, 8); ++split) {
    const std::uint32_t per_split = (stages + split - 1) / split;
    if ((stages + per_split - 1) / per_split == split) out.push_back(static_cast<std::uint16_t>(split));
  }
  if (std::find(out.begin(), out.end(), spec.split_k) == out.end()) out.push_back(spec.split_k);
  return out;
}

// The sweep's cases: decode at T = 1 with a tile that may split (at most kMaxSplitRows rows), of
// the first format selected only (the reduction's cost hardly depends on it; each split is a
// kernel of its own to compile and time).
std::vector<GemmCase> sweep_cases(const std::vector<GemmCase>& cases, Arch arch, std::uint32_t sms) {
  std::vector<GemmCase> out;
  for (const GemmCase& c : cases)
    if (c.format == cases.front().format && c.tokens == 1 && case_spec(c, arch, sms).bm <= dispatch::kMaxSplitRows)
      out.push_back(c);
  return out;
}


Json case_json(const GemmCase& c, const KernelSpec& spec) {
  Json j;
  j["model"] = c.model->name;
  j["format"] = c.format->name;
  j["act"] = to_string(c.format->act);
  j["projection"] = to_string(c.projection);
  j["tokens"] = c.tokens;
  j["topk"] = c.model->topk;
  j["experts"] = c.model->experts;
  j["n"] = c.n();
  j["k"] = c.k();
  j["epilogue"] = to_string(c.epilogue());
  j["bias"] = c.model->bias;
  j["tile"] = {{"bm", spec.bm}, {"bn", spec.bn}, {"bk", spec.bk}, {"stages", spec.stages}, {"warps", spec.warps},
               {"split_k", spec.split_k}};
  return j;
}

Json settings_json(const Settings& s) {
  return {{"quick", s.quick},
          {"samples", s.samples},
          {"target_sample_ms", s.target_sample_ms},
          {"routings", s.routings},
          {"rotate_bytes", s.rotate_bytes},
          {"copy_bytes", s.copy_bytes},
          {"baselines", s.baselines},
          {"layers", s.layers},
          {"gemm_rate_size", s.gemm_rate_size},
          {"max_seconds", s.max_seconds},
          {"activations", "the case's act: bf16, f16, e4m3 (f32 scales per token; per 128 k for *_block128) or e2m1 (E8M0 per 32)"},
          {"outputs", "bf16; f16 for f16 activations"},
          {"layout", "indexed"},
          {"routing", "uniform random, topk distinct experts per token"}};
}

// The (model, format, projection) triples that have no cases, and why: the format's group does
// not divide K, or `arch` cannot run the format (selected ones only).
Json not_applicable_json(const Settings& s, Arch arch) {
  Json out = Json::array();
  for (const MoeModel& m : kModels)
    for (const WeightChoice& f : kWeightChoices)
      for (Projection p : {Projection::gate_up, Projection::down}) {
        const GemmCase c{&m, &f, p, 1};
        std::string reason = unsupported_on(f, arch);
        if (!applicable(c)) reason = fmt::format("group {} does not divide K = {}", f.group, c.k());
        else if (!selected(s.models, m.name) || !selected(s.formats, f.name)) reason.clear();
        if (!reason.empty())
          out.push_back({{"model", m.name}, {"format", f.name}, {"projection", to_string(p)}, {"reason", reason}});
      }
  return out;
}

Json gpu_json(const DeviceLauncher& l) {
  const DeviceInfo& i = l.info();
  Json j;
  j["name"] = i.name;
  j["ordinal"] = i.ordinal;
  j["compute_capability"] = fmt::format("{}.{}", i.cc_major, i.cc_minor);
  j["arch"] = to_string(i.arch);
  j["multiprocessors"] = i.multiprocessors;
  j["memory_bytes"] = i.global_memory_bytes;
  j["l2_bytes"] = i.l2_bytes;
  j["max_shared_per_block"] = i.max_shared_per_block;
  if (i.memory_clock_khz > 0 && i.memory_bus_bits > 0)  // double data rate
    j["theoretical_bandwidth_gbs"] = 2.0 * i.memory_clock_khz * 1e3 * (i.memory_bus_bits / 8.0) / 1e9;
  else
    j["theoretical_bandwidth_gbs"] = nullptr;
  return j;
}

Json environment_json(const Settings& s, const DeviceLauncher* l) {
  Json j;
  j["benchmark"] = "grouped_gemm";
  j["date"] = utc_now();
  j["commit"] = s.commit.empty() ? Json(nullptr) : Json(s.commit);
  j["build_commit"] = MOEJIT_BUILD_COMMIT;
  j["gpu"] = l ? gpu_json(*l) : Json(nullptr);
  j["driver_version"] = l ? Json(cuda_version_text(l->info().driver_version)) : Json(nullptr);
  j["libcuda"] = l ? Json(l->driver().path()) : Json(nullptr);
  auto nvrtc = NvrtcLibrary::get();
  j["cuda_version"] = nvrtc.ok() ? Json(fmt::format("{}.{}", (*nvrtc)->major(), (*nvrtc)->minor())) : Json(nullptr);
  j["nvrtc"] = nvrtc.ok() ? Json((*nvrtc)->identity()) : Json(nvrtc.status().message());
  j["cuda_headers"] = cuda_version_text(CUDA_VERSION);
  j["settings"] = settings_json(s);
  return j;
}

int dry_run(const Settings& s) {
  const auto arch = parse_arch(s.arch);
  if (!arch) {
    std::fprintf(stderr, "bench_gemm: --arch %s: expected a target such as sm_90a\n", s.arch.c_str());
    return kExitCaseFailed;
  }
  Json j = environment_json(s, nullptr);
  j["dry_run"] = true;
  j["arch"] = s.arch;
  j["cases"] = Json::array();
  for (const GemmCase& c : selected_cases(s, *arch)) {
    const double touched = expected_touched_experts(c.model->experts, c.model->topk, c.tokens);
    Json cj = case_json(c, case_spec(c, *arch, default_device_profile(*arch) ? default_device_profile(*arch)->sms : kFallbackSms));
    cj["touched_experts"] = touched;
    cj["bytes"] = bytes_json(case_bytes(c, touched));
    cj["flops"] = case_flops(c);
    // The CUTLASS baselines a GPU run would time for this case, and why each other one would not.
    if (s.baselines)
      for (const Baseline b : kBaselines) {
        const std::string why = not_applicable(b, c, *arch);
        cj["baselines"][std::string(to_string(b))] = why.empty() ? Json("runs") : Json{{"not_applicable", why}};
      }
    j["cases"].push_back(cj);
  }
  j["not_applicable"] = not_applicable_json(s, *arch);
  // The split-K sweep a GPU run would time: each case's planner split and the splits beside it.
  j["split_sweep"] = Json::array();
  const std::uint32_t sms = default_device_profile(*arch) ? default_device_profile(*arch)->sms : kFallbackSms;
  for (const GemmCase& c : s.split_sweep ? sweep_cases(selected_cases(s, *arch), *arch, sms) : std::vector<GemmCase>{}) {
    const KernelSpec planned = case_spec(c, *arch, sms);
    Json sweep = case_json(c, planned);
    sweep["planner_split_k"] = planned.split_k;
    sweep["k_stages"] = planned.k / planned.bk;
    sweep["splits"] = sweep_splits(planned);
    j["split_sweep"].push_back(sweep);
  }
  j["layers"] = Json::array();
  for (const LayerCase& c : s.layers ? selected_layer_cases(s, *arch) : std::vector<LayerCase>{}) {
    const double touched = expected_touched_experts(c.model->experts, c.model->topk, c.tokens);
    j["layers"].push_back({{"model", c.model->name}, {"format", c.format->name}, {"tokens", c.tokens},
                           {"touched_experts", touched}, {"bytes", bytes_json(layer_bytes(c, touched))},
                           {"flops", layer_flops(c)}});
  }
  if (s.out.empty()) std::cout << j.dump(2) << "\n";
  else write_json(s.out, j);
  return 0;
}

// What the floor is measured against, both measured in the same run as the cases.
struct Ceilings {
  double copy_bytes_per_s = 0;  // device-to-device copy, read + write
  double flops_per_s = 0;       // dense bf16 GEMM; 0 when not measured
};

TimingOptions timing_options(const Settings& s) {
  TimingOptions o;
  o.samples = s.samples;
  o.target_sample_ms = s.target_sample_ms;
  return o;
}

// Runs one case: routings and activations on the device, the launches timed, the output checked
// for values the kernel must have written.
// One case timed with the planner's kernel, or with `split_k` splits of its tile when nonzero.
Result<Json> run_case(DeviceLauncher& l, CUstream stream, KernelResolver& resolver, const GemmCase& c,
                      const WeightSet& w, std::span<const Routing> routings, const Settings& s, const Ceilings& ceilings,
                      std::mt19937_64& rng, std::uint16_t split_k = 0) {
  const KernelSpec spec = split_k == 0 ? case_spec(c, l) : with_split(case_spec(c, l), split_k);
  Json j = case_json(c, spec);
  j["weight_copies"] = w.copies;
  MOEJIT_ASSIGN_OR_RETURN(Resolution resolved, resolver.resolve(spec));
  const ResolvedKernel& kernel = *resolved.kernel;
  j["kernel"] = {{"source", to_string(resolved.source)},
                 {"registers", kernel.meta.registers},
                 {"spill_bytes", kernel.meta.spill_store_bytes},
                 {"shared_bytes", kernel.meta.static_shared_bytes + kernel.meta.dynamic_shared_bytes}};

  // Routings, each with its own aligned layout.
  const auto numel = static_cast<std::int64_t>(c.pairs());
  const std::uint64_t sorted_bytes = round16(align_max_padded(numel, c.model->experts, spec.bm) * 4);
  const std::uint64_t ids_bytes = round16(align_max_blocks(numel, c.model->experts, spec.bm) * 4);
  const std::uint64_t routing_stride = sorted_bytes + ids_bytes + 16;
  std::vector<unsigned char> host_routings(routing_stride * routings.size(), 0);
  double touched = 0;
  for (std::size_t r = 0; r < routings.size(); ++r) {
    const Routing& routing = routings[r];
    touched += routing.touched_experts;
    unsigned char* base = host_routings.data() + r * routing_stride;
    std::memcpy(base, routing.sorted_token_ids.data(), routing.sorted_token_ids.size() * 4);
    std::memcpy(base + sorted_bytes, routing.expert_ids.data(), routing.expert_ids.size() * 4);
    std::memcpy(base + sorted_bytes + ids_bytes, &routing.num_tokens_post_pad, 4);
  }
  touched /= static_cast<double>(routings.size());
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_routings,
                          upload(l, stream, host_routings.data(), host_routings.size(), host_routings.size()));
  std::vector<float> topk_weights(static_cast<std::size_t>(numel));
  std::uniform_real_distribution<float> tw(0.1f, 1.0f);
  for (float& v : topk_weights) v = tw(rng);
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_topk, upload(l, stream, topk_weights.data(), numel * 4, numel * 4));

  // Activations (bf16 or f16; W4A8: e4m3 bytes and one f32 scale per row, or rows of one per
  // 128 k; W4A4: e2m1 pairs and rows of E8M0 bytes, 16-byte aligned) and outputs, one of each per
  // weight copy.
  const std::uint32_t slots = w.copies;
  const bool w4a8 = is_w4a8(*c.format), w4a4 = is_w4a4(*c.format);
  const std::uint64_t a_bytes = round16(c.a_rows() * act_row_bytes(*c.format, c.k()));
  const std::uint64_t c_bytes = round16(c.pairs() * c.out_columns() * 2);
  // W4A4: bytes between scale rows; W4A8 per 128 k: floats; per token: unused.
  const std::uint64_t a_scale_ld = w4a4 ? round16(c.k() / 32) : w4a8 && c.format->block128 ? c.k() / 128 : 0;
  DeviceBuffer d_a, d_a_scales;
  if (w4a8) {
    const std::vector<u8> a = random_e4m3(c.a_rows() * c.k(), rng);
    MOEJIT_ASSIGN_OR_RETURN(d_a, upload(l, stream, a.data(), a.size(), a_bytes * slots));
    const std::vector<float> scales = random_act_scales(c.a_rows() * std::max<std::uint64_t>(a_scale_ld, 1), rng);
    MOEJIT_ASSIGN_OR_RETURN(d_a_scales, upload(l, stream, scales.data(), scales.size() * 4, scales.size() * 4));
  } else if (w4a4) {
    const std::vector<u8> a = random_e2m1_pairs(c.a_rows() * c.k() / 2, rng);
    MOEJIT_ASSIGN_OR_RETURN(d_a, upload(l, stream, a.data(), a.size(), a_bytes * slots));
    const std::vector<u8> scales = random_e8m0_rows(c.a_rows(), a_scale_ld, rng);
    MOEJIT_ASSIGN_OR_RETURN(d_a_scales, upload(l, stream, scales.data(), scales.size(), scales.size()));
  } else {
    const std::vector<u16> a = is_f16_act(*c.format) ? random_f16(c.a_rows() * c.k(), rng)
                                                     : random_bf16(c.a_rows() * c.k(), rng);
    MOEJIT_ASSIGN_OR_RETURN(d_a, upload(l, stream, a.data(), a.size() * 2, a_bytes * slots));
  }
  MOEJIT_TRY(replicate(l, stream, d_a, a_bytes, slots));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_c, DeviceBuffer::allocate(l, c_bytes * slots));
  MOEJIT_TRY(l.fill(d_c.data(), 0xff, c_bytes * slots, stream));  // NaN: the check below sees unwritten rows

  GroupedGemmParams base{};
  base.lda = c.k();
  base.ldc = c.out_columns();
  base.m = static_cast<i32>(numel);
  base.a_row_divisor = c.projection == Projection::gate_up ? static_cast<i32>(c.model->topk) : 1;
  base.topk_weights = d_topk.as<const float>();
  if (w4a8) {
    base.a_scales = d_a_scales.as<const float>();
    base.a_scale_ld = static_cast<i64>(a_scale_ld);
  }
  if (w4a4) {
    base.a_scales = d_a_scales.as<const u8>();
    base.a_scale_ld = static_cast<i64>(a_scale_ld);
  }
  // Split-K: partial sums and counters (zero before the first launch; every launch leaves them so).
  const GemmTiles tiles = grouped_gemm_tiles(spec, base.m);
  const std::uint64_t partial_bytes = grouped_gemm_partial_bytes(spec, tiles);
  const std::uint64_t counter_bytes = grouped_gemm_counter_count(spec, tiles) * 4;
  DeviceBuffer d_split;
  if (partial_bytes > 0) {
    MOEJIT_ASSIGN_OR_RETURN(d_split, DeviceBuffer::allocate(l, partial_bytes + counter_bytes));
    MOEJIT_TRY(l.fill(d_split.data(), 0, partial_bytes + counter_bytes, stream));
    base.workspace = d_split.as<float>();
    base.tile_counters = reinterpret_cast<u32*>(d_split.as<unsigned char>() + partial_bytes);
  }
  auto params_of = [&](std::uint64_t i) {
    GroupedGemmParams p = base;
    const auto slot = static_cast<std::uint32_t>(i % slots);
    const auto* r = d_routings.as<const unsigned char>() + (i % routings.size()) * routing_stride;
    p.a = d_a.as<const unsigned char>() + slot * a_bytes;
    p.c = d_c.as<unsigned char>() + slot * c_bytes;
    p.b = w.weights_of(slot);
    p.b_scales = w.scales_of(slot);
    if (c.format->weight == WeightFormat::mxfp4)
      p.b_scale_ranges = mxfp4_scale_ranges(p.b_scales, c.model->experts, c.n(), c.k());
    p.bias = w.bias_of(slot);
    p.sorted_token_ids = reinterpret_cast<const i32*>(r);
    p.expert_ids = reinterpret_cast<const i32*>(r + sorted_bytes);
    p.num_tokens_post_pad = reinterpret_cast<const i32*>(r + sorted_bytes + ids_bytes);
    return p;
  };
  MOEJIT_TRY(check_grouped_gemm_params(spec, params_of(0)));
  // The grid the library launches (column and row tiles folded into x, as the kernel decodes
  // them), and the block and shared memory of the compiled kernel.
  MOEJIT_ASSIGN_OR_RETURN(const LaunchGrid grid, grouped_gemm_grid(tiles));
  LaunchDims dims = launch_dims(kernel, grid);
  j["grid"] = {dims.grid[0], dims.grid[1], dims.grid[2]};
  MOEJIT_TRY(l.prepare(kernel, dims.dynamic_shared_bytes));
  auto enqueue = [&](std::uint64_t i) {
    const GroupedGemmParams p = params_of(i);
    return l.launch(kernel, dims, &p, sizeof p, stream);
  };

  MOEJIT_ASSIGN_OR_RETURN(Timing t, time_launches(l.driver(), stream, enqueue, timing_options(s)));

  // Every C row is a (token, k) pair: all of slot 0's must hold finite values now.
  std::vector<u16> out(std::min<std::uint64_t>(c.pairs() * c.out_columns(), 32u << 20));
  MOEJIT_TRY(l.copy_from_backend(out.data(), d_c.data(), out.size() * 2, stream));
  MOEJIT_TRY(l.synchronize(stream));
  const auto nonfinite = count_nonfinite(out, out_dtype(*c.format));

  const CaseBytes bytes = case_bytes(c, touched);
  const Floor floor = case_floor(bytes, case_flops(c), ceilings.copy_bytes_per_s, ceilings.flops_per_s);
  j["touched_experts"] = touched;
  j["bytes"] = bytes_json(bytes);
  j["flops"] = case_flops(c);
  add_timing(j, t, bytes, case_flops(c));
  add_floor(j, floor, t.median_us);
  j["output_check"] = {{"checked", out.size()}, {"nonfinite", nonfinite}};
  if (nonfinite != 0) return error(Code::internal, "{} of {} outputs are not finite: the kernel left rows unwritten or computed NaN", nonfinite, out.size());
  return j;
}

// The dense bf16 GEMM rate (the floor's FLOP ceiling), or why there is none.
Json measure_ceiling(DeviceLauncher& l, CUstream stream, const Settings& s, std::mt19937_64& rng) {
  if (!s.baselines) return {{"tflops", nullptr}, {"reason", "--no-baselines"}};
  auto rate = measure_bf16_gemm_rate(l, stream, s.gemm_rate_size, timing_options(s), rng);
  if (!rate.ok()) {
    std::fprintf(stderr, "bench_gemm: dense bf16 GEMM rate: %s\n", rate.status().message().c_str());
    return {{"tflops", nullptr}, {"error", rate.status().message()}};
  }
  if ((*rate)["tflops"].is_number())
    std::fprintf(stderr, "bench_gemm: dense bf16 GEMM %u^3: %.0f TFLOP/s\n", s.gemm_rate_size,
                 (*rate)["tflops"].get<double>());
  return std::move(rate).value();
}

// The baselines' weights for the run of cases of one weight set, made when first needed.
struct BaselineSet {
  std::map<Baseline, std::unique_ptr<BaselineWeights>> weights;
  std::map<Baseline, std::string> errors;  // creation failed: said once per case, not retried
};
// bf16 baseline results by (model, projection, tokens): the formats of a model share them (the
// bf16 problem is the same; only the dequantized values differ).
using BaselineResults = std::map<std::tuple<std::string_view, Projection, std::uint32_t>, Json>;

// Every baseline of case `c` on moejit's routings, each with moejit's speedup over it (none when
// `moejit_us` is NaN: moejit's case failed).
Json run_baselines(DeviceLauncher& l, CUstream stream, const GemmCase& c, const quant::QuantizedWeights& block,
                   std::span<const Routing> routings, const Settings& s, double moejit_us, BaselineSet& set,
                   BaselineResults& bf16_results, int& failures, std::mt19937_64& rng) {
  Json out = Json::object();
  for (const Baseline b : kBaselines) {
    const std::string name(to_string(b));
    if (const std::string why = not_applicable(b, c, l.arch()); !why.empty()) {
      out[name] = {{"not_applicable", why}};
      continue;
    }
    const auto key = std::make_tuple(c.model->name, c.projection, c.tokens);
    Json bj;
    if (b == Baseline::cutlass_bf16_grouped && bf16_results.count(key)) {
      bj = bf16_results[key];
    } else {
      if (!set.weights.count(b) && !set.errors.count(b)) {
        auto created = BaselineWeights::create(l, stream, b, c, block, s.rotate_bytes);
        if (created.ok()) set.weights[b] = std::move(created).value();
        else set.errors[b] = created.status().message();
      }
      bj = set.errors.count(b) ? Json{{"error", set.errors[b]}} : set.weights[b]->run(c, routings, timing_options(s), rng);
      bj["weights_from"] = c.format->name;  // whose dequantized values the bf16 weights hold
      if (b == Baseline::cutlass_bf16_grouped && !bj.contains("error")) bf16_results[key] = bj;
    }
    if (bj.contains("error")) ++failures;
    if (bj.contains("median_us") && std::isfinite(moejit_us))
      bj["moejit_speedup"] = bj["median_us"].get<double>() / moejit_us;
    out[name] = bj;
  }
  return out;
}

// The layer cases through the public API (moejit_fused_moe), after the GEMM cases and within
// the same time budget: `layers` and `layer_summary` in `j`.
void run_layers(DeviceLauncher& l, CUstream stream, const Settings& s, const Ceilings& ceilings, Clock::time_point start,
                Json& j, std::mt19937_64& rng) {
  const std::vector<LayerCase> layers = selected_layer_cases(s, l.arch());
  j["layers"] = Json::array();
  int failed = 0, skipped = 0;
  auto summarize = [&] {
    j["layer_summary"] = {{"cases", layers.size()}, {"ran", j["layers"].size() - failed - skipped},
                          {"failed", failed}, {"skipped", skipped}, {"wall_s", seconds_since(start)}};
  };
  moejit_context_options_t co;
  moejit_context_options_init(&co);
  co.backend = MOEJIT_BACKEND_DEVICE;
  co.device_ordinal = s.device;
  moejit_context_t context = nullptr;
  if (moejit_context_create(&co, &context) != MOEJIT_OK) {
    j["layers_error"] = fmt::format("moejit_context_create: {}", moejit_last_error());
    failed = static_cast<int>(layers.size());
    summarize();
    return;
  }
  LayerRun run{context, timing_options(s), s.routings, ceilings.copy_bytes_per_s, ceilings.flops_per_s};
  for (std::size_t i = 0; i < layers.size();) {
    std::size_t end = i;  // one pair of weight sets serves a model and format
    while (end < layers.size() && layers[end].model == layers[i].model && layers[end].format == layers[i].format) ++end;
    const bool budget_spent = seconds_since(start) > s.max_seconds;
    Result<WeightSet> w13 = budget_spent ? Result<WeightSet>(Status(Code::unavailable, "budget"))
                                         : make_weights(l, stream, layers[i].gate_up(), s.rotate_bytes, rng);
    Result<WeightSet> w2 = budget_spent || !w13.ok() ? Result<WeightSet>(Status(Code::unavailable, "budget"))
                                                     : make_weights(l, stream, layers[i].down(), s.rotate_bytes, rng);
    for (; i < end; ++i) {
      const LayerCase& c = layers[i];
      Json lj;
      if (seconds_since(start) > s.max_seconds) {
        lj = {{"model", c.model->name}, {"format", c.format->name}, {"tokens", c.tokens},
              {"skipped", fmt::format("time budget of {} s spent", s.max_seconds)}};
        ++skipped;
      } else {
        Result<Json> r = !w13.ok() ? Result<Json>(w13.status())
                         : !w2.ok() ? Result<Json>(w2.status())
                                    : run_layer_case(l, stream, run, c, *w13, *w2, rng);
        if (r.ok()) {
          lj = std::move(r).value();
          std::fprintf(stderr, "  layer %-15s %-9s T=%-5u %9.2f us  floor %8.2f us  %5.1f%%  %7.0f GB/s\n",
                       std::string(c.model->name).c_str(), std::string(c.format->name).c_str(), c.tokens,
                       lj["median_us"].get<double>(), lj["floor_us"].get<double>(),
                       100 * lj["fraction_of_floor"].get<double>(), lj["achieved_gbs"].get<double>());
        } else {
          lj = {{"model", c.model->name}, {"format", c.format->name}, {"tokens", c.tokens},
                {"error", r.status().message()}};
          ++failed;
          std::fprintf(stderr, "  layer %s %s T=%u: %s\n", std::string(c.model->name).c_str(),
                       std::string(c.format->name).c_str(), c.tokens, r.status().message().c_str());
        }
      }
      j["layers"].push_back(lj);
      summarize();
      write_json(s.out, j);
    }
  }
  moejit_context_destroy(context);
  summarize();
}

// Each result of a format with other than bf16 activations beside its bf16 twin (same model,
// projection or layer, token count; weights of the same format): under twin_key ("vs_w4a16"
// for W4A8 and W4A4, "vs_bf16" for f16), the twin's median and twin / this case's (above 1:
// this one is faster), or why there is none.
void add_twin_comparisons(Json& results, std::initializer_list<const char*> keys) {
  auto same = [&](const Json& a, const Json& b) {
    return std::all_of(keys.begin(), keys.end(), [&](const char* k) { return a.value(k, Json()) == b.value(k, Json()); });
  };
  for (Json& r : results) {
    const WeightChoice* format = nullptr;
    for (const WeightChoice& f : kWeightChoices)
      if (r.value("format", "") == f.name) format = &f;
    if (format == nullptr || !beside_bf16(*format)) continue;
    const std::string key(twin_key(*format));
    const std::string twin_name = quantized_act(*format) ? "W4A16" : "bf16";
    const Json* twin = nullptr;
    for (const Json& o : results)
      if (o.value("format", "") == format->bf16_twin && same(o, r)) twin = &o;
    if (twin == nullptr || !twin->contains("median_us") || !r.contains("median_us")) {
      r[key] = {{"none", twin == nullptr ? "the " + twin_name + " case was not run (--formats, --models)"
                                         : std::string("one of the two has no time (failed or skipped)")}};
      continue;
    }
    const double twin_us = (*twin)["median_us"].get<double>();
    r[key] = {{quantized_act(*format) ? "w4a16_us" : "bf16_us", twin_us}, {"speedup", twin_us / r["median_us"].get<double>()}};
  }
}

// " bf16 1.83x int4 2.10x": moejit's speedups for the progress line.
std::string speedups_text(const Json& case_json) {
  std::string text;
  if (!case_json.contains("baselines")) return text;
  for (const auto& [name, b] : case_json["baselines"].items())
    if (b.contains("moejit_speedup"))
      text += fmt::format("  {} {:.2f}x", name.substr(8, 4), b["moejit_speedup"].get<double>());
  return text;
}

// The split-K sweep: each T = 1 case timed at every split of its tile, side by side in one run,
// so the time model's reduction cost (dispatch::kSplitStepNs, an estimate) and the planner's
// choice can be checked against the fastest split. Returns the runs that failed.
int run_split_sweep(DeviceLauncher& l, CUstream stream, KernelResolver& resolver, const std::vector<GemmCase>& cases,
                     const Settings& s, const Ceilings& ceilings, Clock::time_point start, Json& j,
                     std::mt19937_64& rng) {
  j["split_sweep"] = Json::array();
  int failed = 0;
  for (const GemmCase& c : cases) {
    const KernelSpec planned = case_spec(c, l);
    Json sweep = case_json(c, planned);
    sweep["planner_split_k"] = planned.split_k;
    sweep["k_stages"] = planned.k / planned.bk;
    sweep["runs"] = Json::array();
    if (seconds_since(start) > s.max_seconds) {
      sweep["skipped"] = fmt::format("time budget of {} s spent", s.max_seconds);
      j["split_sweep"].push_back(sweep);
      continue;
    }
    auto weights = make_weights(l, stream, c, s.rotate_bytes, rng);
    std::vector<Routing> routings;
    for (int r = 0; r < s.routings; ++r)
      routings.push_back(random_routing(rng, c.tokens, c.model->experts, c.model->topk, planned.bm));
    std::optional<std::pair<double, std::uint16_t>> fastest;
    for (std::uint16_t split : sweep_splits(planned)) {
      Json run_json = {{"split_k", split}};
      Result<Json> r = !weights.ok() ? Result<Json>(weights.status())
                                     : run_case(l, stream, resolver, c, *weights, routings, s, ceilings, rng, split);
      if (r.ok()) {
        const double us = (*r)["median_us"].get<double>();
        run_json["median_us"] = us;
        run_json["fraction_of_floor"] = (*r)["fraction_of_floor"];
        if (!fastest || us < fastest->first) fastest = {us, split};
      } else {
        run_json["error"] = r.status().message();
        ++failed;
      }
      sweep["runs"].push_back(run_json);
    }
    sweep["fastest_split_k"] = fastest ? Json(fastest->second) : Json(nullptr);
    std::fprintf(stderr, "  split sweep %-15s %-9s %-7s T=%u: planner %u, fastest %s\n",
                 std::string(c.model->name).c_str(), std::string(c.format->name).c_str(),
                 std::string(to_string(c.projection)).c_str(), c.tokens, planned.split_k,
                 fastest ? std::to_string(fastest->second).c_str() : "none (no run succeeded)");
    j["split_sweep"].push_back(sweep);
    write_json(s.out, j);
  }
  return failed;
}

int run(const Settings& s) {
  const auto start = Clock::now();
  auto created = DeviceLauncher::create(s.device);
  if (!created.ok()) {
    std::fprintf(stderr, "bench_gemm: no GPU to benchmark: %s\n", created.status().message().c_str());
    Json j = environment_json(s, nullptr);
    j["error"] = {{"code", code_name(created.status().code())}, {"message", created.status().message()}};
    write_json(s.out, j);
    return created.status().code() == Code::unavailable || created.status().code() == Code::unsupported ? kExitNoGpu
                                                                                                            : kExitCaseFailed;
  }
  DeviceLauncher& l = **created;
  // The primary context, current for the whole run; popped before the launcher goes.
  auto context = PrimaryContextScope::enter(l);
  if (!context.ok()) {
    std::fprintf(stderr, "bench_gemm: cannot make the primary context current: %s\n",
                 context.status().message().c_str());
    return kExitNoGpu;
  }
  auto stream = Stream::create(l.driver());
  if (!stream.ok()) {
    std::fprintf(stderr, "bench_gemm: %s\n", stream.status().message().c_str());
    return kExitCaseFailed;
  }
  const CUstream st = stream->get();
  Json j = environment_json(s, &l);
  std::fprintf(stderr, "bench_gemm: %s, driver %s\n", l.info().name.c_str(), cuda_version_text(l.info().driver_version).c_str());

  auto copy = measure_copy_bandwidth(l, st, s.copy_bytes, s.copy_samples);
  if (!copy.ok()) {
    std::fprintf(stderr, "bench_gemm: copy bandwidth: %s\n", copy.status().message().c_str());
    j["error"] = {{"code", code_name(copy.status().code())}, {"message", copy.status().message()}};
    write_json(s.out, j);
    return kExitCaseFailed;
  }
  j["copy_bandwidth"] = {{"bytes", copy->bytes}, {"moved_bytes", 2 * copy->bytes}, {"samples", copy->samples},
                         {"median_ms", copy->median_ms}, {"gbs", copy->bytes_per_s / 1e9}};
  std::fprintf(stderr, "bench_gemm: device-to-device copy %.0f GB/s (read + write)\n", copy->bytes_per_s / 1e9);

  auto options = KernelResolver::Options::from_environment();
  if (!options.ok()) {
    std::fprintf(stderr, "bench_gemm: %s\n", options.status().message().c_str());
    return kExitCaseFailed;
  }
  auto resolver = KernelResolver::create(std::move(options).value());
  if (!resolver.ok()) {
    std::fprintf(stderr, "bench_gemm: %s\n", resolver.status().message().c_str());
    return kExitCaseFailed;
  }
  const std::vector<GemmCase> cases = selected_cases(s, l.arch());

  // Every kernel first, in parallel, so compiles stay out of the timed region.
  const auto compile_start = Clock::now();
  std::map<std::string, std::future<Result<Resolution>>> pending;
  auto compile = [&](const KernelSpec& spec) {
    const std::string slug = codegen::spec_slug(spec);
    if (!pending.count(slug)) pending.emplace(slug, (*resolver)->resolve_async(spec));
  };
  for (const GemmCase& c : cases) compile(case_spec(c, l));
  const std::vector<GemmCase> swept =
      s.split_sweep ? sweep_cases(cases, l.arch(), l.sm_count()) : std::vector<GemmCase>{};
  for (const GemmCase& c : swept)
    for (std::uint16_t split : sweep_splits(case_spec(c, l))) compile(with_split(case_spec(c, l), split));
  Json compile_errors = Json::object();
  for (auto& [slug, f] : pending)
    if (auto r = f.get(); !r.ok()) compile_errors[slug] = r.status().message();
  const ResolverStats stats = (*resolver)->stats();
  j["kernels"] = {{"distinct", pending.size()}, {"compiled", stats.compiles}, {"from_disk", stats.disk_hits},
                  {"wall_s", seconds_since(compile_start)}, {"errors", compile_errors}};
  std::fprintf(stderr, "bench_gemm: %zu kernels ready in %.1f s\n", pending.size(), seconds_since(compile_start));

  std::mt19937_64 rng(20261130);
  j["bf16_gemm"] = measure_ceiling(l, st, s, rng);
  const Ceilings ceilings{copy->bytes_per_s,
                          j["bf16_gemm"].value("tflops", Json(nullptr)).is_number()
                              ? j["bf16_gemm"]["tflops"].get<double>() * 1e12
                              : 0.0};
  int baseline_failures = j["bf16_gemm"].contains("error") ? 1 : 0;
  if (auto overhead = measure_host_overhead(l, st, OverheadOptions{}, rng); overhead.ok()) {
    j["host_overhead"] = std::move(overhead).value();
    std::fprintf(stderr, "bench_gemm: host overhead per call on a hit: %.2f us (moejit_grouped_gemm %.2f us, "
                 "cuLaunchKernelEx %.2f us)\n", j["host_overhead"]["overhead_us"].get<double>(),
                 j["host_overhead"]["moejit_call_us"].get<double>(), j["host_overhead"]["raw_launch_us"].get<double>());
  } else {
    j["host_overhead"] = {{"error", overhead.status().message()}};
    std::fprintf(stderr, "bench_gemm: host overhead: %s\n", overhead.status().message().c_str());
  }

  // The whole layers first: they are the headline numbers, and cheaper than the GEMM cases with
  // their baselines, which get the rest of the budget.
  if (s.layers) run_layers(l, st, s, ceilings, start, j, rng);
  const int sweep_failures = s.split_sweep ? run_split_sweep(l, st, **resolver, swept, s, ceilings, start, j, rng) : 0;

  j["cases"] = Json::array();
  j["not_applicable"] = not_applicable_json(s, l.arch());
  int failed = 0, skipped = 0;
  BaselineResults bf16_results;
  auto summarize = [&] {
    j["summary"] = {{"cases", cases.size()},         {"ran", j["cases"].size() - failed - skipped},
                    {"failed", failed},              {"skipped", skipped},
                    {"baseline_failures", baseline_failures}, {"wall_s", seconds_since(start)}};
  };
  for (std::size_t i = 0; i < cases.size();) {
    // One weight set serves the run of cases that share model, format and projection.
    std::size_t end = i;
    while (end < cases.size() && cases[end].model == cases[i].model && cases[end].format == cases[i].format &&
           cases[end].projection == cases[i].projection)
      ++end;
    if (seconds_since(start) > s.max_seconds) {
      for (; i < end; ++i) {
        Json cj = case_json(cases[i], case_spec(cases[i], l));
        cj["skipped"] = fmt::format("time budget of {} s spent", s.max_seconds);
        j["cases"].push_back(cj);
        ++skipped;
      }
      continue;
    }
    auto weights = make_weights(l, st, cases[i], s.rotate_bytes, rng);
    BaselineSet baselines;
    for (; i < end; ++i) {
      const GemmCase& c = cases[i];
      std::vector<Routing> routings;
      for (int r = 0; r < s.routings; ++r)
        routings.push_back(random_routing(rng, c.tokens, c.model->experts, c.model->topk, case_spec(c, l).bm));
      Result<Json> r = !weights.ok() ? Result<Json>(weights.status())
                       : seconds_since(start) > s.max_seconds
                           ? Result<Json>(Status(Code::unavailable, fmt::format("time budget of {} s spent", s.max_seconds)))
                           : run_case(l, st, **resolver, c, *weights, routings, s, ceilings, rng);
      Json cj;
      if (r.ok()) {
        cj = std::move(r).value();
        if (s.baselines)
          cj["baselines"] = run_baselines(l, st, c, weights->block, routings, s, cj["median_us"].get<double>(),
                                          baselines, bf16_results, baseline_failures, rng);
        std::fprintf(stderr, "  %-15s %-9s %-7s T=%-5u %9.2f us  floor %8.2f us  %5.1f%%  %7.0f GB/s%s\n",
                     std::string(c.model->name).c_str(), std::string(c.format->name).c_str(),
                     std::string(to_string(c.projection)).c_str(), c.tokens, cj["median_us"].get<double>(),
                     cj["floor_us"].get<double>(), 100 * cj["fraction_of_floor"].get<double>(),
                     cj["achieved_gbs"].get<double>(), speedups_text(cj).c_str());
      } else {
        cj = case_json(c, case_spec(c, l));
        const bool budget = r.status().message().starts_with("time budget");
        cj[budget ? "skipped" : "error"] = r.status().message();
        if (budget) ++skipped;
        else ++failed;
        // The baselines still run when moejit's case failed (weights were made): their numbers
        // stand on their own, without a speedup.
        if (!budget && weights.ok() && s.baselines)
          cj["baselines"] = run_baselines(l, st, c, weights->block, routings, s, std::nan(""), baselines,
                                          bf16_results, baseline_failures, rng);
        if (!budget)
          std::fprintf(stderr, "  %s %s %s T=%u: %s\n", std::string(c.model->name).c_str(),
                       std::string(c.format->name).c_str(), std::string(to_string(c.projection)).c_str(), c.tokens,
                       r.status().message().c_str());
      }
      j["cases"].push_back(cj);
      summarize();
      write_json(s.out, j);  // partial results survive a timeout
    }
  }
  add_twin_comparisons(j["cases"], {"model", "projection", "tokens"});
  if (j.contains("layers")) add_twin_comparisons(j["layers"], {"model", "tokens"});
  summarize();
  if (s.out.empty()) std::cout << j.dump(2) << "\n";
  else write_json(s.out, j);
  const int layers_failed = j.contains("layer_summary") ? j["layer_summary"]["failed"].get<int>() : 0;
  return failed || baseline_failures || layers_failed || sweep_failures ? kExitCaseFailed : 0;
}

int probe(const Settings& s) {
  auto created = DeviceLauncher::create(s.device);
  Json j = environment_json(s, created.ok() ? created->get() : nullptr);
  j.erase("settings");
  if (!created.ok()) j["error"] = {{"code", code_name(created.status().code())}, {"message", created.status().message()}};
  if (s.out.empty()) std::cout << j.dump(2) << "\n";
  else write_json(s.out, j);
  if (!created.ok()) {
    std::fprintf(stderr, "bench_gemm: no GPU: %s\n", created.status().message().c_str());
    return kExitNoGpu;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Settings s;
  bool dry = false, probe_only = false;
  CLI::App app{"moejit grouped GEMM benchmark on the GPU (device backend) against the memory floor"};
  app.add_option("--out", s.out, "write the JSON here (rewritten after every case) instead of stdout");
  app.add_flag("--quick", s.quick, "token counts 1, 32, 1024 only");
  app.add_flag("--dry-run", dry, "enumerate the cases and their byte counts (expected routing); no GPU needed");
  app.add_flag("--probe", probe_only, "print the GPU, driver and CUDA versions, then exit");
  app.add_option("--device", s.device, "CUDA device ordinal")->check(CLI::NonNegativeNumber);
  app.add_option("--commit", s.commit, "source commit to record (the build's own is recorded as build_commit)");
  app.add_option("--arch", s.arch, "target for --dry-run's tile choice (a GPU run uses the device's)");
  app.add_option("--max-seconds", s.max_seconds, "start no case after this many seconds (the rest are 'skipped')");
  app.add_option("--samples", s.samples, "timed samples per case (median reported)")->check(CLI::Range(1, 1000));
  app.add_option("--sample-ms", s.target_sample_ms, "launches per sample add up to about this long")
      ->check(CLI::PositiveNumber);
  app.add_option("--routings", s.routings, "distinct random routings rotated per case")->check(CLI::Range(1, 64));
  app.add_option("--rotate-bytes", s.rotate_bytes, "weight copies are added until the layer's rotation spans this");
  app.add_option("--copy-bytes", s.copy_bytes, "size of the device-to-device copy that sets the floor")
      ->check(CLI::PositiveNumber);
  app.add_flag("!--no-layers", s.layers, "skip the whole-layer cases (moejit_fused_moe)");
  app.add_flag("!--no-baselines", s.baselines, "skip the CUTLASS baselines and the dense bf16 GEMM rate");
  app.add_flag("!--no-split-sweep", s.split_sweep, "skip timing the T = 1 cases at every split-K");
  app.add_option("--gemm-rate-size", s.gemm_rate_size, "m = n = k of the dense bf16 GEMM that sets the FLOP ceiling")
      ->check(CLI::Range(256, 16384));
  app.add_option("--models", s.models, "only these models (names as in the JSON)")->delimiter(',');
  app.add_option("--formats", s.formats,
                 "only these formats: mxfp4, int4_g128, mxfp4_w4a8, int4_g128_w4a8, mxfp4_w4a4 (sm_120a / sm_121a)")
      ->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  if (s.quick) {
    s.samples = std::min(s.samples, 5);
    s.routings = std::min(s.routings, 4);
  }
  if (dry) return dry_run(s);
  if (probe_only) return probe(s);
  return run(s);
}
