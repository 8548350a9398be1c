// The routing-align kernel (templates/moe/align.cuh) on the GPU, checked in full against a
// plain CPU reference of vLLM's moe_align_block_size semantics on fresh random ids, as
// tests/test_host_align.cpp does on the host backend. Skips without a GPU.

#include <doctest/doctest.h>

#include <limits>
#include <random>

#include "moe/align_params.cuh"
#include "test_device_support.hpp"
#include "test_support.hpp"
#include "align_reference.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

constexpr std::int32_t kPoison = -0x21524111;  // 0xdeadbeef


template <typename T>
DeviceBuffer upload(DeviceLauncher& l, const std::vector<T>& v) {
  auto b = DeviceBuffer::allocate(l, std::max<std::size_t>(v.size() * sizeof(T), 1));
  REQUIRE_MESSAGE(b.ok(), b.status().message());
  if (!v.empty()) {
    const Status s = l.copy_to_backend(b->data(), v.data(), v.size() * sizeof(T), nullptr);
    REQUIRE_MESSAGE(s.ok(), s.message());
  }
  return std::move(b).value();
}

template <typename T>
void download(DeviceLauncher& l, std::vector<T>& v, const DeviceBuffer& b) {
  Status s = l.copy_from_backend(v.data(), b.data(), v.size() * sizeof(T), nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  s = l.synchronize(nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
}

void check_align(DeviceLauncher& l, const ResolvedKernel& kernel, std::mt19937& rng, std::int32_t numel, bool with_map) {
  const std::int32_t E = kernel.spec.experts, BM = kernel.spec.bm;
  CAPTURE(E);
  CAPTURE(BM);
  CAPTURE(kernel.spec.warps);
  CAPTURE(numel);
  CAPTURE(with_map);
  const RandomRouting routing = random_routing(rng, numel, E, with_map);
  const std::vector<std::int32_t>& ids = routing.ids;
  const std::vector<std::int32_t>& map = routing.map;
  CAPTURE(routing.global);
  const AlignOutputs want = reference_align(ids, E, BM, with_map ? &map : nullptr, routing.global);

  AlignOutputs got;
  got.sorted_token_ids.assign(want.sorted_token_ids.size(), kPoison);
  got.expert_ids.assign(want.expert_ids.size(), kPoison);
  std::vector<std::int32_t> post_pad{kPoison};
  DeviceBuffer d_ids = upload(l, ids), d_map = upload(l, map);
  DeviceBuffer d_sorted = upload(l, got.sorted_token_ids), d_experts = upload(l, got.expert_ids);
  DeviceBuffer d_post = upload(l, post_pad);

  MoeAlignParams p{};
  p.topk_ids = d_ids.as<const std::int32_t>();
  p.expert_map = with_map ? d_map.as<const std::int32_t>() : nullptr;
  p.sorted_token_ids = d_sorted.as<std::int32_t>();
  p.expert_ids = d_experts.as<std::int32_t>();
  p.num_tokens_post_pad = d_post.as<std::int32_t>();
  p.numel = numel;
  p.global_experts = routing.global;
  LaunchDims dims;
  dims.block[0] = kernel.meta.block_threads;
  dims.dynamic_shared_bytes = kernel.meta.dynamic_shared_bytes;
  const Status s = l.launch(kernel, dims, &p, sizeof p, nullptr);
  REQUIRE_MESSAGE(s.ok(), s.message());
  download(l, got.sorted_token_ids, d_sorted);
  download(l, got.expert_ids, d_experts);
  download(l, post_pad, d_post);

  CHECK(post_pad[0] == want.num_tokens_post_pad);
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.sorted_token_ids.size(); ++i)
    if (got.sorted_token_ids[i] != want.sorted_token_ids[i] && bad++ < 8)
      CHECK_MESSAGE(false, "sorted_token_ids[" << i << "] = " << got.sorted_token_ids[i] << ", expected "
                                                << want.sorted_token_ids[i]);
  for (std::size_t b = 0; b < want.expert_ids.size(); ++b)
    if (got.expert_ids[b] != want.expert_ids[b] && bad++ < 16)
      CHECK_MESSAGE(false, "expert_ids[" << b << "] = " << got.expert_ids[b] << ", expected " << want.expert_ids[b]);
  CHECK(bad == 0);
}

}  // namespace

TEST_SUITE("device") {

TEST_CASE("routing align on the GPU matches the reference on random routing") {
  DeviceLauncher* l = device_launcher_or_skip();
  if (l == nullptr) return;
  MESSAGE("GPU: " << describe_device(*l));
  TempDir dir;
  auto resolver = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(resolver.ok());
  // Expert counts that are and are not multiples of the warp size; one warp and many; the
  // largest block size; the 512 experts of Ling-3.0-flash.
  const KernelSpec specs[] = {align_spec(37, 8, 3, l->arch()), align_spec(64, 16, 4, l->arch()),
                              align_spec(256, 64, 16, l->arch()), align_spec(512, 256, 32, l->arch())};
  std::vector<std::future<Result<Resolution>>> pending;
  for (const KernelSpec& spec : specs) pending.push_back((*resolver)->resolve_async(spec));
  std::vector<const ResolvedKernel*> kernels;
  for (auto& f : pending) {
    auto r = f.get();
    REQUIRE_MESSAGE(r.ok(), r.status().message());
    kernels.push_back(r->kernel);
  }
  const unsigned seed = std::random_device{}();
  INFO("seed: " << seed);
  std::mt19937 rng(seed);
  for (const ResolvedKernel* k : kernels)
    for (std::int32_t numel : {0, 1, 7, 33, 1000, 4099, 8192 * 8}) {
      check_align(*l, *k, rng, numel, false);
      check_align(*l, *k, rng, numel, true);
    }
  check_align(*l, *kernels[3], rng, 16384 * 8, false);
}

}  // TEST_SUITE
