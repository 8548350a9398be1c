// The indexed layout's routing (sorted_token_ids, expert_ids, *num_tokens_post_pad) lives in the
// caller's (device) memory, so the library cannot check it before the launch. The kernel reads
// only the first *num_tokens_post_pad ids: a count that is no multiple of the block rows (not
// what an align writes) pads the last block's tail instead of reading past the count.

#include <doctest/doctest.h>

#include <cmath>

#include "c_api_helpers.hpp"

using namespace moejit;
using namespace moejit::test;

TEST_CASE("C ABI: indexed GEMM reads no routing id past *num_tokens_post_pad") {
  TempDir dir;
  Context c(dir);
  const unsigned seed = std::random_device{}();
  INFO("seed: " << seed);
  std::mt19937 rng(seed);
  constexpr std::uint32_t E = 2, N = 64, K = 128;
  constexpr std::int32_t M = 2, kBlock = 16;
  const VllmWeights w = vllm_weights(rng, E, N, K);
  auto p = pack(c.ctx, vllm_desc(w, MOEJIT_ROWS_PLAIN, nullptr));
  Buffer a(M * K * 2), out(M * N * 4);
  const std::vector<double> x = random_activations(a.data, static_cast<std::size_t>(M) * K, DType::bf16, rng);
  std::vector<float> poison(M * N, std::nanf(""));
  std::memcpy(out.data, poison.data(), out.size);
  // Block 0: pair 0 on expert 0; block 1 (expert 0 again) holds only padding within the count of
  // 17. Past the count the buffer holds pair 1, which a read past the count would compute.
  std::vector<i32> sorted(2 * kBlock, M);
  sorted[0] = 0;
  for (std::int32_t slot = 17; slot < 2 * kBlock; ++slot) sorted[slot] = 1;
  const std::vector<i32> expert_ids = {0, 0};
  const i32 post_pad = 17;
  moejit_grouped_gemm_args_t g = gemm_args(*p, MOEJIT_DTYPE_BF16, MOEJIT_LAYOUT_INDEXED, M, a.data, K, out.data, N);
  g.sorted_token_ids = sorted.data();
  g.expert_ids = expert_ids.data();
  g.num_tokens_post_pad = &post_pad;
  g.block_size = kBlock;
  g.rows_per_expert_hint = 1;
  REQUIRE_MESSAGE(moejit_grouped_gemm(c.ctx, &g, nullptr) == MOEJIT_OK, std::string(moejit_last_error()));
  // Row 0 is expert 0's product (expert 1 has no rows); row 1 is untouched.
  CHECK(contiguous_error(w.logical, x, {0, 1, 1}, out) < 5e-3);
  const auto* c_rows = static_cast<const float*>(out.data);
  std::size_t written = 0;
  for (std::uint32_t col = 0; col < N; ++col) written += std::isnan(c_rows[N + col]) ? 0 : 1;
  CHECK(written == 0);
}
