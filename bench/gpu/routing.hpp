#pragma once
// Random top-k routing for the benchmark and its vLLM moe_align_block_size layout (what the
// indexed grouped GEMM reads), built on the host.

#include <cstdint>
#include <random>
#include <vector>

namespace moejit::bench {

struct Routing {
  std::vector<std::int32_t> topk_ids;          // [tokens * topk], k distinct experts per token
  std::vector<std::int32_t> sorted_token_ids;  // [align_max_padded]: pair ids by expert, padding = numel
  std::vector<std::int32_t> expert_ids;        // [align_max_blocks]: expert of each block, -1 past the end
  std::int32_t num_tokens_post_pad = 0;
  std::uint32_t touched_experts = 0;           // experts with at least one pair
};

// Each token picks `topk` distinct experts uniformly at random (the usual benchmark routing: it
// touches the most experts, so it moves the most weight bytes), laid out for block size `bm`.
Routing random_routing(std::mt19937_64& rng, std::uint32_t tokens, std::uint32_t experts, std::uint32_t topk,
                       std::uint32_t bm);

}  // namespace moejit::bench
