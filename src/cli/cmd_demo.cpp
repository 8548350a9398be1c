// `moejit demo [--model CONFIG.json] [--tokens T] [--backend auto|device|host] [--act e4m3|e2m1]`: one fused MoE
// layer of a real model shape on random weights and tokens, checked against an fp64 reference
// computed here, with its time and what the kernel store did. The README's main job.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <tuple>

#include <unistd.h>

#include "cli/commands.hpp"
#include "cli/model_options.hpp"
#include "common/numeric.cuh"
#include "dispatch/fused_moe_op.hpp"
#include "dispatch/weight_pack_op.hpp"
#include "quant/formats.hpp"
#include "runtime/device_buffer.hpp"
#include "runtime/device_launcher.hpp"
#include "host/host_launcher.hpp"
#include "spec/spec_fields.hpp"
#include "support/env.hpp"

namespace moejit::cli {
namespace {

constexpr const char* kDefaultModel = "bench/models/qwen3-30b-a3b.json";
constexpr std::uint32_t kHostExperts = 16;  // the host backend runs a layer this narrow
// The layer's relative error with MXFP4 activations, against fp64 on the unquantized hidden
// states: 0.22 (Qwen3-30B-A3B) and 0.21 (gpt-oss-120b) measured on the host backend with 3-4
// tokens, both GEMMs' inputs quantized (W4A8: 0.05, W4A16: 0.002).
constexpr double kE2m1Tolerance = 0.3;
// The fp64 reference's work bound, in multiply-adds (a few seconds on one core).
constexpr double kReferenceMacs = 4e9;

struct DemoArgs {
  std::string model = kDefaultModel, backend = "auto", weights, scale, act, act_scale, usage_manifest;
  std::int32_t tokens = 4;
  std::uint32_t iterations = 20;
};

// Allocations in the backend's memory, freed with the demo.
class Memory {
 public:
  Memory(Launcher& launcher, DeviceLauncher* device) : launcher_(launcher), device_(device) {}
  Result<void*> allocate(std::size_t bytes) {
    bytes = std::max<std::size_t>(bytes, 16);
    if (device_ != nullptr) {
      MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::allocate(*device_, bytes));
      device_blocks_.push_back(std::move(b));
      return device_blocks_.back().data();
    }
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (p == nullptr) return error(Code::unavailable, "out of host memory allocating {} bytes", bytes);
    host_blocks_.emplace_back(p, std::free);
    return p;
  }
  Result<void*> upload(const void* src, std::size_t bytes) {
    MOEJIT_ASSIGN_OR_RETURN(void* dst, allocate(bytes));
    MOEJIT_TRY(launcher_.copy_to_backend(dst, src, bytes, nullptr));
    MOEJIT_TRY(launcher_.synchronize(nullptr));
    return dst;
  }

 private:
  Launcher& launcher_;
  DeviceLauncher* device_;
  std::vector<DeviceBuffer> device_blocks_;
  std::vector<std::unique_ptr<void, decltype(&std::free)>> host_blocks_;
};

// Random weights in the plain-codes layout, and their values in double for the reference.
struct DemoWeights {
  std::uint32_t experts, n, k, group;
  WeightChoice w;
  std::vector<u8> codes, zeros;
  std::vector<u16> scales;  // raw bits per group (E8M0 byte or bf16/f16)
  std::vector<u8> scale_bytes;  // as the plain-codes source stores them

  double value(std::uint32_t e, std::uint32_t row, std::uint32_t col) const {
    const std::size_t g = (static_cast<std::size_t>(e) * n + row) * (k / group) + col / group;
    const u8 q = codes[(static_cast<std::size_t>(e) * n + row) * k + col];
    const double scale = quant::decode_scale(w.scale, scales[g]);
    if (w.format == WeightFormat::mxfp4) return quant::e2m1_decode(q) * scale;
    const int zero = w.format == WeightFormat::int4_asym ? zeros[g] : 8;
    return (static_cast<int>(q) - zero) * scale;
  }
};

DemoWeights random_weights(std::mt19937& rng, const WeightChoice& w, std::uint32_t experts, std::uint32_t n,
                           std::uint32_t k) {
  DemoWeights d{experts, n, k, w.group_size ? w.group_size : k, w, {}, {}, {}, {}};
  const std::size_t groups = static_cast<std::size_t>(experts) * n * (k / d.group);
  d.codes.resize(static_cast<std::size_t>(experts) * n * k);
  for (auto& c : d.codes) c = static_cast<u8>(rng() & 15);
  d.scales.resize(groups);
  // Values near 1/sqrt(k), so activations stay O(1) through both projections.
  const double target = 1.0 / std::sqrt(static_cast<double>(k));
  for (auto& s : d.scales) {
    const double v = target * std::ldexp(1.0, -static_cast<int>(rng() % 2)) * (w.format == WeightFormat::mxfp4 ? 0.5 : 0.3);
    if (w.format == WeightFormat::mxfp4) s = static_cast<u16>(127 + std::ilogb(v));
    else s = w.scale == DType::bf16 ? prim::twin::f32_to_bf16(static_cast<float>(v)) : prim::twin::f32_to_f16(static_cast<float>(v));
  }
  if (w.format == WeightFormat::int4_asym) {
    d.zeros.resize(groups);
    for (auto& z : d.zeros) z = static_cast<u8>(6 + rng() % 5);
  }
  if (w.scale == DType::e8m0) {
    d.scale_bytes.resize(groups);
    for (std::size_t i = 0; i < groups; ++i) d.scale_bytes[i] = static_cast<u8>(d.scales[i]);
  } else {
    d.scale_bytes.resize(groups * 2);
    std::memcpy(d.scale_bytes.data(), d.scales.data(), groups * 2);
  }
  return d;
}

// Packs into the backend's memory; returns the packed view.
Result<dispatch::PackedWeightsView> pack(Launcher& launcher, Memory& memory, const DemoWeights& d, quant::RowOrder rows,
                                         PackedOrder order) {
  dispatch::WeightSourceDesc src;
  src.format = d.w.format;
  src.group_size = d.group;
  src.scale = d.w.scale;
  src.experts = d.experts;
  src.n = d.n;
  src.k = d.k;
  src.source = dispatch::WeightSource::plain_codes;
  src.rows = rows;
  src.qweight = d.codes.data();
  src.scales = d.scale_bytes.data();
  src.zeros = d.zeros.empty() ? nullptr : d.zeros.data();
  src.order = order;
  MOEJIT_ASSIGN_OR_RETURN(dispatch::PackedSizes sizes, dispatch::packed_sizes(src));
  dispatch::PackedDestination dest;
  MOEJIT_ASSIGN_OR_RETURN(dest.qweight, memory.allocate(sizes.qweight));
  MOEJIT_ASSIGN_OR_RETURN(dest.scales, memory.allocate(sizes.scales));
  if (sizes.zeros) {
    MOEJIT_ASSIGN_OR_RETURN(dest.zeros, memory.allocate(sizes.zeros));
  }
  MOEJIT_TRY(dispatch::pack_weights(launcher, src, dest, nullptr));
  return dispatch::PackedWeightsView{d.w.format, d.group, d.w.scale, d.experts, d.n, d.k, rows != quant::RowOrder::plain,
                                     dest.qweight, dest.scales, dest.zeros, nullptr, order};
}

// The layer's weight shapes as the demo builds them, checked before anything is allocated: a
// config with huge dimensions is an error naming them, not an allocation failure or an OOM kill.
Status check_demo_layer(const std::string& model, std::uint32_t experts, std::uint32_t H, std::uint32_t I,
                        std::int32_t tokens, const WeightChoice& w, bool host_backend, bool two_packings) {
  const std::string owner = fmt::format("--model {} (hidden size {}, expert intermediate size {}): ", model, H, I);
  if (I > kMaxPackedExtent / 2)
    return error(Code::invalid_argument,
                 "{}the gate/up weights' N = 2 x {} exceeds {} (the largest packed extent); expected an intermediate "
                 "size of at most {}",
                 owner, I, kMaxPackedExtent, kMaxPackedExtent / 2);
  for (auto [name, n, k] : {std::tuple{"w13.", 2 * I, H}, std::tuple{"w2.", H, I}})
    if (Status s = quant::check_packed_extents(experts, n, k, name); !s.ok())
      return error(s.code(), "{}{}", owner, s.message());
  // One byte per weight code (the reference reads them), 4-6 bytes of scales and zero points per
  // group, and on the host backend the packed copies (half a byte per weight, once per
  // activation order the demo runs); per token and hidden element, the 16-bit input, its value
  // in double and two f32 outputs here, and on the host backend its input and output copies.
  const double weights = 3.0 * experts * H * I;
  const double groups = weights / (w.group_size ? w.group_size : std::min(H, I));
  const double packings = host_backend ? (two_packings ? 2.0 : 1.0) : 0.0;
  const double activations = static_cast<double>(tokens) * H * (host_backend ? 24.0 : 18.0);
  const double need = weights * (1.0 + 0.5 * packings) + groups * (5.0 + 2.0 * packings) + activations;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && need > static_cast<double>(pages) * static_cast<double>(page))
    return error(Code::invalid_argument,
                 "{}the demo's {} experts and {} tokens need about {:.1f} GiB of host memory; this machine has "
                 "{:.1f} GiB (expected a model whose layer fits)",
                 owner, experts, tokens, need / (1ull << 30), static_cast<double>(pages) * static_cast<double>(page) / (1ull << 30));
  return ok_status();
}

double activation(Epilogue a, double gate, double up) {
  if (a == Epilogue::silu_and_mul) return gate / (1.0 + std::exp(-gate)) * up;
  const double g = std::min(gate, 7.0), u = std::clamp(up, -7.0, 7.0);
  return g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
}

Status run_demo(const GlobalOptions& g, const DemoArgs& a, Json& doc) {
  dispatch::MoeLayerShape shape;
  // The error_code form: a path the system cannot even look up (too long, no permission) is an
  // error for --model, not an exception.
  std::error_code exists_error;
  if (std::filesystem::exists(a.model, exists_error)) {
    MOEJIT_ASSIGN_OR_RETURN(shape, dispatch::read_hf_config(a.model));
  } else if (exists_error) {
    return error(Code::io_error, "--model {}: cannot look it up: {}", a.model, exists_error.message());
  } else if (a.model == kDefaultModel) {
    shape = {"qwen3_moe", 2048, 768, 128, 8, Epilogue::silu_and_mul, {}};  // the default file's values
  } else {
    return error(Code::not_found, "--model {}: no such file", a.model);
  }
  MOEJIT_ASSIGN_OR_RETURN(WeightChoice w, choose_weights(a.weights, a.scale, shape.quantization, a.model));
  const std::string weights_name = dispatch::weights_spelling(w.format, w.group_size);
  MOEJIT_ASSIGN_OR_RETURN(ActChoice act_choice, choose_act(a.act, a.act_scale, w, shape.quantization, a.model));
  const DType act = act_choice.act;
  const ActScale act_scale = act_choice.scale;
  // W4A8 and W4A4 take the same bf16 hidden states, which the layer quantizes; each is compared
  // with the W4A16 layer on the same weights and tokens.
  const bool quantized = act == DType::e4m3 || act == DType::e2m1;
  const DType hidden_dtype = quantized ? DType::bf16 : act;
  const char* act_name = act == DType::e2m1 ? "W4A4" : "W4A8";
  if (act == DType::e2m1 && w.format != WeightFormat::mxfp4)
    return error(Code::invalid_argument, "--act e2m1 with weights {}: expected mxfp4 weights (W4A4 is MXFP4 x MXFP4)",
                 weights_name);

  // The backend.
  std::unique_ptr<DeviceLauncher> device;
  std::unique_ptr<Launcher> launcher;
  std::string why_host;
  if (a.backend == "device" || a.backend == "auto") {
    auto d = DeviceLauncher::create(0);
    if (d.ok()) device = std::move(d).value();
    else if (a.backend == "device") return d.status();
    else why_host = d.status().message();
  } else if (a.backend != "host") {
    return error(Code::invalid_argument, "--backend {}: expected auto, device or host", a.backend);
  }
  Launcher* run_on = device.get();
  if (run_on == nullptr) {
    // MXFP4 activations run the block-scaled mma of sm_120a, which the host executor emulates.
    launcher = act == DType::e2m1 ? std::make_unique<HostLauncher>(Arch::sm_120a) : std::make_unique<HostLauncher>();
    run_on = launcher.get();
  }
  const std::uint32_t experts = run_on->backend() == Backend::host ? std::min(shape.experts, kHostExperts) : shape.experts;
  const std::uint32_t topk = std::min(shape.topk, experts);
  MOEJIT_TRY(check_demo_layer(a.model, experts, shape.hidden, shape.intermediate, a.tokens, w,
                              run_on->backend() == Backend::host, quantized));

  MOEJIT_ASSIGN_OR_RETURN(KernelResolver::Options ro, resolver_options(g));
  MOEJIT_ASSIGN_OR_RETURN(auto resolver, KernelResolver::create(std::move(ro)));
  dispatch::SpecObserver observer(a.usage_manifest, false);
  std::atomic<std::uint64_t> launches{0};
  MOEJIT_ASSIGN_OR_RETURN(const bool check_inputs, env_bool("MOEJIT_CHECK_INPUTS", false));
  dispatch::OpContext ops{*resolver, *run_on, observer, launches, check_inputs};
  Memory memory(*run_on, device.get());

  std::mt19937 rng(std::random_device{}());
  const std::uint32_t H = shape.hidden, I = shape.intermediate;
  DemoWeights w13 = random_weights(rng, w, experts, 2 * I, H), w2 = random_weights(rng, w, experts, H, I);
  const PackedOrder order16 = quant::packed_order_for(hidden_dtype, w.format);  // the 16-bit run's weights
  MOEJIT_ASSIGN_OR_RETURN(auto p13, pack(*run_on, memory, w13, quant::RowOrder::concatenated, order16));
  MOEJIT_ASSIGN_OR_RETURN(auto p2, pack(*run_on, memory, w2, quant::RowOrder::plain, order16));

  // Tokens and routing.
  const std::int32_t T = a.tokens;
  std::vector<u16> hidden(static_cast<std::size_t>(T) * H);
  std::vector<double> x(hidden.size());
  std::normal_distribution<float> xdist(0.0f, 1.0f);
  for (std::size_t i = 0; i < hidden.size(); ++i) {
    const float v = xdist(rng);
    hidden[i] = hidden_dtype == DType::bf16 ? prim::twin::f32_to_bf16(v) : prim::twin::f32_to_f16(v);
    x[i] = hidden_dtype == DType::bf16 ? prim::twin::bf16_to_f32(hidden[i]) : prim::twin::f16_to_f32(hidden[i]);
  }
  std::vector<i32> ids(static_cast<std::size_t>(T) * topk);
  std::vector<float> weights(ids.size());
  std::vector<i32> order(experts);
  std::iota(order.begin(), order.end(), 0);
  std::uniform_real_distribution<float> wd(0.1f, 1.0f);
  for (std::int32_t t = 0; t < T; ++t) {
    std::shuffle(order.begin(), order.end(), rng);
    float total = 0;
    for (std::uint32_t k = 0; k < topk; ++k) total += weights[t * topk + k] = wd(rng);
    for (std::uint32_t k = 0; k < topk; ++k) {
      ids[t * topk + k] = order[k];
      weights[t * topk + k] /= total;
    }
  }

  dispatch::FusedMoeRequest r;
  r.w13 = p13;
  r.w2 = p2;
  r.act = hidden_dtype;
  r.out = DType::f32;
  r.activation = shape.activation;
  r.tokens = T;
  r.topk = topk;
  MOEJIT_ASSIGN_OR_RETURN(r.hidden, memory.upload(hidden.data(), hidden.size() * 2));
  MOEJIT_ASSIGN_OR_RETURN(void* ids_mem, memory.upload(ids.data(), ids.size() * 4));
  MOEJIT_ASSIGN_OR_RETURN(void* weights_mem, memory.upload(weights.data(), weights.size() * 4));
  r.topk_ids = static_cast<const i32*>(ids_mem);
  r.topk_weights = static_cast<const float*>(weights_mem);
  MOEJIT_ASSIGN_OR_RETURN(r.output, memory.allocate(static_cast<std::size_t>(T) * H * 4));

  // First call resolves (memory, store or compile) and runs; then timed calls.
  struct LayerRun {
    double first_ms = 0, layer_ms = 0;
    std::uint32_t iterations = 1;
    std::vector<float> out;
  };
  auto run_layer = [&](dispatch::FusedMoeRequest req) -> Result<LayerRun> {
    MOEJIT_ASSIGN_OR_RETURN(req.workspace_bytes, dispatch::fused_moe_workspace(req, run_on->arch(), run_on->sm_count()));
    MOEJIT_ASSIGN_OR_RETURN(req.workspace, memory.allocate(req.workspace_bytes));
    LayerRun run;
    auto t0 = std::chrono::steady_clock::now();
    MOEJIT_TRY(dispatch::run_fused_moe(ops, req, nullptr));
    MOEJIT_TRY(run_on->synchronize(nullptr));
    run.first_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    run.iterations = run_on->backend() == Backend::host ? 1 : std::max(a.iterations, 1u);
    t0 = std::chrono::steady_clock::now();
    for (std::uint32_t i = 0; i < run.iterations; ++i) MOEJIT_TRY(dispatch::run_fused_moe(ops, req, nullptr));
    MOEJIT_TRY(run_on->synchronize(nullptr));
    run.layer_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / run.iterations;
    run.out.resize(static_cast<std::size_t>(T) * H);
    MOEJIT_TRY(run_on->copy_from_backend(run.out.data(), req.output, run.out.size() * 4, nullptr));
    MOEJIT_TRY(run_on->synchronize(nullptr));
    return run;
  };
  MOEJIT_ASSIGN_OR_RETURN(LayerRun w4a16, run_layer(r));
  LayerRun w4a8;  // W4A8 or W4A4: the run with quantized activations
  if (quantized) {
    dispatch::FusedMoeRequest q = r;
    const PackedOrder packed_order = quant::packed_order_for(act, w.format);
    MOEJIT_ASSIGN_OR_RETURN(q.w13, pack(*run_on, memory, w13, quant::RowOrder::concatenated, packed_order));
    MOEJIT_ASSIGN_OR_RETURN(q.w2, pack(*run_on, memory, w2, quant::RowOrder::plain, packed_order));
    q.act_scale = act_scale;
    MOEJIT_ASSIGN_OR_RETURN(w4a8, run_layer(q));
  }

  // fp64 reference (the kernels round the intermediate and the pair outputs to 16 bits; W4A8 and
  // W4A4 also quantize the hidden states and the intermediate to e4m3 / e2m1: what the narrow
  // activations cost end to end).
  // Past kReferenceMacs multiply-adds (seconds of fp64 on one core) the reference covers evenly
  // spaced tokens only: a large layer at 8192 tokens would otherwise take an hour to check.
  const double macs_per_token = 3.0 * topk * H * I;
  const std::int32_t checked = static_cast<std::int32_t>(
      std::clamp<double>(std::floor(kReferenceMacs / macs_per_token), 1.0, static_cast<double>(T)));
  double err2 = 0, ref2 = 0, fp8_err2 = 0;
  for (std::int32_t j = 0; j < checked; ++j) {
    const std::int32_t t = static_cast<std::int32_t>(static_cast<std::int64_t>(j) * T / checked);
    const std::size_t row = static_cast<std::size_t>(t) * H;
    std::vector<double> want(H, 0.0);
    for (std::uint32_t k = 0; k < topk; ++k) {
      const std::uint32_t e = static_cast<std::uint32_t>(ids[t * topk + k]);
      std::vector<double> inter(I);
      for (std::uint32_t i = 0; i < I; ++i) {
        double gate = 0, up = 0;
        for (std::uint32_t h = 0; h < H; ++h) {
          gate += x[row + h] * w13.value(e, i, h);
          up += x[row + h] * w13.value(e, I + i, h);
        }
        inter[i] = activation(shape.activation, gate, up);
      }
      for (std::uint32_t h = 0; h < H; ++h) {
        double s = 0;
        for (std::uint32_t i = 0; i < I; ++i) s += inter[i] * w2.value(e, h, i);
        want[h] += weights[t * topk + k] * s;
      }
    }
    for (std::uint32_t h = 0; h < H; ++h) {
      const double got = w4a16.out[row + h];
      if (!std::isfinite(got)) return error(Code::internal, "output[{}][{}] = {} is not finite", t, h, got);
      err2 += (got - want[h]) * (got - want[h]);
      ref2 += want[h] * want[h];
      if (quantized) {
        const double got8 = w4a8.out[row + h];
        if (!std::isfinite(got8))
          return error(Code::internal, "{} output[{}][{}] = {} is not finite", act_name, t, h, got8);
        fp8_err2 += (got8 - want[h]) * (got8 - want[h]);
      }
    }
  }
  const double rel = std::sqrt(err2 / std::max(ref2, 1e-300));
  const double rel8 = std::sqrt(fp8_err2 / std::max(ref2, 1e-300));
  const auto stats = resolver->stats();
  doc["model"] = a.model;
  doc["model_type"] = shape.model_type;
  doc["hidden"] = H;
  doc["intermediate"] = I;
  doc["experts"] = shape.experts;
  doc["experts_run"] = experts;
  if (experts != shape.experts)
    doc["note"] = fmt::format("the host backend runs {} of the {} experts so the layer finishes quickly", experts,
                              shape.experts);
  if (!why_host.empty()) doc["why_host"] = why_host;
  doc["topk"] = topk;
  doc["tokens"] = T;
  doc["reference_tokens"] = checked;
  doc["weights"] = weights_name;
  doc["weight_scale"] = to_string(w.scale);
  doc["backend"] = to_string(run_on->backend());
  doc["arch"] = to_string(run_on->arch());
  doc["act"] = to_string(act);
  // FP8 activations cost a few percent of relative error by themselves (e4m3 keeps 3 mantissa
  // bits), MXFP4 ones over ten (e2m1 keeps 1, and its 32-element blocks share a power-of-two
  // scale); the W4A16 layer on the same data is the baseline.
  const double tolerance = act == DType::e2m1 ? kE2m1Tolerance : act == DType::e4m3 ? 0.1 : 1e-2;
  const double error_of_run = quantized ? rel8 : rel;
  doc["relative_error"] = error_of_run;
  doc["tolerance"] = tolerance;
  doc["ok"] = error_of_run < tolerance && rel < 1e-2;
  const LayerRun& main_run = quantized ? w4a8 : w4a16;
  doc["first_call_ms"] = main_run.first_ms;
  doc["layer_ms"] = main_run.layer_ms;
  doc["iterations"] = main_run.iterations;
  if (quantized) {
    doc["act_scale"] = to_string(act_scale);
    doc["w4a16"] = {{"relative_error", rel}, {"layer_ms", w4a16.layer_ms}, {"first_call_ms", w4a16.first_ms}};
  }
  doc["kernels_compiled"] = stats.compiles;
  doc["kernels_from_disk"] = stats.disk_hits;
  doc["compile_ms"] = stats.compile_ms;
  doc["store"] = resolver->store().options().dir;
  if (rel >= 1e-2) return error(Code::internal, "relative error {:.3e} against the fp64 reference exceeds 1e-2", rel);
  if (error_of_run >= tolerance)
    return error(Code::internal, "{} relative error {:.3e} against the fp64 reference exceeds {}", act_name,
                 error_of_run, tolerance);
  return {};
}

}  // namespace

Command add_demo_command(CLI::App& app, const GlobalOptions& g) {
  auto* cmd = app.add_subcommand("demo", "Run one fused MoE layer of a real model shape and check it");
  auto a = std::make_shared<DemoArgs>();
  cmd->add_option("--model", a->model, "Hugging Face config.json (default: bench/models/qwen3-30b-a3b.json)");
  // Bounded so that the demo's host copies and fp64 reference stay within a workstation's memory.
  cmd->add_option("--tokens", a->tokens, "Tokens in the batch (default 4)")->check(CLI::Range(1, 8192));
  cmd->add_option("--backend", a->backend, "auto (default), device or host");
  cmd->add_option("--weights", a->weights,
                  std::string("Weight format: ") + std::string(weights_help()) +
                      " (default: the config's quantization_config, else mxfp4)");
  cmd->add_option("--scale", a->scale, "INT4 scale dtype: bf16 (default) or f16");
  cmd->add_option("--act", a->act,
                  "Activation dtype: bf16 (default), f16, e4m3 (W4A8) or e2m1 (W4A4, MXFP4 weights, sm_120a/sm_121a; "
                  "the host backend runs the sm_120a kernels): quantized from bf16 hidden states by the layer, "
                  "reported beside W4A16 on the same data");
  cmd->add_option("--act-scale", a->act_scale,
                  "With --act e4m3: token (default) or block128 activation scales; with e2m1: block32 (E8M0)");
  cmd->add_option("--iterations", a->iterations, "Timed calls on the device (default 20)")
      ->check(CLI::Range(1u, 100000u));
  cmd->add_option("--usage-manifest", a->usage_manifest,
                  "Append the kernels the demo uses to this file, as a context's usage_manifest does (for warmup "
                  "--from-usage)");
  return {cmd, [&g, a]() -> int {
    Json doc;
    Status s = run_demo(g, *a, doc);
    if (!s.ok()) return fail(g, s);
    return print(g, doc);
  }};
}

}  // namespace moejit::cli
