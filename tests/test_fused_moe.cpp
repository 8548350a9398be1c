// The fused MoE layer through the dispatch op on the host backend: formats, dtypes, both
// activations, expert parallelism, batch sizes that cross tile choices.

#include <doctest/doctest.h>

#include "dispatch/spec_observer.hpp"
#include "fused_case.hpp"
#include "host/host_launcher.hpp"

using namespace moejit;
using namespace moejit::test;

TEST_CASE("fused MoE on the host backend: formats, dtypes, activations, expert parallelism, batch sizes") {
  TempDir dir;
  auto resolver = KernelResolver::create(resolver_options_in(dir));
  REQUIRE(resolver.ok());
  HostLauncher launcher;
  dispatch::SpecObserver observer("", false);
  std::atomic<std::uint64_t> launches{0};
  dispatch::OpContext ops{**resolver, launcher, observer, launches};
  HostTestMemory memory;

  FusedCase mxfp4;  // defaults: MXFP4, bf16, SiLU
  FusedCase oss = mxfp4;
  oss.activation = Epilogue::swiglu_oai;
  oss.out = DType::f32;
  oss.experts = 6;
  oss.global_experts = 9;  // expert parallelism: 3 experts live elsewhere
  oss.topk = 4;
  FusedCase int4 = mxfp4;
  int4.weight = WeightFormat::int4_asym;
  int4.group = 64;
  int4.scale = DType::f16;
  int4.act = DType::f16;
  int4.out = DType::f16;
  FusedCase channel = int4;
  channel.weight = WeightFormat::int4_sym;
  channel.group = 0;  // per-channel
  channel.scale = DType::bf16;
  channel.act = DType::bf16;
  FusedCase big = mxfp4;  // 64 pairs over 8 experts: 8 rows per expert, then 40 x 2 / 8 = 10 -> 16-row tile
  big.tokens = 40;
  for (const FusedCase& c : {mxfp4, oss, int4, channel, big}) run_fused_case(ops, memory, c, std::random_device{}());
  CHECK(launches.load() == 5 * 4);
}

TEST_CASE("MOEJIT_PRINT_CONFIGS shows each decision once, with the problem it was made for") {
  LogCapture logs;
  dispatch::SpecObserver observer("", true);
  KernelSpec s = align_spec(64, 16, 4);
  observer.used(s, {"fused_moe align", 24, 3});
  observer.used(s, {"fused_moe align", 24, 3});
  CHECK(logs.count_containing("config: {\"op\":\"moe_align\"") == 1);
  CHECK(logs.count_containing("<- fused_moe align m=24 rows/expert=3") == 1);
}

TEST_CASE("under expert parallelism the tile rows follow the pairs routed to this rank, not all pairs") {
  // DeepSeek-V3's layer, 256 experts top-8, MXFP4; whole on one GPU, or 32 of them on each of 8.
  static const unsigned char dummy[16] = {};
  auto request = [&](std::uint32_t local, std::int32_t tokens) {
    dispatch::FusedMoeRequest r;
    r.w13 = {WeightFormat::mxfp4, 32, DType::e8m0, local, 2 * 2048, 7168, true, dummy, dummy, nullptr, nullptr};
    r.w2 = {WeightFormat::mxfp4, 32, DType::e8m0, local, 7168, 2048, false, dummy, dummy, nullptr, nullptr};
    r.tokens = tokens;
    r.topk = 8;
    r.global_experts = 256;
    return r;
  };
  for (const std::int32_t tokens : {1, 64, 512, 4096}) {
    CAPTURE(tokens);
    auto whole = dispatch::fused_moe_specs(request(256, tokens), Arch::sm_90a, Backend::device, 132);
    auto rank = dispatch::fused_moe_specs(request(32, tokens), Arch::sm_90a, Backend::device, 132);
    REQUIRE_MESSAGE(whole.ok(), whole.status().message());
    REQUIRE_MESSAGE(rank.ok(), rank.status().message());
    // A rank sees 1/8 of the pairs over 1/8 of the experts: the same rows per busy expert. All
    // pairs over the local experts would say 8x as many (at 512 tokens: 128 rows, not 16).
    CHECK(rank->align.bm == whole->align.bm);
    CHECK(rank->align.experts == 32);
  }
}
