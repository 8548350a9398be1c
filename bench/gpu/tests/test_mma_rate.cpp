// The tensor-core rate probe (bench/gpu/mma_rate_probe.hpp): its accumulators on the host
// backend, its loop in the SASS NVRTC makes for every mma.sync target (the mma's it times and
// nothing else, between the two clock readings), and the arithmetic that turns readings into a
// rate, on hand-made readings.

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench/gpu/mma_rate_probe.hpp"
#include "bench/perf_model/cases.hpp"
#include "bench/perf_model/sass.hpp"
#include "common/numeric.cuh"
#include "compile/nvrtc_compiler.hpp"
#include "host_test_support.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"

using namespace moejit;
using namespace moejit::bench;
using namespace moejit::test;


TEST_CASE("the probe's chains end at their start plus the iterations times the fragments' product, on the host backend") {
  auto compiler = host_compiler_or_skip();
  if (!compiler) return;
  const codegen::TemplateSet set = mma_rate_templates();
  std::mt19937_64 rng(std::random_device{}());
  for (DType input : {DType::bf16, DType::e4m3}) {
    CAPTURE(to_string(input));
    constexpr std::uint16_t kWarps = 2;
    constexpr std::uint32_t kBlocks = 3, kIterations = 5, kThreads = 32 * kWarps;
    auto k = build_mma_rate_kernel(*compiler, mma_rate_spec(Arch::sm_90a, Backend::host, input, kWarps), set);
    REQUIRE_MESSAGE(k.ok(), k.status().message());
    const std::vector<std::uint32_t> fragments = make_mma_rate_fragments(input, rng);
    const std::vector<float> expected = expected_mma_rate_accumulators(input, fragments, kIterations);
    std::vector<float> acc(kBlocks * kThreads * kMmaRateChains * 4, std::nanf(""));
    std::vector<std::uint64_t> cycles(kBlocks * kWarps * 2, 0);
    std::vector<std::uint32_t> sms(kBlocks, 0xdeadbeefu);
    MmaRateParams p;
    p.fragments = fragments.data();
    p.accumulators = acc.data();
    p.cycles = cycles.data();
    p.sms = sms.data();
    p.iterations = kIterations;
    const Status s = launch_host_kernel(*k, &p, sizeof p, shape_of(kBlocks, kThreads, 0));
    REQUIRE_MESSAGE(s.ok(), s.message());

    // Not a trivial product: some accumulator differs from its chain's start value.
    std::uint32_t moved = 0;
    for (std::uint32_t t = 0; t < kBlocks * kThreads; ++t)
      for (std::uint32_t i = 0; i < kMmaRateChains * 4; ++i) {
        const float want = expected[(t % 32) * kMmaRateChains * 4 + i];
        if (want != static_cast<float>(i / 4)) ++moved;
        CAPTURE(t);
        CAPTURE(i);
        REQUIRE(acc[t * kMmaRateChains * 4 + i] == want);
      }
    CHECK(moved > 0);
    for (std::uint32_t w = 0; w < kBlocks * kWarps; ++w) CHECK(cycles[2 * w + 1] > cycles[2 * w]);
    CHECK(std::all_of(sms.begin(), sms.end(), [](std::uint32_t sm) { return sm == 0; }));
    auto r = read_mma_rate(cycles, sms, kWarps, kIterations);
    REQUIRE_MESSAGE(r.ok(), r.status().message());
    CHECK(r->sms == 1);
    CHECK(r->blocks_per_sm_max == kBlocks);
  }
}

TEST_CASE("the expected accumulators follow the fragments: one A element changed moves its row's outputs only") {
  std::mt19937_64 rng(std::random_device{}());
  const std::vector<std::uint32_t> fragments = make_mma_rate_fragments(DType::bf16, rng);
  const std::vector<float> base = expected_mma_rate_accumulators(DType::bf16, fragments, 3);
  // Lane 0's first A register holds A[0][0] and A[0][1] (PTX ISA m16n8k16 A fragment, groupID 0):
  // raising A[0][0] by one changes row 0 of D by 3 * B[0][col] in lanes 0..3 (groupID 0), c0/c1.
  std::vector<std::uint32_t> changed = fragments;
  const float a00 = prim::twin::bf16_to_f32(static_cast<std::uint16_t>(fragments[0]));
  changed[0] = (fragments[0] & 0xffff0000u) | prim::twin::f32_to_bf16(a00 + 1);
  const std::vector<float> moved = expected_mma_rate_accumulators(DType::bf16, changed, 3);
  for (std::uint32_t lane = 0; lane < 32; ++lane)
    for (std::uint32_t c = 0; c < kMmaRateChains; ++c)
      for (std::uint32_t i = 0; i < 4; ++i) {
        CAPTURE(lane);
        CAPTURE(i);
        const std::size_t at = (lane * kMmaRateChains + c) * 4 + i;
        if (lane >= 4 || i >= 2) {
          CHECK(moved[at] == base[at]);
          continue;
        }
        // B[0][col], col = 2 * lane + i: B's k = 0 row sits in lane 4 * col's first B register, low half.
        const std::uint32_t col = 2 * lane + i;
        const float b0 = prim::twin::bf16_to_f32(static_cast<std::uint16_t>(fragments[(4 * col) * 6 + 4]));
        CHECK(moved[at] == base[at] + 3 * b0);
      }
}

TEST_CASE("the probe's loop holds its chains' mma's and nothing that waits on memory, between the two clock readings") {
  auto nvrtc = NvrtcCompiler::create({});
  if (!nvrtc.ok()) {
    toolchain_missing("NVRTC is not available here: " + nvrtc.status().message());
    return;
  }
  auto nvdisasm = perf::find_nvdisasm();
  if (!nvdisasm.ok()) {
    toolchain_missing("nvdisasm (pip install nvidia-cuda-nvdisasm): " + nvdisasm.status().message());
    return;
  }
  const std::filesystem::path work = std::filesystem::temp_directory_path() / "moejit-mma-rate-test";
  std::filesystem::create_directories(work);
  const codegen::TemplateSet set = mma_rate_templates();
  for (Arch arch : {Arch::sm_80, Arch::sm_89, Arch::sm_90a, Arch::sm_100a, Arch::sm_120a, Arch::sm_121a})
    for (DType input : {DType::bf16, DType::e4m3}) {
      if (input == DType::e4m3 && !has_e4m3_mma(arch)) continue;  // mma_rate runs only the native one
      CAPTURE(to_string(arch));
      CAPTURE(to_string(input));
      auto k = build_mma_rate_kernel(**nvrtc, mma_rate_spec(arch, Backend::device, input, 8), set);
      REQUIRE_MESSAGE(k.ok(), k.status().message());
      CHECK(k->meta.spill_store_bytes == 0);
      auto sass = perf::disassemble(*nvdisasm, k->binary, work);
      REQUIRE_MESSAGE(sass.ok(), sass.status().message());
      const auto functions = perf::parse_sass(*sass);
      REQUIRE(functions.size() == 1);
      const perf::SassFunction& f = functions[0];
      const auto loops = perf::find_loops(f);
      const auto main = perf::find_main_loop(f, loops);
      REQUIRE(main.has_value());
      const perf::InstrCounts counts = perf::count_loop(f, *main);
      const std::uint64_t mma = counts.of(perf::InstrClass::mma);
      CHECK(mma > 0);
      CHECK(mma % kMmaRateChains == 0);
      for (auto c : {perf::InstrClass::global_memory, perf::InstrClass::shared_load, perf::InstrClass::local_memory,
                     perf::InstrClass::async_copy})
        CHECK(counts.of(c) == 0);
      // Every mma of the loop has the probe's shape: k16 for bf16, k32 for e4m3.
      for (const auto& in : f.instructions) {
        if (in.address < main->start || in.address > main->end || in.klass != perf::InstrClass::mma) continue;
        CAPTURE(in.opcode);
        CHECK(perf::mma_macs_per_warp_instruction(in.opcode) == (input == DType::e4m3 ? 4096.0 : 2048.0));
      }
      // The clock is read once before the loop and once after it.
      std::vector<std::uint32_t> clock_reads;
      for (const auto& in : f.instructions)
        if (in.operands.find("SR_CLOCKLO") != std::string::npos) clock_reads.push_back(in.address);
      REQUIRE(clock_reads.size() == 2);
      CHECK(clock_reads[0] < main->start);
      CHECK(clock_reads[1] > main->end);
    }
  std::filesystem::remove_all(work);
}

TEST_CASE("readings become mma per SM per clock: blocks grouped by SM, each SM's window from its first start to its last end") {
  // Two warps per block, 10 iterations: 2 * 10 * kMmaRateChains mma's per block.
  const double per_block = 2.0 * 10 * kMmaRateChains;
  // Blocks 0 and 2 on SM 5 (window 100 .. 900), block 1 on SM 9 (window 0 .. 210).
  const std::vector<std::uint32_t> sms{5, 9, 5};
  const std::vector<std::uint64_t> cycles{100, 500, 120, 520,  // block 0
                                          0, 200, 10, 210,     // block 1
                                          110, 900, 130, 880};  // block 2
  auto r = read_mma_rate(cycles, sms, 2, 10);
  REQUIRE_MESSAGE(r.ok(), r.status().message());
  CHECK(r->sms == 2);
  CHECK(r->blocks_per_sm_max == 2);
  CHECK(r->lowest == doctest::Approx(2 * per_block / 800));
  CHECK(r->highest == doctest::Approx(per_block / 210));
  CHECK(r->median == doctest::Approx(per_block / 210));  // of two SMs, the upper
  CHECK(r->median_cycles == 210);

  SUBCASE("a warp that ends before it starts is an error naming it") {
    std::vector<std::uint64_t> bad = cycles;
    bad[4] = 10;  // block 1, warp 0: starts at 10, ends at 5
    bad[5] = 5;
    auto e = read_mma_rate(bad, sms, 2, 10);
    REQUIRE_FALSE(e.ok());
    CHECK(contains(e.status().message(), "warp 0 of block 1"));
  }
  SUBCASE("readings of the wrong size are an error") {
    auto e = read_mma_rate(std::vector<std::uint64_t>(cycles.begin(), cycles.end() - 2), sms, 2, 10);
    REQUIRE_FALSE(e.ok());
    CHECK(contains(e.status().message(), "expected 12"));
  }
}
