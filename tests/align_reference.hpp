#pragma once
// The routing-align semantics (vLLM moe_align_block_size, stable within an expert) written out
// directly, and random routing to feed it: shared by the align suites (host and device) and the
// grouped GEMM harness that needs indexed layouts.

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "moe/align_params.cuh"

namespace moejit::test {

struct AlignOutputs {
  std::vector<std::int32_t> sorted_token_ids;
  std::vector<std::int32_t> expert_ids;
  std::int32_t num_tokens_post_pad = 0;
};

// Pairs grouped by expert in increasing flat index, each expert padded with the sentinel
// `numel` to a multiple of the block size, blocks labelled with the (mapped) expert, -1 past
// the used blocks; ids outside [0, experts) are dropped.
inline AlignOutputs reference_align(const std::vector<std::int32_t>& ids, std::int32_t experts,
                                    std::int32_t block_size, const std::vector<std::int32_t>* map = nullptr) {
  const auto numel = static_cast<std::int32_t>(ids.size());
  std::vector<std::int64_t> count(experts, 0), start(experts + 1, 0);
  for (std::int32_t e : ids)
    if (e >= 0 && e < experts) ++count[e];
  for (std::int32_t e = 0; e < experts; ++e)
    start[e + 1] = start[e] + (count[e] + block_size - 1) / block_size * block_size;
  AlignOutputs r;
  r.num_tokens_post_pad = static_cast<std::int32_t>(start[experts]);
  r.sorted_token_ids.assign(static_cast<std::size_t>(align_max_padded(numel, experts, block_size)), numel);
  r.expert_ids.assign(static_cast<std::size_t>(align_max_blocks(numel, experts, block_size)), -1);
  std::vector<std::int64_t> next(start.begin(), start.end() - 1);
  for (std::int32_t i = 0; i < numel; ++i)
    if (ids[i] >= 0 && ids[i] < experts) r.sorted_token_ids[next[ids[i]]++] = i;
  for (std::int32_t e = 0; e < experts; ++e)
    for (std::int64_t b = start[e] / block_size; b < start[e + 1] / block_size; ++b)
      r.expert_ids[b] = map != nullptr ? (*map)[e] : e;
  return r;
}

// Most ids on a random subset of experts (so some are empty and some crowded), a few outside
// [0, E).
inline std::vector<std::int32_t> random_ids(std::mt19937& rng, std::int32_t numel, std::int32_t experts) {
  std::vector<std::int32_t> hot;
  for (std::int32_t e = 0; e < experts; ++e)
    if (rng() % 3 != 0) hot.push_back(e);
  if (hot.empty()) hot.push_back(0);
  const std::int32_t outside[] = {-1, -2, experts, experts + 7, std::numeric_limits<std::int32_t>::min(),
                                  std::numeric_limits<std::int32_t>::max()};
  std::vector<std::int32_t> ids(numel);
  for (auto& id : ids) {
    const auto r = rng() % 100;
    if (r < 4) id = outside[rng() % 6];
    else if (r < 20) id = static_cast<std::int32_t>(rng() % experts);
    else id = hot[rng() % hot.size()];
  }
  return ids;
}

}  // namespace moejit::test
