// bench_gemm: moejit's grouped GEMM on the GPU (device backend, weights packed by src/quant) at
// the MoE layer shapes of four models, decode and prefill token counts, MXFP4 and INT4 g128
// weights, bf16 activations, random top-k routing; each case against its memory floor (the
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
#include <random>

#include "bench/gpu/gemm_cases.hpp"
#include "bench/gpu/gpu_timer.hpp"
#include "bench/gpu/routing.hpp"
#include "codegen/generate.hpp"
#include "common/numeric.cuh"
#include "compile/nvrtc_library.hpp"
#include "dispatch/grouped_gemm_launch.hpp"
#include "dispatch/tile_configs.hpp"
#include "moe/align_params.cuh"
#include "quant/pack.hpp"
#include "quant/quantize.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/kernel_resolver.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"

#ifndef MOEJIT_BUILD_COMMIT
#define MOEJIT_BUILD_COMMIT "unknown"
#endif

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
  std::vector<std::string> models, formats;
};

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

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

std::vector<GemmCase> selected_cases(const Settings& s) {
  std::vector<GemmCase> out;
  for (const GemmCase& c : enumerate_cases(s.quick))
    if (selected(s.models, c.model->name) && selected(s.formats, c.format->name)) out.push_back(c);
  return out;
}

// The kernel dispatch would pick: the tile for the rows each touched expert sees on average.
KernelSpec case_spec(const GemmCase& c, Arch arch) {
  const double touched = expected_touched_experts(c.model->experts, c.model->topk, c.tokens);
  const auto rows = static_cast<std::uint32_t>(std::ceil(static_cast<double>(c.pairs()) / touched));
  KernelSpec s{};
  s.op = Op::grouped_gemm;
  s.backend = Backend::device;
  s.arch = arch;
  s.weight = c.format->weight;
  s.scale = c.format->scale;
  s.group_size = c.format->group;
  s.act = DType::bf16;
  s.out = DType::bf16;
  s.layout = Layout::indexed;
  s.epilogue = c.epilogue();
  s.n = c.n();
  s.k = c.k();
  s.experts = c.model->experts;
  return dispatch::with_tile(s, dispatch::pick_gemm_tile(arch, rows));
}

Json case_json(const GemmCase& c, const KernelSpec& spec) {
  Json j;
  j["model"] = c.model->name;
  j["format"] = c.format->name;
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

Json bytes_json(const CaseBytes& b) {
  return {{"weights", b.weights}, {"scales", b.scales}, {"bias", b.bias}, {"act_in", b.act_in},
          {"act_out", b.act_out}, {"total", b.total()}};
}

Json settings_json(const Settings& s) {
  return {{"quick", s.quick},
          {"samples", s.samples},
          {"target_sample_ms", s.target_sample_ms},
          {"routings", s.routings},
          {"rotate_bytes", s.rotate_bytes},
          {"copy_bytes", s.copy_bytes},
          {"max_seconds", s.max_seconds},
          {"activations", "bf16"},
          {"outputs", "bf16"},
          {"layout", "indexed"},
          {"routing", "uniform random, topk distinct experts per token"}};
}

Json not_applicable_json() {
  Json out = Json::array();
  for (const MoeModel& m : kModels)
    for (const WeightChoice& f : kWeightChoices)
      for (Projection p : {Projection::gate_up, Projection::down})
        if (GemmCase c{&m, &f, p, 1}; !applicable(c))
          out.push_back({{"model", m.name},
                         {"format", f.name},
                         {"projection", to_string(p)},
                         {"reason", fmt::format("group {} does not divide K = {}", f.group, c.k())}});
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
  for (const GemmCase& c : selected_cases(s)) {
    const double touched = expected_touched_experts(c.model->experts, c.model->topk, c.tokens);
    Json cj = case_json(c, case_spec(c, *arch));
    cj["touched_experts"] = touched;
    cj["bytes"] = bytes_json(case_bytes(c, touched));
    j["cases"].push_back(cj);
  }
  j["not_applicable"] = not_applicable_json();
  if (s.out.empty()) std::cout << j.dump(2) << "\n";
  else write_json(s.out, j);
  return 0;
}

// ---- Device data --------------------------------------------------------------------------

// Every expert's packed weights, scales and bias, in `copies` full copies of the layer so that
// a run of launches rotating over them reads weights from HBM rather than L2.
struct WeightSet {
  DeviceBuffer weights, scales, bias;
  std::uint32_t copies = 1, experts = 0;
  std::uint64_t expert_weight = 0, expert_scale = 0, expert_bias = 0;
  const u8* weights_of(std::uint32_t copy) const {
    return weights.as<const u8>() + std::uint64_t{copy} * experts * expert_weight;
  }
  const void* scales_of(std::uint32_t copy) const {
    return scales.as<const u8>() + std::uint64_t{copy} * experts * expert_scale;
  }
  const float* bias_of(std::uint32_t copy) const {
    return bias ? reinterpret_cast<const float*>(bias.as<const u8>() + std::uint64_t{copy} * experts * expert_bias)
                : nullptr;
  }
};

// Fills `buffer` (count blocks of `block` bytes) from its first block, doubling each copy.
Status replicate(DeviceLauncher& l, CUstream stream, const DeviceBuffer& buffer, std::uint64_t block, std::uint64_t count) {
  auto* base = buffer.as<unsigned char>();
  for (std::uint64_t have = 1; have < count;) {
    const std::uint64_t n = std::min(have, count - have);
    MOEJIT_TRY(l.copy_within_backend(base + have * block, base, n * block, stream));
    have += n;
  }
  return {};
}

Result<DeviceBuffer> upload(DeviceLauncher& l, CUstream stream, const void* data, std::uint64_t bytes, std::uint64_t total) {
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::allocate(l, std::max<std::uint64_t>(total, 1)));
  MOEJIT_TRY(l.copy_to_backend(b.data(), data, bytes, stream));
  return b;
}

// One expert's weights quantized and packed by src/quant from random normal values. Only a
// block of columns is quantized and repeated across N (the packed layout keeps each 32-column
// strip self-contained, and timing does not depend on values): the rest is the same bytes.
struct HostExpert {
  std::vector<u8> weights, scales;
  std::vector<float> bias;
};

Result<HostExpert> make_host_expert(const GemmCase& c, std::mt19937_64& rng) {
  const std::uint32_t n = c.n(), k = c.k();
  const std::uint32_t block = std::gcd(n, 512u);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> w(std::uint64_t{block} * k);
  for (float& v : w) v = dist(rng);
  MOEJIT_ASSIGN_OR_RETURN(auto q, quant::quantize(w, 1, block, k, {c.format->weight, c.format->group, c.format->scale}));
  std::vector<float> bias;
  if (c.model->bias) {
    bias.resize(block);
    for (float& v : bias) v = dist(rng);
  }
  quant::PackOptions po;
  po.rows = c.projection == Projection::gate_up ? quant::RowOrder::concatenated : quant::RowOrder::plain;
  po.bias = bias;
  MOEJIT_ASSIGN_OR_RETURN(auto packed, quant::pack(q, po));
  const std::uint32_t repeats = n / block, groups = k / c.format->group;
  const std::uint64_t sb = scale_bytes(c.format->scale);
  if (packed.qweight.size() != std::uint64_t{block} * k / 2 || packed.scales.size() != std::uint64_t{groups} * block * sb)
    return error(Code::internal, "packed sizes {} / {}: expected {} / {}", packed.qweight.size(), packed.scales.size(),
                 std::uint64_t{block} * k / 2, std::uint64_t{groups} * block * sb);
  HostExpert e;
  for (std::uint32_t r = 0; r < repeats; ++r) e.weights.insert(e.weights.end(), packed.qweight.begin(), packed.qweight.end());
  for (std::uint32_t g = 0; g < groups; ++g)
    for (std::uint32_t r = 0; r < repeats; ++r)
      e.scales.insert(e.scales.end(), packed.scales.begin() + g * block * sb, packed.scales.begin() + (g + 1) * block * sb);
  for (std::uint32_t r = 0; r < repeats && !packed.bias.empty(); ++r)
    e.bias.insert(e.bias.end(), packed.bias.begin(), packed.bias.end());
  return e;
}

Result<WeightSet> make_weights(DeviceLauncher& l, CUstream stream, const GemmCase& c, const Settings& s,
                               std::mt19937_64& rng) {
  WeightSet w;
  w.experts = c.model->experts;
  w.expert_weight = expert_weight_bytes(c);
  w.expert_scale = expert_scale_bytes(c);
  w.expert_bias = expert_bias_bytes(c);
  const std::uint64_t layer = std::uint64_t{w.experts} * (w.expert_weight + w.expert_scale + w.expert_bias);
  w.copies = static_cast<std::uint32_t>(std::clamp<std::uint64_t>((s.rotate_bytes + layer - 1) / layer, 1, 16));
  std::size_t free_bytes = 0, total_bytes = 0;
  if (l.driver().api().MemGetInfo(&free_bytes, &total_bytes) == CUDA_SUCCESS)
    while (w.copies > 1 && layer * w.copies > free_bytes / 2) --w.copies;
  MOEJIT_ASSIGN_OR_RETURN(HostExpert e, make_host_expert(c, rng));
  const std::uint64_t count = std::uint64_t{w.copies} * w.experts;
  MOEJIT_ASSIGN_OR_RETURN(w.weights, upload(l, stream, e.weights.data(), w.expert_weight, count * w.expert_weight));
  MOEJIT_TRY(replicate(l, stream, w.weights, w.expert_weight, count));
  MOEJIT_ASSIGN_OR_RETURN(w.scales, upload(l, stream, e.scales.data(), w.expert_scale, count * w.expert_scale));
  MOEJIT_TRY(replicate(l, stream, w.scales, w.expert_scale, count));
  if (w.expert_bias > 0) {
    MOEJIT_ASSIGN_OR_RETURN(w.bias, upload(l, stream, e.bias.data(), w.expert_bias, count * w.expert_bias));
    MOEJIT_TRY(replicate(l, stream, w.bias, w.expert_bias, count));
  }
  MOEJIT_TRY(l.synchronize(stream));
  return w;
}

std::uint64_t round16(std::uint64_t bytes) { return (bytes + 15) / 16 * 16; }

// Runs one case: routings and activations on the device, the launches timed, the output checked
// for values the kernel must have written.
Result<Json> run_case(DeviceLauncher& l, CUstream stream, KernelResolver& resolver, const GemmCase& c,
                      const WeightSet& w, const Settings& s, double copy_bytes_per_s, std::mt19937_64& rng) {
  const KernelSpec spec = case_spec(c, l.arch());
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
  std::vector<unsigned char> host_routings(routing_stride * s.routings, 0);
  double touched = 0;
  for (int r = 0; r < s.routings; ++r) {
    const Routing routing = random_routing(rng, c.tokens, c.model->experts, c.model->topk, spec.bm);
    touched += routing.touched_experts;
    unsigned char* base = host_routings.data() + r * routing_stride;
    std::memcpy(base, routing.sorted_token_ids.data(), routing.sorted_token_ids.size() * 4);
    std::memcpy(base + sorted_bytes, routing.expert_ids.data(), routing.expert_ids.size() * 4);
    std::memcpy(base + sorted_bytes + ids_bytes, &routing.num_tokens_post_pad, 4);
  }
  touched /= s.routings;
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer routings,
                          upload(l, stream, host_routings.data(), host_routings.size(), host_routings.size()));
  std::vector<float> topk_weights(static_cast<std::size_t>(numel));
  std::uniform_real_distribution<float> tw(0.1f, 1.0f);
  for (float& v : topk_weights) v = tw(rng);
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_topk, upload(l, stream, topk_weights.data(), numel * 4, numel * 4));

  // Activations (bf16, exactly representable) and outputs, one of each per weight copy.
  const std::uint32_t slots = w.copies;
  const std::uint64_t a_bytes = round16(c.a_rows() * c.k() * 2);
  const std::uint64_t c_bytes = round16(c.pairs() * c.out_columns() * 2);
  // Uniform in [-2, 2) from a cheap generator: prefill cases need up to 10^8 values, and the
  // kernel's time does not depend on them.
  std::vector<u16> a(c.a_rows() * c.k());
  std::uint64_t state = rng() | 1;
  for (u16& v : a) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    v = prim::twin::f32_to_bf16(static_cast<float>(static_cast<std::int32_t>(state >> 32)) * 0x1p-30f);
  }
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_a, upload(l, stream, a.data(), a.size() * 2, a_bytes * slots));
  MOEJIT_TRY(replicate(l, stream, d_a, a_bytes, slots));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_c, DeviceBuffer::allocate(l, c_bytes * slots));
  MOEJIT_TRY(l.fill(d_c.data(), 0xff, c_bytes * slots, stream));  // NaN: the check below sees unwritten rows

  GroupedGemmParams base{};
  base.lda = c.k();
  base.ldc = c.out_columns();
  base.m = static_cast<i32>(numel);
  base.a_row_divisor = c.projection == Projection::gate_up ? static_cast<i32>(c.model->topk) : 1;
  base.topk_weights = d_topk.as<const float>();
  auto params_of = [&](std::uint64_t i) {
    GroupedGemmParams p = base;
    const auto slot = static_cast<std::uint32_t>(i % slots);
    const auto* r = routings.as<const unsigned char>() + (i % static_cast<std::uint64_t>(s.routings)) * routing_stride;
    p.a = d_a.as<const unsigned char>() + slot * a_bytes;
    p.c = d_c.as<unsigned char>() + slot * c_bytes;
    p.b = w.weights_of(slot);
    p.b_scales = w.scales_of(slot);
    p.bias = w.bias_of(slot);
    p.sorted_token_ids = reinterpret_cast<const i32*>(r);
    p.expert_ids = reinterpret_cast<const i32*>(r + sorted_bytes);
    p.num_tokens_post_pad = reinterpret_cast<const i32*>(r + sorted_bytes + ids_bytes);
    return p;
  };
  MOEJIT_TRY(dispatch::check_grouped_gemm_params(spec, params_of(0)));
  const dispatch::LaunchShape shape = dispatch::grouped_gemm_launch_shape(spec, base.m);
  LaunchDims dims;
  std::copy(std::begin(shape.grid), std::end(shape.grid), dims.grid);
  dims.block[0] = shape.block_threads;
  dims.dynamic_shared_bytes = shape.dynamic_shared_bytes;
  j["grid"] = {dims.grid[0], dims.grid[1], dims.grid[2]};
  MOEJIT_TRY(l.prepare(kernel, dims.dynamic_shared_bytes));
  auto enqueue = [&](std::uint64_t i) {
    const GroupedGemmParams p = params_of(i);
    return l.launch(kernel, dims, &p, sizeof p, stream);
  };

  TimingOptions o;
  o.samples = s.samples;
  o.target_sample_ms = s.target_sample_ms;
  MOEJIT_ASSIGN_OR_RETURN(Timing t, time_launches(l.driver(), stream, enqueue, o));

  // Every C row is a (token, k) pair: all of slot 0's must hold finite values now.
  std::vector<u16> out(std::min<std::uint64_t>(c.pairs() * c.out_columns(), 32u << 20));
  MOEJIT_TRY(l.copy_from_backend(out.data(), d_c.data(), out.size() * 2, stream));
  MOEJIT_TRY(l.synchronize(stream));
  const auto nonfinite = std::count_if(out.begin(), out.end(), [](u16 h) { return (h & 0x7f80) == 0x7f80; });

  const CaseBytes bytes = case_bytes(c, touched);
  const double floor = floor_us(bytes, copy_bytes_per_s);
  j["touched_experts"] = touched;
  j["bytes"] = bytes_json(bytes);
  j["timing"] = t.mode;
  if (!t.graph_error.empty()) j["graph_error"] = t.graph_error;
  j["iterations"] = t.iterations;
  j["samples"] = t.sample_us.size();
  j["median_us"] = t.median_us;
  j["min_us"] = t.min_us;
  j["floor_us"] = floor;
  j["achieved_gbs"] = bytes.total() / (t.median_us * 1e-6) / 1e9;
  j["fraction_of_floor"] = fraction_of_floor(floor, t.median_us);
  j["tflops"] = 2.0 * static_cast<double>(c.pairs()) * c.n() * c.k() / (t.median_us * 1e-6) / 1e12;
  j["output_check"] = {{"checked", out.size()}, {"nonfinite", nonfinite}};
  if (nonfinite != 0) return error(Code::internal, "{} of {} outputs are not finite: the kernel left rows unwritten or computed NaN", nonfinite, out.size());
  return j;
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
  const CudaApi& api = l.driver().api();
  // Streams and events need a current context: the primary one, for the whole run (the
  // launcher then finds it current and pushes nothing). Popped before the launcher goes.
  auto primary = l.primary_context();
  if (!primary.ok() || api.CtxPushCurrent(*primary) != CUDA_SUCCESS) {
    std::fprintf(stderr, "bench_gemm: cannot make the primary context current: %s\n",
                 primary.ok() ? "cuCtxPushCurrent failed" : primary.status().message().c_str());
    return kExitNoGpu;
  }
  struct PopContext {
    const CudaApi& api;
    ~PopContext() {
      CUcontext popped = nullptr;
      (void)api.CtxPopCurrent(&popped);
    }
  } pop_context{api};
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
  const std::vector<GemmCase> cases = selected_cases(s);

  // Every kernel first, in parallel, so compiles stay out of the timed region.
  const auto compile_start = Clock::now();
  std::map<std::string, std::future<Result<Resolution>>> pending;
  for (const GemmCase& c : cases) {
    const KernelSpec spec = case_spec(c, l.arch());
    const std::string slug = codegen::spec_slug(spec);
    if (!pending.count(slug)) pending.emplace(slug, (*resolver)->resolve_async(spec));
  }
  Json compile_errors = Json::object();
  for (auto& [slug, f] : pending)
    if (auto r = f.get(); !r.ok()) compile_errors[slug] = r.status().message();
  const ResolverStats stats = (*resolver)->stats();
  j["kernels"] = {{"distinct", pending.size()}, {"compiled", stats.compiles}, {"from_disk", stats.disk_hits},
                  {"wall_s", seconds_since(compile_start)}, {"errors", compile_errors}};
  std::fprintf(stderr, "bench_gemm: %zu kernels ready in %.1f s\n", pending.size(), seconds_since(compile_start));

  j["cases"] = Json::array();
  j["not_applicable"] = not_applicable_json();
  int failed = 0, skipped = 0;
  std::mt19937_64 rng(20261130);
  for (std::size_t i = 0; i < cases.size();) {
    // One weight set serves the run of cases that share model, format and projection.
    std::size_t end = i;
    while (end < cases.size() && cases[end].model == cases[i].model && cases[end].format == cases[i].format &&
           cases[end].projection == cases[i].projection)
      ++end;
    if (seconds_since(start) > s.max_seconds) {
      for (; i < end; ++i) {
        Json cj = case_json(cases[i], case_spec(cases[i], l.arch()));
        cj["skipped"] = fmt::format("time budget of {} s spent", s.max_seconds);
        j["cases"].push_back(cj);
        ++skipped;
      }
      continue;
    }
    auto weights = make_weights(l, st, cases[i], s, rng);
    for (; i < end; ++i) {
      const GemmCase& c = cases[i];
      Result<Json> r = !weights.ok() ? Result<Json>(weights.status())
                       : seconds_since(start) > s.max_seconds
                           ? Result<Json>(Status(Code::unavailable, fmt::format("time budget of {} s spent", s.max_seconds)))
                           : run_case(l, st, **resolver, c, *weights, s, copy->bytes_per_s, rng);
      Json cj;
      if (r.ok()) {
        cj = std::move(r).value();
        std::fprintf(stderr, "  %-15s %-9s %-7s T=%-5u %9.2f us  floor %8.2f us  %5.1f%%  %7.0f GB/s\n",
                     std::string(c.model->name).c_str(), std::string(c.format->name).c_str(),
                     std::string(to_string(c.projection)).c_str(), c.tokens, cj["median_us"].get<double>(),
                     cj["floor_us"].get<double>(), 100 * cj["fraction_of_floor"].get<double>(),
                     cj["achieved_gbs"].get<double>());
      } else {
        cj = case_json(c, case_spec(c, l.arch()));
        const bool budget = r.status().message().starts_with("time budget");
        cj[budget ? "skipped" : "error"] = r.status().message();
        if (budget) ++skipped;
        else ++failed;
        if (!budget)
          std::fprintf(stderr, "  %s %s %s T=%u: %s\n", std::string(c.model->name).c_str(),
                       std::string(c.format->name).c_str(), std::string(to_string(c.projection)).c_str(), c.tokens,
                       r.status().message().c_str());
      }
      j["cases"].push_back(cj);
      j["summary"] = {{"cases", cases.size()}, {"ran", j["cases"].size() - failed - skipped}, {"failed", failed},
                      {"skipped", skipped}, {"wall_s", seconds_since(start)}};
      write_json(s.out, j);  // partial results survive a timeout
    }
  }
  j["summary"] = {{"cases", cases.size()}, {"ran", cases.size() - failed - skipped}, {"failed", failed},
                  {"skipped", skipped}, {"wall_s", seconds_since(start)}};
  if (s.out.empty()) std::cout << j.dump(2) << "\n";
  else write_json(s.out, j);
  return failed ? kExitCaseFailed : 0;
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
  app.add_option("--models", s.models, "only these models (names as in the JSON)")->delimiter(',');
  app.add_option("--formats", s.formats, "only these formats: mxfp4, int4_g128")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  if (s.quick) {
    s.samples = std::min(s.samples, 5);
    s.routings = std::min(s.routings, 4);
  }
  if (dry) return dry_run(s);
  if (probe_only) return probe(s);
  return run(s);
}
