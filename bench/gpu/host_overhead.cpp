#include "bench/gpu/host_overhead.hpp"

#include <moejit/moejit.h>

#include <chrono>
#include <memory>

#include "bench/gpu/device_data.hpp"
#include "bench/gpu/gpu_timer.hpp"
#include "bench/gpu/routing.hpp"
#include "codegen/generate.hpp"
#include "dispatch/grouped_gemm_op.hpp"
#include "moe/align_params.cuh"
#include "runtime/kernel_resolver.hpp"

namespace moejit::bench {

namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// A decode-sized problem: the GPU runs each launch in a few microseconds, so the host's
// enqueue rate is what is measured.
constexpr std::uint32_t kExperts = 8, kN = 256, kK = 256, kTokens = 1, kTopk = 2, kBlock = 16;

Status c_status(moejit_status_t s, const char* call) {
  if (s == MOEJIT_OK) return {};
  return error(Code::internal, "{}: {}", call, moejit_last_error());
}

struct ContextDeleter {
  void operator()(moejit_context_s* c) const { moejit_context_destroy(c); }
};

// The median over `rounds` of the per-call time of `calls` back-to-back `call()`s, the stream
// drained before each round so that the launch queue never fills.
template <typename Call>
Result<double> per_call_us(DeviceLauncher& l, CUstream stream, const OverheadOptions& o, Call&& call) {
  std::vector<double> rounds;
  for (int r = 0; r < o.rounds; ++r) {
    MOEJIT_TRY(l.synchronize(stream));
    const auto t0 = Clock::now();
    for (int i = 0; i < o.calls_per_round; ++i) MOEJIT_TRY(call());
    rounds.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / o.calls_per_round);
  }
  MOEJIT_TRY(l.synchronize(stream));
  return median(rounds);
}

}  // namespace

Result<Json> measure_host_overhead(DeviceLauncher& l, CUstream stream, const OverheadOptions& options,
                                   std::mt19937_64& rng) {
  // A device context through the public API; it works in the primary context, current here.
  moejit_context_options_t co;
  moejit_context_options_init(&co);
  co.backend = MOEJIT_BACKEND_DEVICE;
  co.device_ordinal = l.info().ordinal;
  moejit_context_t raw_context = nullptr;
  MOEJIT_TRY(c_status(moejit_context_create(&co, &raw_context), "moejit_context_create"));
  std::unique_ptr<moejit_context_s, ContextDeleter> context(raw_context);

  // MXFP4 weights from random codes, packed on the device.
  std::uniform_int_distribution<int> code(0, 15), exponent(124, 130);
  std::vector<std::uint8_t> codes(std::uint64_t{kExperts} * kN * kK), scales(std::uint64_t{kExperts} * kN * kK / 32);
  for (auto& c : codes) c = static_cast<std::uint8_t>(code(rng));
  for (auto& s : scales) s = static_cast<std::uint8_t>(exponent(rng));
  moejit_weights_desc_t desc;
  moejit_weights_desc_init(&desc);
  desc.format = MOEJIT_WEIGHT_MXFP4;
  desc.group_size = 32;
  desc.scale_dtype = MOEJIT_DTYPE_E8M0;
  desc.experts = kExperts;
  desc.n = kN;
  desc.k = kK;
  desc.source = MOEJIT_SOURCE_PLAIN_CODES;
  desc.qweight = codes.data();
  desc.scales = scales.data();
  moejit_packed_sizes_t sizes{};
  MOEJIT_TRY(c_status(moejit_packed_weights_size(context.get(), &desc, &sizes), "moejit_packed_weights_size"));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer qweight, DeviceBuffer::allocate(l, sizes.qweight_bytes));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer qscales, DeviceBuffer::allocate(l, sizes.scales_bytes));
  moejit_packed_weights_t packed;
  moejit_packed_weights_init(&packed);
  packed.qweight = qweight.data();
  packed.scales = qscales.data();
  packed.qweight_bytes = sizes.qweight_bytes;
  packed.scales_bytes = sizes.scales_bytes;
  MOEJIT_TRY(c_status(moejit_pack_weights(context.get(), &desc, &packed, stream), "moejit_pack_weights"));

  // One token routed to two experts, in the moe_align layout; activations and outputs.
  const Routing routing = random_routing(rng, kTokens, kExperts, kTopk, kBlock);
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer sorted, upload(l, stream, routing.sorted_token_ids.data(),
                                                      routing.sorted_token_ids.size() * 4, routing.sorted_token_ids.size() * 4));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer expert_ids, upload(l, stream, routing.expert_ids.data(),
                                                          routing.expert_ids.size() * 4, routing.expert_ids.size() * 4));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer post_pad, upload(l, stream, &routing.num_tokens_post_pad, 4, 4));
  const std::vector<u16> a = random_bf16(std::uint64_t{kTokens} * kK, rng);
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_a, upload(l, stream, a.data(), a.size() * 2, a.size() * 2));
  MOEJIT_ASSIGN_OR_RETURN(DeviceBuffer d_c, DeviceBuffer::allocate(l, std::uint64_t{kTokens} * kTopk * kN * 2));

  moejit_grouped_gemm_args_t args;
  moejit_grouped_gemm_args_init(&args);
  args.weights = &packed;
  args.m = static_cast<std::int32_t>(kTokens * kTopk);
  args.a = d_a.data();
  args.lda = kK;
  args.c = d_c.data();
  args.ldc = kN;
  args.sorted_token_ids = sorted.as<const std::int32_t>();
  args.expert_ids = expert_ids.as<const std::int32_t>();
  args.num_tokens_post_pad = post_pad.as<const std::int32_t>();
  args.block_size = kBlock;
  args.a_row_divisor = kTopk;
  // The first call compiles (or loads) the kernel; every later one is a memory hit.
  MOEJIT_TRY(c_status(moejit_grouped_gemm(context.get(), &args, stream), "moejit_grouped_gemm"));
  MOEJIT_TRY(l.synchronize(stream));

  // The same launch without moejit: the kernel's CUBIN loaded by hand and cuLaunchKernelEx.
  dispatch::GroupedGemmRequest request;
  request.weights = {WeightFormat::mxfp4, 32, DType::e8m0, kExperts, kN, kK, false, packed.qweight, packed.scales,
                     nullptr, nullptr};
  request.params.m = args.m;
  request.params.a = args.a;
  request.params.lda = args.lda;
  request.params.c = args.c;
  request.params.ldc = args.ldc;
  request.params.sorted_token_ids = args.sorted_token_ids;
  request.params.expert_ids = args.expert_ids;
  request.params.num_tokens_post_pad = args.num_tokens_post_pad;
  request.params.a_row_divisor = args.a_row_divisor;
  request.block_size = kBlock;
  MOEJIT_ASSIGN_OR_RETURN(dispatch::PreparedGemm g, dispatch::prepare_grouped_gemm(request, l.arch(), Backend::device, l.sm_count()));
  MOEJIT_ASSIGN_OR_RETURN(auto resolver_options, KernelResolver::Options::from_environment());
  MOEJIT_ASSIGN_OR_RETURN(auto resolver, KernelResolver::create(std::move(resolver_options)));
  MOEJIT_ASSIGN_OR_RETURN(Resolution resolved, resolver->resolve(g.spec));
  const CudaApi& api = l.driver().api();
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  if (api.ModuleLoadData(&module, resolved.kernel->binary.data()) != CUDA_SUCCESS)
    return error(Code::internal, "cuModuleLoadData failed for {}", codegen::spec_slug(g.spec));
  struct Unload {
    const CudaApi& api;
    CUmodule m;
    ~Unload() { api.ModuleUnload(m); }
  } unload{api, module};
  if (api.ModuleGetFunction(&function, module, resolved.kernel->meta.kernel_name.c_str()) != CUDA_SUCCESS)
    return error(Code::internal, "cuModuleGetFunction({}) failed", resolved.kernel->meta.kernel_name);
  const LaunchDims dims = launch_dims(*resolved.kernel, g.grid);
  if (dims.dynamic_shared_bytes > 48 * 1024 &&
      api.FuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                           static_cast<int>(dims.dynamic_shared_bytes)) != CUDA_SUCCESS)
    return error(Code::internal, "cuFuncSetAttribute(max dynamic shared memory) failed");
  if (api.LaunchKernelEx == nullptr) return error(Code::unsupported, "the driver has no cuLaunchKernelEx (before 11.8)");
  CUlaunchConfig config{};
  config.gridDimX = dims.grid[0];
  config.gridDimY = dims.grid[1];
  config.gridDimZ = dims.grid[2];
  config.blockDimX = dims.block[0];
  config.blockDimY = dims.block[1];
  config.blockDimZ = dims.block[2];
  config.sharedMemBytes = dims.dynamic_shared_bytes;
  config.hStream = stream;
  void* kernel_args[] = {&g.params};

  OverheadOptions warm = options;
  warm.rounds = 2;
  auto moejit_call = [&] { return c_status(moejit_grouped_gemm(context.get(), &args, stream), "moejit_grouped_gemm"); };
  auto raw_launch = [&]() -> Status {
    if (api.LaunchKernelEx(&config, function, kernel_args, nullptr) != CUDA_SUCCESS)
      return error(Code::internal, "cuLaunchKernelEx failed");
    return {};
  };
  MOEJIT_TRY(per_call_us(l, stream, warm, raw_launch).status());
  MOEJIT_TRY(per_call_us(l, stream, warm, moejit_call).status());
  MOEJIT_ASSIGN_OR_RETURN(double raw_us, per_call_us(l, stream, options, raw_launch));
  MOEJIT_ASSIGN_OR_RETURN(double moejit_us, per_call_us(l, stream, options, moejit_call));

  moejit_stats_t stats;
  moejit_stats_init(&stats);
  MOEJIT_TRY(c_status(moejit_get_stats(context.get(), &stats), "moejit_get_stats"));
  return Json{{"call", "moejit_grouped_gemm"},
              {"problem", {{"experts", kExperts}, {"n", kN}, {"k", kK}, {"tokens", kTokens}, {"topk", kTopk},
                           {"format", "mxfp4"}, {"layout", "indexed"}}},
              {"kernel", codegen::spec_slug(g.spec)},
              {"rounds", options.rounds},
              {"calls_per_round", options.calls_per_round},
              {"moejit_call_us", moejit_us},
              {"raw_launch_us", raw_us},
              {"overhead_us", moejit_us - raw_us},
              {"memory_hits", stats.memory_hits},
              {"compiles", stats.compiles}};
}

}  // namespace moejit::bench
