// The grouped GEMM's sm_90a warpgroup-MMA tiles (templates/gemm/grouped_gemm_wgmma.cuh), run on
// the host backend (whose wgmma twin runs each MMA when its wait completes it, and fails reads
// or writes of accumulators, or of the shared-memory operand, while one is in flight) against
// the fp64 reference: the three tile heights, 64 and 128 k per stage (the A tile's 64-k blocks),
// bf16 and f16 activations, every layout and epilogue, stage counts below, at and past the
// pipeline's slots, N not a multiple of the tile, experts that fall back to the mma.sync path
// inside the same kernel (which reads the same A tile), and INT4 weights, whose scale groups
// are summed apart (groups of half a stage, one stage, two stages, and per channel), with
// 16-bit activations or e4m3 ones scaled per token or per 128 k, and MXFP4 weights x e4m3 ones
// with the block scales folded into the weights' bytes. The cases
// (tests/wgmma_gemm_cases.hpp) run on an sm_90a GPU too, in tests/test_device_gemm.cpp.

#include <doctest/doctest.h>

#include "gemm_case.hpp"
#include "host_test_support.hpp"
#include "kernels/grouped_gemm.hpp"
#include "wgmma_gemm_cases.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

// The case takes the wgmma path on either backend (the device suite runs the same cases on an
// sm_90a GPU), and runs on the host one.
void run_on_wgmma(KernelResolver& resolver, const GemmCase& c) {
  HostLauncher host(Arch::sm_90a);
  REQUIRE_MESSAGE(gemm_uses_wgmma(gemm_case_spec(c, Backend::host, Arch::sm_90a)), describe(c));
  REQUIRE_MESSAGE(gemm_uses_wgmma(gemm_case_spec(c, Backend::device, Arch::sm_90a)), describe(c));
  run_gemm_case(resolver, host, c, fresh_seed());
}

// Each case on one resolver (cases that share a kernel compile it once).
void run_on_wgmma(const std::vector<NamedGemmCase>& cases) {
  TempDir dir;
  auto resolver = host_resolver(dir);
  for (const NamedGemmCase& named : cases) {
    CAPTURE(named.name);
    run_on_wgmma(*resolver, named.c);
  }
}

}  // namespace

TEST_CASE("host grouped GEMM, wgmma tiles: layouts, epilogues, heights, k per stage, activations, stage counts") {
  run_on_wgmma(wgmma_tile_cases());
}

TEST_CASE("host grouped GEMM, wgmma tiles: experts whose scales cannot be folded take the mma.sync path of the same kernel") {
  run_on_wgmma(wgmma_fallback_cases());
}

TEST_CASE("host grouped GEMM, wgmma tiles: INT4 weights, scale groups within, equal to and across stages, per channel") {
  run_on_wgmma(wgmma_int4_cases());
}

TEST_CASE("host grouped GEMM, wgmma tiles: W4A8, INT4 weights x e4m3 activations scaled per token") {
  // One e4m3 wgmma per 32 k; q - z as e4m3 bytes (2^-9 each), each scale group summed apart as
  // for 16-bit activations, and each row's scale (times 2^9) applied in the epilogue.
  run_on_wgmma(wgmma_w4a8_cases(ActScale::token));
}

TEST_CASE("host grouped GEMM, wgmma tiles: W4A8, INT4 weights x e4m3 activations scaled per 128 k") {
  // Every stage (one 128-k block) summed apart: times its columns' group scales and its rows'
  // scales for the block, which the stage carries (one 4-byte copy per row), and 2^9. Runs that
  // end at a stage's first tile are the previous stage's; scale groups of half a stage end
  // inside one, per-channel scales span all.
  run_on_wgmma(wgmma_w4a8_cases(ActScale::block128));
}

TEST_CASE("host grouped GEMM, wgmma tiles: W4A8, MXFP4 weights x e4m3 activations, scales folded into the bytes") {
  // One e4m3 wgmma per 32 k (one scale block): each column's E8M0 byte in its weights' e4m3
  // exponents, the expert's 2^(s_max - 133) and each row's scale in the epilogue (per token) or
  // at every stage (per 128 k). Experts the fold cannot take run the mma.sync path.
  run_on_wgmma(wgmma_mxfp4_w4a8_cases(ActScale::token));
  run_on_wgmma(wgmma_mxfp4_w4a8_cases(ActScale::block128));
}

TEST_CASE("host grouped GEMM, wgmma tiles: a tile's wgmma's take a quarter, half or all of its rows") {
  run_on_wgmma(wgmma_row_cases());
}
