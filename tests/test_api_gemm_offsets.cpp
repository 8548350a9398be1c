// The contiguous layout's expert_offsets live in the caller's (device) memory, so the library
// cannot check them before the launch: the kernel clamps each to [0, m]. Offsets past m, below
// 0 or decreasing then touch no row outside C, and the rows inside get what the clamped offsets
// say.

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "c_api_helpers.hpp"

using namespace moejit;
using namespace moejit::test;

TEST_CASE("C ABI: contiguous offsets outside [0, m] touch no row outside C") {
  TempDir dir;
  Context c(dir);
  const unsigned seed = std::random_device{}();
  INFO("seed: " << seed);
  std::mt19937 rng(seed);
  constexpr std::uint32_t E = 3, N = 64, K = 128;
  constexpr std::int32_t M = 24;
  const VllmWeights w = vllm_weights(rng, E, N, K);
  auto p = pack(c.ctx, vllm_desc(w, MOEJIT_ROWS_PLAIN, nullptr));
  struct Case {
    std::vector<i32> given, effective;  // effective: the rows each expert gets, as offsets
  };
  for (const Case& k : {Case{{0, 10, 40, 70}, {0, 10, 24, 24}},    // past m
                        Case{{-7, 5, 24, 24}, {0, 5, 24, 24}},     // below 0
                        Case{{0, 20, 8, 8}, {0, 20, 20, 20}}}) {   // decreasing: experts 1, 2 get none
    INFO("offsets " << k.given[0] << " " << k.given[1] << " " << k.given[2] << " " << k.given[3]);
    // A and C of M rows inside margins of kMargin rows on both sides, C poisoned (NaN): a row
    // read or written outside [0, M) lands in a margin, and a written one shows.
    constexpr std::int32_t kMargin = 48;
    constexpr std::size_t kRows = M + 2 * kMargin;
    Buffer a(kRows * K * 2), out(kRows * N * 4);
    auto* a_rows = static_cast<unsigned char*>(a.data) + kMargin * K * 2;
    auto* c_rows = static_cast<float*>(out.data) + kMargin * N;
    random_activations(a.data, kRows * K, DType::bf16, rng);  // the margins hold finite values too
    const std::vector<double> x = random_activations(a_rows, static_cast<std::size_t>(M) * K, DType::bf16, rng);
    moejit_grouped_gemm_args_t g = contiguous_args(*p, MOEJIT_DTYPE_BF16, a_rows, K, c_rows, N, k.given);
    g.m = M;
    REQUIRE_MESSAGE(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
    // The rows the clamped offsets give are right; every other row, margins included, is as
    // poisoned.
    CHECK(contiguous_error(w.logical, x, k.effective, c_rows) < 5e-3);
    const auto* all = static_cast<const float*>(out.data);
    std::size_t written_outside = 0;
    for (std::size_t row = 0; row < kRows; ++row) {
      const bool inside = row >= kMargin && row < static_cast<std::size_t>(kMargin + k.effective.back());
      for (std::uint32_t col = 0; col < N && !inside; ++col) written_outside += std::isnan(all[row * N + col]) ? 0 : 1;
    }
    CHECK(written_outside == 0);
  }
}
