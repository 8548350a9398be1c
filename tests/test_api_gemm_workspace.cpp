// The grouped GEMM's split-K workspace through the C ABI, as an engine uses it: zero-filled
// once, then reused by calls of different sizes (each token count of a decode loop, both
// projections of a layer). Each call's counters lie past its own partial tiles, so a call with
// fewer rows finds its counters where an earlier, larger call kept partial sums.

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include "c_api_helpers.hpp"

using namespace moejit;
using namespace moejit::test;

namespace {

bool all_zero(const Buffer& b) {
  const auto* bytes = static_cast<const unsigned char*>(b.data);
  return std::all_of(bytes, bytes + b.size, [](unsigned char v) { return v == 0; });
}

}  // namespace

TEST_CASE("C ABI: one split-K workspace serves grouped GEMMs of different sizes, and is left zero by each") {
  TempDir dir;
  Context c(dir);
  const unsigned seed = std::random_device{}();
  INFO("seed: " << seed);
  std::mt19937 rng(seed);
  constexpr std::uint32_t E = 4, N = 256, K = 2048;
  const VllmWeights w = vllm_weights(rng, E, N, K);
  auto p = pack(c.ctx, vllm_desc(w, MOEJIT_ROWS_PLAIN, nullptr));

  // Many rows first, then few, then many again: the partial tiles, and so the counters behind
  // them, move with the rows.
  const std::vector<std::vector<i32>> calls = {{0, 16, 32, 40, 64}, {0, 1, 2, 2, 3}, {0, 5, 21, 30, 47}};
  std::uint64_t largest = 0;
  for (const auto& offsets : calls) {
    Buffer none(16);
    moejit_grouped_gemm_args_t g = contiguous_args(*p, MOEJIT_DTYPE_BF16, none.data, K, none.data, N, offsets);
    std::uint64_t bytes = 0;
    REQUIRE(moejit_grouped_gemm_workspace_size(c.ctx, &g, &bytes) == MOEJIT_OK);
    // Decode-sized tiles over 16 k stages on a device of many SMs: the planner splits K.
    REQUIRE_MESSAGE(bytes > 0, "no split-K picked for " << offsets.back() << " rows: the test needs one");
    largest = std::max(largest, bytes);
  }
  Buffer workspace(largest);
  std::memset(workspace.data, 0, workspace.size);  // zero-filled once, as moejit.h asks
  for (const auto& offsets : calls) {
    const std::int32_t M = offsets.back();
    INFO("rows: " << M);
    Buffer a(static_cast<std::size_t>(M) * K * 2), out(static_cast<std::size_t>(M) * N * 4);
    const std::vector<double> x = random_activations(a.data, static_cast<std::size_t>(M) * K, DType::bf16, rng);
    moejit_grouped_gemm_args_t g = contiguous_args(*p, MOEJIT_DTYPE_BF16, a.data, K, out.data, N, offsets);
    g.workspace = workspace.data;
    g.workspace_bytes = workspace.size;
    REQUIRE_MESSAGE(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
    CHECK(contiguous_error(w.logical, x, offsets, out) < 5e-3);
    CHECK(all_zero(workspace));
  }
}
