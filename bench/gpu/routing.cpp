#include "bench/gpu/routing.hpp"

#include "moe/align_params.cuh"

namespace moejit::bench {

Routing random_routing(std::mt19937_64& rng, std::uint32_t tokens, std::uint32_t experts, std::uint32_t topk,
                       std::uint32_t bm) {
  Routing r;
  const std::int64_t numel = std::int64_t{tokens} * topk;
  r.topk_ids.reserve(static_cast<std::size_t>(numel));
  std::vector<std::uint32_t> last_pick(experts, UINT32_MAX);  // token that last picked each expert
  for (std::uint32_t t = 0; t < tokens; ++t) {
    // topk << experts: rejection sampling picks k distinct experts in about k draws.
    for (std::uint32_t j = 0; j < topk;) {
      const auto e = static_cast<std::uint32_t>(rng() % experts);
      if (last_pick[e] == t) continue;
      last_pick[e] = t;
      r.topk_ids.push_back(static_cast<std::int32_t>(e));
      ++j;
    }
  }
  std::vector<std::vector<std::int32_t>> by_expert(experts);
  for (std::int64_t i = 0; i < numel; ++i)
    by_expert[static_cast<std::size_t>(r.topk_ids[static_cast<std::size_t>(i)])].push_back(static_cast<std::int32_t>(i));
  r.sorted_token_ids.assign(static_cast<std::size_t>(align_max_padded(numel, experts, bm)), static_cast<std::int32_t>(numel));
  r.expert_ids.assign(static_cast<std::size_t>(align_max_blocks(numel, experts, bm)), -1);
  std::size_t slot = 0;
  for (std::uint32_t e = 0; e < experts; ++e) {
    const auto& rows = by_expert[e];
    if (rows.empty()) continue;
    ++r.touched_experts;
    for (std::size_t j = 0; j < rows.size(); ++j) r.sorted_token_ids[slot + j] = rows[j];
    const std::size_t padded = (rows.size() + bm - 1) / bm * bm;
    for (std::size_t b = slot / bm; b < (slot + padded) / bm; ++b) r.expert_ids[b] = static_cast<std::int32_t>(e);
    slot += padded;
  }
  r.num_tokens_post_pad = static_cast<std::int32_t>(slot);
  return r;
}

}  // namespace moejit::bench
