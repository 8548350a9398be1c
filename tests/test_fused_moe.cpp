// The fused MoE layer through the dispatch op on the host backend: formats, dtypes, both
// activations, expert parallelism, batch sizes that cross tile choices.

#include <doctest/doctest.h>

#include "dispatch/spec_observer.hpp"
#include "fused_case.hpp"
#include "runtime/host_launcher.hpp"

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
