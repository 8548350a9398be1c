// GPU suite: what an engine does before serving with CUDA graphs, through moejit.h alone. It
// calls moejit_prepare once, then captures fused MoE calls at several token counts into one graph
// without having run any of them eagerly: a kernel prepare missed would be loaded inside the
// capture, which the launcher refuses, so the capture itself is the check. The graph's outputs
// must then equal, bit for bit, the same calls run eagerly on the same data.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "c_api_helpers.hpp"
#include "runtime/device_buffer.hpp"
#include "test_device_support.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

constexpr std::uint32_t kExperts = 8, kHidden = 256, kInter = 128, kTopk = 2;
constexpr std::int32_t kMaxTokens = 16;

// Device buffer from host bytes.
DeviceBuffer upload(DeviceLauncher& l, const void* src, std::size_t bytes) {
  auto b = DeviceBuffer::allocate(l, std::max<std::size_t>(bytes, 256));
  REQUIRE_MESSAGE(b.ok(), b.status().message());
  REQUIRE(l.copy_to_backend(b->data(), src, bytes, nullptr).ok());
  REQUIRE(l.synchronize(nullptr).ok());
  return std::move(b).value();
}

DeviceBuffer allocate(DeviceLauncher& l, std::size_t bytes) {
  auto b = DeviceBuffer::allocate(l, std::max<std::size_t>(bytes, 256));
  REQUIRE_MESSAGE(b.ok(), b.status().message());
  return std::move(b).value();
}

// Packed weights in device memory, packed from vLLM-layout MXFP4 held on the host.
struct DevicePacked {
  moejit_packed_weights_t w{};
  DeviceBuffer q, s, b;
};

void pack_on_device(DeviceLauncher& l, moejit_context_t ctx, const moejit_weights_desc_t& d, DevicePacked& out) {
  moejit_packed_sizes_t sizes;
  REQUIRE_MESSAGE(moejit_packed_weights_size(ctx, &d, &sizes) == MOEJIT_OK, std::string(moejit_last_error()));
  moejit_packed_weights_init(&out.w);
  out.q = allocate(l, sizes.qweight_bytes);
  out.s = allocate(l, sizes.scales_bytes);
  out.w.qweight = out.q.data();
  out.w.scales = out.s.data();
  out.w.qweight_bytes = sizes.qweight_bytes;
  out.w.scales_bytes = sizes.scales_bytes;
  if (sizes.bias_bytes) {
    out.b = allocate(l, sizes.bias_bytes);
    out.w.bias = out.b.as<float>();
    out.w.bias_bytes = sizes.bias_bytes;
  }
  REQUIRE_MESSAGE(moejit_pack_weights(ctx, &d, &out.w, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
}

}  // namespace

TEST_SUITE("device") {
TEST_CASE("GPU: after moejit_prepare, fused calls at several T capture into a CUDA graph that matches eager runs") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  MESSAGE("on " << describe_device(*l));
  const CudaApi& api = l->driver().api();
  // Streams need a current context: the primary one, which the moejit context also uses.
  auto primary = l->primary_context();
  REQUIRE_MESSAGE(primary.ok(), primary.status().message());
  REQUIRE(api.CtxPushCurrent(*primary) == CUDA_SUCCESS);
  struct PopContext {
    const CudaApi& api;
    ~PopContext() {
      CUcontext popped = nullptr;
      (void)api.CtxPopCurrent(&popped);
    }
  } pop{api};

  TempDir dir;
  Context c(dir, MOEJIT_BACKEND_DEVICE);
  std::mt19937 rng(std::random_device{}());
  const VllmWeights w13 = vllm_weights(rng, kExperts, 2 * kInter, kHidden);
  const VllmWeights w2 = vllm_weights(rng, kExperts, kHidden, kInter);
  DevicePacked p13, p2;
  pack_on_device(*l, c.ctx, vllm_desc(w13, MOEJIT_ROWS_CONCATENATED, nullptr), p13);
  pack_on_device(*l, c.ctx, vllm_desc(w2, MOEJIT_ROWS_PLAIN, nullptr), p2);

  const moejit_model_desc_t model = mxfp4_model(kHidden, kInter, kExperts, kTopk, kMaxTokens);
  REQUIRE_MESSAGE(moejit_prepare(c.ctx, &model, nullptr, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  moejit_stats_t prepared;
  moejit_stats_init(&prepared);
  REQUIRE(moejit_get_stats(c.ctx, &prepared) == MOEJIT_OK);
  CHECK(prepared.launches == 0);

  // Inputs for kMaxTokens tokens; the calls use their first T rows.
  std::vector<u16> hidden(static_cast<std::size_t>(kMaxTokens) * kHidden);
  random_activations(hidden.data(), hidden.size(), DType::bf16, rng);
  std::vector<std::int32_t> ids(static_cast<std::size_t>(kMaxTokens) * kTopk);
  std::vector<float> weights(ids.size());
  for (std::int32_t t = 0; t < kMaxTokens; ++t) {
    std::vector<std::int32_t> experts(kExperts);
    for (std::uint32_t e = 0; e < kExperts; ++e) experts[e] = static_cast<std::int32_t>(e);
    std::shuffle(experts.begin(), experts.end(), rng);
    for (std::uint32_t k = 0; k < kTopk; ++k) {
      ids[t * kTopk + k] = experts[k];
      weights[t * kTopk + k] = std::uniform_real_distribution<float>(0.1f, 1.0f)(rng);
    }
  }
  DeviceBuffer d_hidden = upload(*l, hidden.data(), hidden.size() * 2);
  DeviceBuffer d_ids = upload(*l, ids.data(), ids.size() * 4);
  DeviceBuffer d_weights = upload(*l, weights.data(), weights.size() * 4);

  moejit_fused_moe_args_t a;
  moejit_fused_moe_args_init(&a);
  a.w13 = &p13.w;
  a.w2 = &p2.w;
  a.topk = kTopk;
  a.hidden = d_hidden.data();
  a.topk_ids = d_ids.as<const std::int32_t>();
  a.topk_weights = d_weights.as<const float>();
  a.tokens = kMaxTokens;
  a.max_tokens = kMaxTokens;
  std::uint64_t workspace_bytes = 0;
  REQUIRE_MESSAGE(moejit_fused_moe_workspace_size(c.ctx, &a, &workspace_bytes) == MOEJIT_OK,
                  std::string(moejit_last_error()));
  // One workspace shared by the calls (they run in stream order) full of garbage, and one
  // output per token count, poisoned.
  DeviceBuffer workspace = allocate(*l, workspace_bytes);
  REQUIRE(l->fill(workspace.data(), 0xa5, workspace_bytes, nullptr).ok());
  const std::vector<std::int32_t> token_counts = {1, 3, 8, kMaxTokens};
  const std::size_t out_bytes = static_cast<std::size_t>(kMaxTokens) * kHidden * 2;
  std::vector<DeviceBuffer> graph_out, eager_out;
  for (std::size_t i = 0; i < token_counts.size(); ++i) {
    graph_out.push_back(allocate(*l, out_bytes));
    eager_out.push_back(allocate(*l, out_bytes));
    REQUIRE(l->fill(graph_out.back().data(), 0xff, out_bytes, nullptr).ok());
    REQUIRE(l->fill(eager_out.back().data(), 0xff, out_bytes, nullptr).ok());
  }
  REQUIRE(l->synchronize(nullptr).ok());
  auto enqueue_all = [&](std::vector<DeviceBuffer>& outputs, CUstream stream) {
    for (std::size_t i = 0; i < token_counts.size(); ++i) {
      moejit_fused_moe_args_t call = a;
      call.tokens = token_counts[i];
      call.output = outputs[i].data();
      call.workspace = workspace.data();
      call.workspace_bytes = workspace_bytes;
      const moejit_status_t s = moejit_fused_moe(c.ctx, &call, stream);
      if (s != MOEJIT_OK) return std::string(moejit_last_error());
    }
    return std::string();
  };

  CUstream s = nullptr;
  REQUIRE(api.StreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
  struct DestroyStream {
    const CudaApi& api;
    CUstream s;
    ~DestroyStream() { (void)api.StreamDestroy(s); }
  } destroy_stream{api, s};
  REQUIRE(api.StreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS);
  const std::string captured = enqueue_all(graph_out, s);
  CUgraph graph = nullptr;
  const CUresult ended = api.StreamEndCapture(s, &graph);
  REQUIRE_MESSAGE(captured.empty(), "a fused call failed inside the capture (not prepared?): " << captured);
  REQUIRE(ended == CUDA_SUCCESS);
  CUgraphExec exec = nullptr;
  REQUIRE(api.GraphInstantiate(&exec, graph, 0) == CUDA_SUCCESS);
  REQUIRE(api.GraphLaunch(exec, s) == CUDA_SUCCESS);
  REQUIRE(api.StreamSynchronize(s) == CUDA_SUCCESS);
  (void)api.GraphExecDestroy(exec);
  (void)api.GraphDestroy(graph);
  moejit_stats_t after_capture;
  moejit_stats_init(&after_capture);
  REQUIRE(moejit_get_stats(c.ctx, &after_capture) == MOEJIT_OK);
  CHECK(after_capture.compiles == prepared.compiles);  // nothing compiled or loaded after prepare
  CHECK(after_capture.disk_hits == prepared.disk_hits);

  const std::string eager = enqueue_all(eager_out, s);
  REQUIRE_MESSAGE(eager.empty(), eager);
  REQUIRE(api.StreamSynchronize(s) == CUDA_SUCCESS);
  for (std::size_t i = 0; i < token_counts.size(); ++i) {
    CAPTURE(token_counts[i]);
    std::vector<u16> g(out_bytes / 2), e(out_bytes / 2);
    REQUIRE(l->copy_from_backend(g.data(), graph_out[i].data(), out_bytes, nullptr).ok());
    REQUIRE(l->copy_from_backend(e.data(), eager_out[i].data(), out_bytes, nullptr).ok());
    REQUIRE(l->synchronize(nullptr).ok());
    const std::size_t written = static_cast<std::size_t>(token_counts[i]) * kHidden;
    std::size_t differ = 0, unwritten = 0, untouched_past = 0;
    for (std::size_t j = 0; j < g.size(); ++j) {
      if (j < written) {
        differ += g[j] != e[j];
        unwritten += g[j] == 0xffff;
      } else {
        untouched_past += g[j] == 0xffff;
      }
    }
    CHECK(differ == 0);
    CHECK(unwritten == 0);
    CHECK(untouched_past == g.size() - written);  // rows past T are not written
  }
}
}  // TEST_SUITE
