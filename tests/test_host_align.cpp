// The routing-align kernel (templates/moe/align.cuh) on the host backend, checked in full
// against a plain CPU reference of vLLM's moe_align_block_size semantics on fresh random ids.

#include <doctest/doctest.h>

#include <chrono>
#include <limits>
#include <random>

#include "host_test_support.hpp"
#include "moe/align_params.cuh"
#include "align_reference.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

constexpr std::int32_t kPoison = -0x21524111;  // 0xdeadbeef


void check_align(const ResolvedKernel& kernel, std::mt19937& rng, std::int32_t numel,
                 bool with_map) {
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
  got.sorted_token_ids.assign(align_max_padded(numel, E, BM), kPoison);
  got.expert_ids.assign(align_max_blocks(numel, E, BM), kPoison);
  got.num_tokens_post_pad = kPoison;
  MoeAlignParams p{};
  p.topk_ids = ids.data();
  p.expert_map = with_map ? map.data() : nullptr;
  p.sorted_token_ids = got.sorted_token_ids.data();
  p.expert_ids = got.expert_ids.data();
  p.num_tokens_post_pad = &got.num_tokens_post_pad;
  p.numel = numel;
  p.global_experts = routing.global;
  HostLaunchShape shape;
  shape.block = {kernel.meta.block_threads, 1, 1};
  shape.dynamic_shared_bytes = kernel.meta.dynamic_shared_bytes;
  Status s = launch_host_kernel(kernel, &p, sizeof p, shape);
  REQUIRE_MESSAGE(s.ok(), s.message());

  CHECK(got.num_tokens_post_pad == want.num_tokens_post_pad);
  REQUIRE(got.sorted_token_ids.size() == want.sorted_token_ids.size());
  REQUIRE(got.expert_ids.size() == want.expert_ids.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < want.sorted_token_ids.size(); ++i)
    if (got.sorted_token_ids[i] != want.sorted_token_ids[i] && bad++ < 8)
      CHECK_MESSAGE(false, "sorted_token_ids[" << i << "] = " << got.sorted_token_ids[i]
                                                << ", expected " << want.sorted_token_ids[i]);
  for (std::size_t b = 0; b < want.expert_ids.size(); ++b)
    if (got.expert_ids[b] != want.expert_ids[b] && bad++ < 16)
      CHECK_MESSAGE(false, "expert_ids[" << b << "] = " << got.expert_ids[b] << ", expected "
                                         << want.expert_ids[b]);
  CHECK(bad == 0);
}

KernelSpec host_align_spec(std::uint32_t experts, std::uint16_t bm, std::uint16_t warps) {
  KernelSpec s = align_spec(experts, bm, warps, Arch::sm_90a);
  s.backend = Backend::host;
  return s;
}

}  // namespace

TEST_CASE("routing align on the host backend matches the reference on random routing") {
  if (!host_compiler_or_skip()) return;
  TempDir dir;
  auto resolver = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(resolver.ok());
  // Expert counts that are and are not multiples of the warp size; one warp and many; the
  // largest block size.
  const KernelSpec specs[] = {host_align_spec(37, 8, 3), host_align_spec(64, 16, 4),
                              host_align_spec(256, 64, 16), host_align_spec(512, 256, 32)};
  std::vector<std::future<Result<Resolution>>> pending;
  for (const KernelSpec& spec : specs) pending.push_back((*resolver)->resolve_async(spec));
  std::vector<const ResolvedKernel*> kernels;
  for (auto& f : pending) {
    auto r = f.get();
    REQUIRE_MESSAGE(r.ok(), r.status().message());
    CHECK(r->source == KernelSource::compiled);
    MESSAGE("host compile of " << codegen::spec_slug(r->kernel->spec) << ": "
                               << r->kernel->meta.compile_ms << " ms");
    kernels.push_back(r->kernel);
  }
  const unsigned seed = std::random_device{}();
  INFO("seed: " << seed);  // fresh data every run; the seed reproduces a failure
  std::mt19937 rng(seed);
  for (const ResolvedKernel* k : kernels) {
    for (std::int32_t numel : {0, 1, 7, 33, 1000, 4099}) {
      check_align(*k, rng, numel, false);
      check_align(*k, rng, numel, true);
    }
  }
  // Large: more pairs per warp than a chunk, every expert crowded.
  const auto start = std::chrono::steady_clock::now();
  check_align(*kernels[2], rng, 8192 * 8, true);
  check_align(*kernels[3], rng, 16384 * 8, false);
  MESSAGE(
      "large host align runs: "
      << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()
      << " ms");
}

TEST_CASE("host align kernels are stored and found on disk by a new resolver") {
  if (!host_compiler_or_skip()) return;
  TempDir dir;
  const KernelSpec spec = host_align_spec(64, 16, 2);
  Hash128 key;
  {
    auto r = KernelResolver::create(resolver_options_in(dir));
    REQUIRE(r.ok());
    auto first = (*r)->resolve(spec);
    REQUIRE_MESSAGE(first.ok(), first.status().message());
    CHECK(first->source == KernelSource::compiled);
    const auto& m = first->kernel->meta;
    CHECK(m.kind == store::PayloadKind::host_shared_object);
    CHECK(m.kernel_name == "moejit_host_kernel");
    CHECK(m.registers == 0);
    CHECK(m.spill_store_bytes == 0);
    CHECK(m.block_threads == 64);
    CHECK(m.dynamic_shared_bytes == (2 * 64 + 64 + 1) * 4);
    CHECK(first->kernel->binary.substr(0, 4) == "\x7f" "ELF");
    key = first->kernel->key;
    // A device spec differing only in backend has another key.
    KernelSpec device = spec;
    device.backend = Backend::device;
    auto device_key = (*r)->key_of(device);
    if (device_key.ok()) CHECK_FALSE(device_key->hash == key);
  }
  auto r = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(r.ok());
  auto again = (*r)->resolve(spec);
  REQUIRE(again.ok());
  CHECK(again->source == KernelSource::disk);
  CHECK(again->kernel->key == key);
  CHECK((*r)->stats().compiles == 0);
  std::mt19937 rng(99);
  check_align(*again->kernel, rng, 500, true);
}
