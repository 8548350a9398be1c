// The C ABI (include/moejit/moejit.h): contexts, weight packing, the grouped GEMM and the fused
// MoE layer on the host backend against the fp64 reference, warm-up without a GPU, the usage
// manifest, statistics, and bad input naming the argument.

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>

#include "common/numeric.cuh"
#include "compile/nvrtc_library.hpp"
#include "dispatch/spec_observer.hpp"
#include "moejit/moejit.h"
#include "quant/engine_layouts.hpp"
#include "reference/compare.hpp"
#include "reference/quantize.hpp"
#include "reference/reference.hpp"
#include "c_api_helpers.hpp"
#include "host_test_support.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;

TEST_CASE("C ABI: AUTO uses the host backend when no GPU is usable and says which") {
  TempDir dir;
  Context c(dir, MOEJIT_BACKEND_AUTO);
  moejit_backend_t backend;
  const char* arch = nullptr;
  REQUIRE(moejit_context_backend(c.ctx, &backend, &arch) == MOEJIT_OK);
  if (backend == MOEJIT_BACKEND_DEVICE) {
    MESSAGE("a GPU is usable here: AUTO picked the device (" << arch << ")");
  } else {
    CHECK(backend == MOEJIT_BACKEND_HOST);
  }
  REQUIRE(arch != nullptr);
  CHECK(std::string(arch).starts_with("sm_"));
}

TEST_CASE("C ABI: AUTO falls back to the host only without a driver or device, never past a GPU it cannot use") {
  TempDir dir;
  const std::filesystem::path driver =
      std::filesystem::path(MOEJIT_CLI).parent_path() / "bench" / "overhead" / "libmoejit-null-cuda.so";
  // (An INFO here would end with the lambda: the checks below print the program's output.)
  auto run = [&](std::map<std::string, std::string> env, bool prepare = false) {
    std::vector<std::string> argv = {MOEJIT_BACKEND_AUTO_PROGRAM, dir / "store"};
    if (prepare) argv.push_back("prepare");
    return run_process(argv, env);
  };
  // No driver at all: the host backend, with a warning that says why.
  ProcessResult r = run({{"MOEJIT_CUDA_LIBRARY", dir / "no-such-libcuda.so"}});
  CHECK_MESSAGE(r.exit_code == 0, "stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.out.starts_with("backend=host arch=sm_"));
  CHECK(r.err.find("no CUDA driver or device") != std::string::npos);
  if (!std::filesystem::exists(driver)) {
    MESSAGE("skipped the device cases: " << driver.string() << " is not built (benchmarks off?)");
    return;
  }
  // A supported device (the null driver's sm_90): the device backend.
  r = run({{"MOEJIT_CUDA_LIBRARY", driver}});
  CHECK_MESSAGE(r.exit_code == 0, "stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.out == "backend=device arch=sm_90a\n");
  // moejit_prepare through the device path: every kernel of a layer compiled and loaded (the
  // null driver's cuModuleLoadData accepts the CUBINs; a GPU run is in the device suites).
  if (NvrtcLibrary::get().ok()) {
    r = run({{"MOEJIT_CUDA_LIBRARY", driver}}, true);
    CHECK_MESSAGE(r.exit_code == 0, "stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.out.find("prepared=") != std::string::npos);
    CHECK(r.out.find("prepared=0") == std::string::npos);
  }
  // A device with no moejit target: an error naming its compute capability, not the host
  // backend reading the caller's device pointers.
  for (const char* cc : {"7.5", "13.7"}) {
    INFO("compute capability " << std::string(cc));
    r = run({{"MOEJIT_CUDA_LIBRARY", driver}, {"MOEJIT_NULL_CUDA_CC", cc}});
    CHECK_MESSAGE(r.exit_code == 1, "stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.out.starts_with("error=unsupported "));
    CHECK(r.out.find(std::string("compute capability ") + cc) != std::string::npos);
  }
}

TEST_CASE("C ABI: fused MoE with gpt-oss SwiGLU, biases and expert parallelism matches the fp64 reference") {
  TempDir dir;
  Context c(dir);
  std::mt19937 rng(std::random_device{}());
  // 8 global experts, this rank holds 6 of them (ids 1..6 -> local 0..5).
  constexpr std::uint32_t H = 128, I = 64, local = 6, global = 8, topk = 3;
  constexpr std::int32_t T = 7;
  VllmWeights w13 = vllm_weights(rng, local, 2 * I, H), w2 = vllm_weights(rng, local, H, I);
  std::normal_distribution<float> bdist(0.0f, 0.2f);
  std::vector<float> b13(local * 2 * I), b2(local * H);
  for (auto& v : b13) v = bdist(rng);
  for (auto& v : b2) v = bdist(rng);
  // gpt-oss checkpoints interleave gate (even rows) and up (odd rows); the reference reads
  // concatenated rows, so the logical copy is reordered.
  auto p13 = pack(c.ctx, vllm_desc(w13, MOEJIT_ROWS_INTERLEAVED, b13.data()));
  auto p2 = pack(c.ctx, vllm_desc(w2, MOEJIT_ROWS_PLAIN, b2.data()));

  std::vector<i32> map(global, -1);
  for (std::uint32_t e = 1; e <= local; ++e) map[e] = static_cast<i32>(e - 1);
  std::vector<i32> ids(T * topk);
  std::vector<float> tw(T * topk);
  std::vector<i32> choice(global);
  std::iota(choice.begin(), choice.end(), 0);
  std::uniform_real_distribution<float> wdist(0.1f, 1.0f);
  for (std::int32_t t = 0; t < T; ++t) {
    std::shuffle(choice.begin(), choice.end(), rng);
    for (std::uint32_t k = 0; k < topk; ++k) {
      ids[t * topk + k] = choice[k];
      tw[t * topk + k] = wdist(rng);
    }
  }
  Buffer hidden(T * H * 2), output(T * H * 2);
  const std::vector<double> x = random_activations(hidden.data, T * H, DType::bf16, rng);

  moejit_fused_moe_args_t a;
  moejit_fused_moe_args_init(&a);
  a.w13 = &p13->w;
  a.w2 = &p2->w;
  a.activation = MOEJIT_EPILOGUE_SWIGLU_OAI;
  a.tokens = T;
  a.topk = topk;
  a.global_experts = global;
  a.hidden = hidden.data;
  a.topk_ids = ids.data();
  a.topk_weights = tw.data();
  a.expert_map = map.data();
  a.output = output.data;
  std::uint64_t bytes = 0;
  REQUIRE_MESSAGE(moejit_fused_moe_workspace_size(c.ctx, &a, &bytes) == MOEJIT_OK, std::string(moejit_last_error()));
  Buffer workspace(bytes);
  a.workspace = workspace.data;
  a.workspace_bytes = bytes;

  // Without the map, ids up to 7 would index 6 experts' weights: refused, naming the argument.
  a.expert_map = nullptr;
  CHECK(moejit_fused_moe(c.ctx, &a, nullptr) == MOEJIT_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(moejit_last_error()).find("global_experts") != std::string::npos);
  a.expert_map = map.data();
  // The workspace is sized from shapes alone, at start-up, before any data exists.
  {
    moejit_fused_moe_args_t shapes = a;
    shapes.hidden = shapes.output = nullptr;
    shapes.topk_ids = nullptr;
    shapes.topk_weights = nullptr;
    shapes.expert_map = nullptr;
    shapes.workspace = nullptr;
    std::uint64_t from_shapes = 0;
    REQUIRE_MESSAGE(moejit_fused_moe_workspace_size(c.ctx, &shapes, &from_shapes) == MOEJIT_OK,
                    std::string(moejit_last_error()));
    CHECK(from_shapes == bytes);
    CHECK(moejit_fused_moe(c.ctx, &shapes, nullptr) == MOEJIT_ERROR_INVALID_ARGUMENT);
    // ... before the weights are packed, too: descriptors with shapes and formats, no buffers.
    moejit_packed_weights_t w13 = *a.w13, w2 = *a.w2;
    for (moejit_packed_weights_t* w : {&w13, &w2}) {
      w->qweight = w->scales = w->zeros = nullptr;
      w->bias = nullptr;
      w->qweight_bytes = w->scales_bytes = w->zeros_bytes = w->bias_bytes = 0;
    }
    shapes.w13 = &w13;
    shapes.w2 = &w2;
    from_shapes = 0;
    REQUIRE_MESSAGE(moejit_fused_moe_workspace_size(c.ctx, &shapes, &from_shapes) == MOEJIT_OK,
                    std::string(moejit_last_error()));
    CHECK(from_shapes == bytes);
    CHECK(moejit_fused_moe(c.ctx, &shapes, nullptr) == MOEJIT_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(moejit_last_error()).find("qweight") != std::string::npos);
  }
  // Map entries past the local experts, or negative ones other than -1, are refused too.
  for (const i32 bad : {static_cast<i32>(local), -2}) {
    std::vector<i32> bad_map = map;
    bad_map[global - 1] = bad;
    a.expert_map = bad_map.data();
    CHECK(moejit_fused_moe(c.ctx, &a, nullptr) == MOEJIT_ERROR_INVALID_ARGUMENT);
    const std::string message = moejit_last_error();
    CAPTURE(message);
    CHECK(message.find("expert_map[7]") != std::string::npos);
  }
  a.expert_map = map.data();

  REQUIRE_MESSAGE(moejit_fused_moe(c.ctx, &a, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));

  // Reference: pairs of experts this rank does not hold contribute nothing.
  std::vector<double> want(T * H, 0.0), got(T * H);
  for (std::int32_t t = 0; t < T; ++t)
    for (std::uint32_t k = 0; k < topk; ++k) {
      const i32 e = map[ids[t * topk + k]];
      if (e < 0) continue;
      std::vector<double> act(I);
      for (std::uint32_t i = 0; i < I; ++i) {
        double gate = b13[e * 2 * I + 2 * i], up = b13[e * 2 * I + 2 * i + 1];
        for (std::uint32_t h = 0; h < H; ++h) {
          gate += x[t * H + h] * w13.logical.dequantized(e, 2 * i, h);
          up += x[t * H + h] * w13.logical.dequantized(e, 2 * i + 1, h);
        }
        act[i] = quant::swiglu_oai(gate, up);
      }
      for (std::uint32_t h = 0; h < H; ++h) {
        double sum = b2[e * H + h];
        for (std::uint32_t i = 0; i < I; ++i) sum += act[i] * w2.logical.dequantized(e, h, i);
        want[t * H + h] += tw[t * topk + k] * sum;
      }
    }
  for (std::size_t i = 0; i < got.size(); ++i) got[i] = prim::twin::bf16_to_f32(static_cast<u16*>(output.data)[i]);
  const double err = quant::relative_frobenius_error(got, want);
  CAPTURE(err);
  CHECK(err < 1e-2);

  moejit_stats_t stats;
  moejit_stats_init(&stats);
  REQUIRE(moejit_get_stats(c.ctx, &stats) == MOEJIT_OK);
  CHECK(stats.launches == 4);
  CHECK(stats.compiles == 4);
  // The same call again: every kernel from memory, same result bit for bit.
  std::vector<u16> first(static_cast<u16*>(output.data), static_cast<u16*>(output.data) + T * H);
  REQUIRE(moejit_fused_moe(c.ctx, &a, nullptr) == MOEJIT_OK);
  REQUIRE(moejit_get_stats(c.ctx, &stats) == MOEJIT_OK);
  CHECK(stats.compiles == 4);
  CHECK(stats.memory_hits >= 4);
  CHECK(std::memcmp(first.data(), output.data, first.size() * 2) == 0);
}

TEST_CASE("C ABI: grouped GEMM (contiguous layout) from GPTQ v2 weights matches the fp64 reference") {
  TempDir dir;
  Context c(dir);
  std::mt19937 rng(std::random_device{}());
  constexpr std::uint32_t E = 4, N = 96, K = 256, G = 128;
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> w(E * N * K);
  for (auto& v : w) v = dist(rng);
  auto q = quant::quantize(w, E, N, K, {WeightFormat::int4_asym, G, DType::f16});
  REQUIRE(q.ok());
  // GPTQ v2: qweight [E][K/8][N] (8 k per word), qzeros [E][K/G][N/8] (8 n per word), scales [E][K/G][N].
  std::vector<i32> qweight(E * (K / 8) * N), qzeros(E * (K / G) * (N / 8));
  std::vector<u16> scales(E * (K / G) * N);
  for (std::uint32_t e = 0; e < E; ++e)
    for (std::uint32_t n = 0; n < N; ++n) {
      for (std::uint32_t k = 0; k < K; ++k)
        qweight[(e * (K / 8) + k / 8) * N + n] |= static_cast<i32>(q->codes[q->code_index(e, n, k)] << (4 * (k % 8)));
      for (std::uint32_t g = 0; g < K / G; ++g) {
        qzeros[(e * (K / G) + g) * (N / 8) + n / 8] |= static_cast<i32>(q->zeros[q->group_index(e, n, g)] << (4 * (n % 8)));
        scales[(e * (K / G) + g) * N + n] = q->scales[q->group_index(e, n, g)];
      }
    }
  moejit_weights_desc_t d;
  moejit_weights_desc_init(&d);
  d.format = MOEJIT_WEIGHT_INT4_ASYM;
  d.group_size = G;
  d.scale_dtype = MOEJIT_DTYPE_F16;
  d.experts = E;
  d.n = N;
  d.k = K;
  d.source = MOEJIT_SOURCE_GPTQ_V2;
  d.qweight = qweight.data();
  d.zeros = qzeros.data();
  d.scales = scales.data();
  auto p = pack(c.ctx, d);

  std::vector<i32> offsets = {0, 5, 5, 21, 30};  // expert 1 has no rows
  const std::int32_t M = offsets.back();
  Buffer a(M * K * 2), out(M * N * 4);
  const std::vector<double> x = random_activations(a.data, M * K, DType::f16, rng);
  moejit_grouped_gemm_args_t g;
  moejit_grouped_gemm_args_init(&g);
  g.weights = &p->w;
  g.act_dtype = MOEJIT_DTYPE_F16;
  g.out_dtype = MOEJIT_DTYPE_F32;
  g.layout = MOEJIT_LAYOUT_CONTIGUOUS;
  g.m = M;
  g.a = a.data;
  g.lda = K;
  g.c = out.data;
  g.ldc = N;
  g.expert_offsets = offsets.data();
  std::uint64_t ws = 1;
  REQUIRE(moejit_grouped_gemm_workspace_size(c.ctx, &g, &ws) == MOEJIT_OK);
  CHECK(ws == 0);
  REQUIRE_MESSAGE(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));

  quant::ReferenceProblem ref;
  ref.layout = Layout::contiguous;
  ref.weights = &*q;
  ref.a = x;
  ref.m = M;
  ref.expert_offsets = offsets;
  auto want = quant::reference_grouped_gemm(ref);
  REQUIRE(want.ok());
  std::vector<double> got(M * N);
  for (std::size_t i = 0; i < got.size(); ++i) got[i] = static_cast<float*>(out.data)[i];
  const double err = quant::relative_frobenius_error(got, want->c, N, want->written);
  CAPTURE(err);
  CHECK(err < 5e-3);
}

TEST_CASE("C ABI: bad input gives a status and a message naming the argument") {
  TempDir dir;
  Context c(dir);
  auto expect = [](moejit_status_t got, moejit_status_t want, std::string_view needle) {
    CHECK(got == want);
    CAPTURE(moejit_last_error());
    CHECK(std::string(moejit_last_error()).find(needle) != std::string::npos);
  };
  moejit_context_t none = nullptr;
  expect(moejit_context_create(nullptr, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, "'context'");
  moejit_context_options_t bad_options;
  moejit_context_options_init(&bad_options);
  bad_options.struct_size = 4;
  expect(moejit_context_create(&bad_options, &none), MOEJIT_ERROR_INVALID_ARGUMENT, "struct_size = 4");
  bad_options.struct_size = sizeof bad_options;
  bad_options.backend = static_cast<moejit_backend_t>(7);
  expect(moejit_context_create(&bad_options, &none), MOEJIT_ERROR_INVALID_ARGUMENT, "'options->backend' = 7");
  CHECK(none == nullptr);
  {
    // The environment's switches are read when the context is made: a malformed one is named there.
    bad_options.backend = MOEJIT_BACKEND_HOST;
    ScopedEnv check("MOEJIT_CHECK_INPUTS", "sometimes");
    expect(moejit_context_create(&bad_options, &none), MOEJIT_ERROR_INVALID_ARGUMENT,
           "MOEJIT_CHECK_INPUTS = 'sometimes': expected 1/0");
    CHECK(none == nullptr);
  }

  std::mt19937 rng(1);
  VllmWeights w13 = vllm_weights(rng, 2, 64, 64), w2 = vllm_weights(rng, 2, 64, 32);
  moejit_weights_desc_t d = vllm_desc(w13, MOEJIT_ROWS_CONCATENATED, nullptr);
  d.n = 48;
  moejit_packed_sizes_t sizes;
  expect(moejit_packed_weights_size(c.ctx, &d, &sizes), MOEJIT_ERROR_INVALID_ARGUMENT, "'desc->n' = 48: expected a positive multiple of 32");
  d = vllm_desc(w13, MOEJIT_ROWS_CONCATENATED, nullptr);
  d.group_size = 64;
  expect(moejit_packed_weights_size(c.ctx, &d, &sizes), MOEJIT_ERROR_INVALID_ARGUMENT, "group");
  d = vllm_desc(w13, MOEJIT_ROWS_CONCATENATED, nullptr);
  REQUIRE(moejit_packed_weights_size(c.ctx, &d, &sizes) == MOEJIT_OK);
  Buffer q(sizes.qweight_bytes), s(sizes.scales_bytes);
  moejit_packed_weights_t small;
  moejit_packed_weights_init(&small);
  small.qweight = q.data;
  small.scales = s.data;
  small.qweight_bytes = sizes.qweight_bytes - 16;
  small.scales_bytes = sizes.scales_bytes;
  expect(moejit_pack_weights(c.ctx, &d, &small, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, "'packed->qweight_bytes'");
  // Zero points for a format that has none would be dropped silently: refused.
  {
    Buffer pq(sizes.qweight_bytes), ps(sizes.scales_bytes);
    moejit_packed_weights_t out;
    moejit_packed_weights_init(&out);
    out.qweight = pq.data;
    out.scales = ps.data;
    out.qweight_bytes = sizes.qweight_bytes;
    out.scales_bytes = sizes.scales_bytes;
    moejit_weights_desc_t with_zeros = d;
    with_zeros.zeros = w13.scales.data();
    expect(moejit_pack_weights(c.ctx, &with_zeros, &out, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT,
           "'zeros' is set, but mxfp4 weights have no zero points");
  }

  auto p13 = pack(c.ctx, vllm_desc(w13, MOEJIT_ROWS_CONCATENATED, nullptr));
  auto p2 = pack(c.ctx, vllm_desc(w2, MOEJIT_ROWS_PLAIN, nullptr));
  Buffer hidden(4 * 64 * 2 + 16), output(4 * 64 * 2), workspace(1 << 20);
  std::vector<i32> ids = {0, 1, 1, 0, 0, 1, 1, 0};
  std::vector<float> tw(8, 0.5f);
  moejit_fused_moe_args_t a;
  moejit_fused_moe_args_init(&a);
  a.w13 = &p13->w;
  a.w2 = &p2->w;
  a.tokens = 4;
  a.topk = 2;
  a.hidden = hidden.data;
  a.topk_ids = ids.data();
  a.topk_weights = tw.data();
  a.output = output.data;
  a.workspace = workspace.data;
  a.workspace_bytes = workspace.size;
  REQUIRE_MESSAGE(moejit_fused_moe(c.ctx, &a, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  CHECK(std::string(moejit_last_error()).empty());

  moejit_fused_moe_args_t b = a;
  b.tokens = -2;
  expect(moejit_fused_moe(c.ctx, &b, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, "'tokens' = -2");
  b = a;
  b.hidden = static_cast<char*>(hidden.data) + 2;
  expect(moejit_fused_moe(c.ctx, &b, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, "'hidden'");
  CHECK(std::string(moejit_last_error()).find("16-byte alignment") != std::string::npos);
  b = a;
  b.w2 = &p13->w;
  expect(moejit_fused_moe(c.ctx, &b, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, "'w2'");
  b = a;
  b.workspace_bytes = 64;
  expect(moejit_fused_moe(c.ctx, &b, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, "'workspace_bytes' = 64");
  std::vector<i32> bad_ids = ids;
  bad_ids[5] = 2;  // only experts 0 and 1 exist
  b = a;
  b.topk_ids = bad_ids.data();
  expect(moejit_fused_moe(c.ctx, &b, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, "'topk_ids[5]' (token 2, k 1) = 2");
  moejit_packed_weights_t wrong = p2->w;
  wrong.scales_bytes += 1;
  b = a;
  b.w2 = &wrong;
  expect(moejit_fused_moe(c.ctx, &b, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, "'args->w2->scales_bytes'");
  b = a;
  b.activation = MOEJIT_EPILOGUE_TOPK_WEIGHT;
  expect(moejit_fused_moe(c.ctx, &b, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, "'activation'");
  b = a;
  b.act_dtype = static_cast<moejit_dtype_t>(9);
  expect(moejit_fused_moe(c.ctx, &b, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, "'args->act_dtype' = 9");
  expect(moejit_fused_moe(nullptr, &a, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, "'context'");
  expect(moejit_fused_moe(c.ctx, nullptr, nullptr), MOEJIT_ERROR_INVALID_ARGUMENT, "'args'");
}

TEST_CASE("C ABI: frozen mode turns a store miss into an error, never a compile") {
  TempDir dir;
  Context c(dir, MOEJIT_BACKEND_HOST, nullptr, /*frozen=*/1);
  std::mt19937 rng(2);
  VllmWeights w13 = vllm_weights(rng, 2, 64, 64), w2 = vllm_weights(rng, 2, 64, 32);
  auto p13 = pack(c.ctx, vllm_desc(w13, MOEJIT_ROWS_CONCATENATED, nullptr));
  auto p2 = pack(c.ctx, vllm_desc(w2, MOEJIT_ROWS_PLAIN, nullptr));
  Buffer hidden(64 * 2), output(64 * 2), workspace(1 << 20);
  std::vector<i32> ids = {0, 1};
  std::vector<float> tw = {0.5f, 0.5f};
  moejit_fused_moe_args_t a;
  moejit_fused_moe_args_init(&a);
  a.w13 = &p13->w;
  a.w2 = &p2->w;
  a.tokens = 1;
  a.topk = 2;
  a.hidden = hidden.data;
  a.topk_ids = ids.data();
  a.topk_weights = tw.data();
  a.output = output.data;
  a.workspace = workspace.data;
  a.workspace_bytes = workspace.size;
  CHECK(moejit_fused_moe(c.ctx, &a, nullptr) == MOEJIT_ERROR_FROZEN_MISS);
  CHECK(std::string(moejit_last_error()).find("frozen mode") != std::string::npos);
  moejit_stats_t stats;
  moejit_stats_init(&stats);
  REQUIRE(moejit_get_stats(c.ctx, &stats) == MOEJIT_OK);
  CHECK(stats.compiles == 0);
}

TEST_CASE("C ABI: warm-up compiles a model's kernels for named architectures without a GPU") {
  TempDir dir;
  Context c(dir, MOEJIT_BACKEND_DEVICE);  // no GPU needed to warm the store
  const moejit_model_desc_t m = mxfp4_model(256, 128, 16, 4, 1024);
  const char* archs[] = {"sm_90a", "sm_120a"};
  struct Progress {
    std::uint32_t calls = 0, total = 0, last_done = 0;
  } progress;
  auto on_progress = [](void* user, std::uint32_t done, std::uint32_t total, const char* what) {
    auto* p = static_cast<Progress*>(user);
    p->calls++;
    p->total = total;
    p->last_done = done;
    CHECK(std::string(what).find("\"op\"") != std::string::npos);
  };
  REQUIRE_MESSAGE(moejit_warmup(c.ctx, &m, archs, 2, on_progress, &progress) == MOEJIT_OK, std::string(moejit_last_error()));
  // Up to 1024 tokens x 4 / 16 experts = 256 rows per expert, the tile rows weighed on each
  // target (fused_moe_op.cpp, layer_block_rows). sm_90a: aligns at 16, 32, 64 and 128 rows, the
  // 16-row GEMMs, the 32-, 64- and 128-row wgmma GEMMs, and the reduce. sm_120a keeps this small
  // layer at 64 rows or fewer (shorter tiles put more CTAs on an otherwise idle GPU): aligns at 16,
  // 32 and 64, the 16-row GEMMs in two column widths (the decode tile and the one chosen below
  // its rows), the 32- and 64-row GEMMs, and the reduce.
  CHECK(progress.total == (4 + 2 + 3 * 2 + 1) + (3 + 2 * 2 + 2 * 2 + 1));
  CHECK(progress.calls == progress.total);
  CHECK(progress.last_done == progress.total);
  moejit_stats_t stats;
  moejit_stats_init(&stats);
  REQUIRE(moejit_get_stats(c.ctx, &stats) == MOEJIT_OK);
  CHECK(stats.compiles == progress.total);
  // A second context finds every kernel on disk.
  Context again(dir, MOEJIT_BACKEND_DEVICE);
  REQUIRE(moejit_warmup(again.ctx, &m, archs, 2, nullptr, nullptr) == MOEJIT_OK);
  REQUIRE(moejit_get_stats(again.ctx, &stats) == MOEJIT_OK);
  CHECK(stats.compiles == 0);
  CHECK(stats.disk_hits == progress.total);
  // Without a GPU the context has no architecture of its own to default to.
  moejit_backend_t backend;
  const char* arch = nullptr;
  REQUIRE(moejit_context_backend(c.ctx, &backend, &arch) == MOEJIT_OK);
  if (arch == nullptr) {
    CHECK(moejit_warmup(c.ctx, &m, nullptr, 0, nullptr, nullptr) == MOEJIT_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(moejit_last_error()).find("name the architectures") != std::string::npos);
    // ... and launches say why they cannot run.
    // MXFP4 scales: E x K/32 x N bytes, then one u32 per expert (the scale ranges).
    Buffer q(16 * 64 * 64 / 2), s(16 * 2 * 64 + 16 * 4), a(64 * 2), out(64 * 2);
    moejit_packed_weights_t w;
    moejit_packed_weights_init(&w);
    w.format = MOEJIT_WEIGHT_MXFP4;
    w.group_size = 32;
    w.scale_dtype = MOEJIT_DTYPE_E8M0;
    w.experts = 16;
    w.n = 64;
    w.k = 64;
    w.qweight = q.data;
    w.scales = s.data;
    w.qweight_bytes = q.size;
    w.scales_bytes = s.size;
    moejit_grouped_gemm_args_t g;
    moejit_grouped_gemm_args_init(&g);
    g.weights = &w;
    g.layout = MOEJIT_LAYOUT_MASKED;
    g.m = 1;
    g.a = a.data;
    g.lda = 64;
    g.c = out.data;
    g.ldc = 64;
    CHECK(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_ERROR_UNAVAILABLE);
    CHECK(std::string(moejit_last_error()).find("libcuda") != std::string::npos);
  }
}

TEST_CASE("C ABI: the usage manifest lists exactly the kernels a run used") {
  TempDir dir;
  const std::string manifest = dir / "usage.jsonl";
  {
    Context c(dir, MOEJIT_BACKEND_HOST, manifest.c_str());
    std::mt19937 rng(3);
    VllmWeights w13 = vllm_weights(rng, 2, 64, 64), w2 = vllm_weights(rng, 2, 64, 32);
    auto p13 = pack(c.ctx, vllm_desc(w13, MOEJIT_ROWS_CONCATENATED, nullptr));
    auto p2 = pack(c.ctx, vllm_desc(w2, MOEJIT_ROWS_PLAIN, nullptr));
    Buffer hidden(2 * 64 * 2), output(2 * 64 * 2), workspace(1 << 20);
    std::vector<i32> ids = {0, 1, 1, 0};
    std::vector<float> tw(4, 0.5f);
    moejit_fused_moe_args_t a;
    moejit_fused_moe_args_init(&a);
    a.w13 = &p13->w;
    a.w2 = &p2->w;
    a.tokens = 2;
    a.topk = 2;
    a.hidden = hidden.data;
    a.topk_ids = ids.data();
    a.topk_weights = tw.data();
    a.output = output.data;
    a.workspace = workspace.data;
    a.workspace_bytes = workspace.size;
    for (int i = 0; i < 3; ++i) REQUIRE(moejit_fused_moe(c.ctx, &a, nullptr) == MOEJIT_OK);
  }
  auto specs = dispatch::read_usage_manifest(manifest);
  REQUIRE_MESSAGE(specs.ok(), specs.status().message());
  REQUIRE(specs->size() == 5);  // the layer, then align, gate/up, down, reduce; each once
  // The layer's call, which warm-up plans again for another target.
  REQUIRE((*specs)[0].layer.has_value());
  const dispatch::LayerCall& layer = *(*specs)[0].layer;
  CHECK((*specs)[0].spec.op == Op::none);
  CHECK(layer.arch == Arch::sm_90a);  // the host backend's default target
  CHECK(layer.backend == Backend::host);
  CHECK(layer.w13_weight == WeightFormat::mxfp4);
  CHECK(layer.w2_weight == WeightFormat::mxfp4);
  CHECK(layer.w13_packed_for == DType::bf16);
  CHECK(layer.hidden == 64);
  CHECK(layer.intermediate == 32);
  CHECK(layer.experts == 2);
  CHECK(layer.global_experts == 2);
  CHECK(layer.topk == 2);
  CHECK(layer.activation == Epilogue::silu_and_mul);
  CHECK(layer.tokens_from == 2);
  CHECK(layer.tokens_to == 2);
  CHECK((*specs)[1].spec.op == Op::moe_align);
  CHECK((*specs)[2].spec.op == Op::grouped_gemm);
  CHECK((*specs)[2].spec.epilogue == Epilogue::silu_and_mul);
  CHECK((*specs)[3].spec.epilogue == Epilogue::topk_weight);
  CHECK((*specs)[4].spec.op == Op::moe_reduce);
  // The GEMMs carry the call their tile was chosen for (4 routed pairs over 2 experts, top 2).
  for (int i : {2, 3}) {
    REQUIRE((*specs)[i].gemm.has_value());
    CHECK((*specs)[i].gemm->m == 4);
    CHECK((*specs)[i].gemm->topk_hint == 2);
    CHECK((*specs)[i].gemm->global_experts_hint == 2);
    CHECK((*specs)[i].gemm->rows_per_expert_hint == 0);
    // The down projection requests its weights before the gate/up output is ready.
    CHECK((*specs)[i].gemm->weights_before_dependency == (i == 3 ? 1u : 0u));
    CHECK((*specs)[i].gemm->fused_layer == 1);
  }
  CHECK_FALSE((*specs)[1].gemm.has_value());
  write_text(dir / "bad.jsonl", "{\"op\": \"moe_align\"}\nnot json\n");
  auto bad = dispatch::read_usage_manifest(dir / "bad.jsonl");
  CHECK_FALSE(bad.ok());
  CHECK(bad.status().message().find("line 2") != std::string::npos);
}

TEST_CASE("C ABI: per-channel INT4 is group_size 0, K or GPTQ's -1, all packed alike") {
  TempDir dir;
  Context c(dir);
  std::mt19937 rng(std::random_device{}());
  constexpr std::uint32_t E = 2, N = 64, K = 128;
  std::vector<u8> codes(E * N * K);
  for (auto& v : codes) v = static_cast<u8>(rng() % 16);
  std::vector<u16> scales(E * N);
  for (auto& v : scales) v = prim::twin::f32_to_bf16(0.01f * static_cast<float>(1 + rng() % 50));
  std::vector<std::vector<unsigned char>> packed_bytes;
  for (const std::uint32_t group : {0u, K, UINT32_MAX}) {
    CAPTURE(group);
    auto p = pack(c.ctx, int4_plain_desc(codes, scales, MOEJIT_DTYPE_BF16, group, E, N, K));
    CHECK(p->w.group_size == K);
    std::vector<unsigned char> bytes(static_cast<unsigned char*>(p->q->data),
                                     static_cast<unsigned char*>(p->q->data) + p->w.qweight_bytes);
    bytes.insert(bytes.end(), static_cast<unsigned char*>(p->s->data),
                 static_cast<unsigned char*>(p->s->data) + p->w.scales_bytes);
    packed_bytes.push_back(std::move(bytes));
  }
  CHECK(packed_bytes[1] == packed_bytes[0]);
  CHECK(packed_bytes[2] == packed_bytes[0]);

  // The model descriptor: 0 and -1 name the same kernels (the second finds them all in memory).
  moejit_model_desc_t m;
  moejit_model_desc_init(&m);
  m.hidden = K;
  m.intermediate = N;
  m.experts = E;
  m.topk = 1;
  m.format = MOEJIT_WEIGHT_INT4_SYM;
  m.scale_dtype = MOEJIT_DTYPE_BF16;
  m.max_tokens = 1;
  m.group_size = 0;
  REQUIRE_MESSAGE(moejit_prepare(c.ctx, &m, nullptr, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  moejit_stats_t stats;
  moejit_stats_init(&stats);
  REQUIRE(moejit_get_stats(c.ctx, &stats) == MOEJIT_OK);
  const std::uint64_t compiles = stats.compiles;
  CHECK(compiles >= 4);
  m.group_size = UINT32_MAX;
  REQUIRE_MESSAGE(moejit_prepare(c.ctx, &m, nullptr, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  REQUIRE(moejit_get_stats(c.ctx, &stats) == MOEJIT_OK);
  CHECK(stats.compiles == compiles);
}
