#pragma once
// The routing-align semantics (vLLM moe_align_block_size, stable within an expert) written out
// directly, and random routing to feed it: shared by the align suites (host and device) and the
// grouped GEMM harness that needs indexed layouts.

#include <algorithm>
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

// Pairs grouped by local expert in increasing flat index, each local expert padded with the
// sentinel `numel` to a multiple of the block size, blocks labelled with their local expert, -1
// past the used blocks. A pair gets no slot when its id is outside [0, global) or its mapped id
// is outside [0, experts) (without a map, ids are local ids).
inline AlignOutputs reference_align(const std::vector<std::int32_t>& ids, std::int32_t experts, std::int32_t block_size,
                                    const std::vector<std::int32_t>* map = nullptr, std::int32_t global = 0) {
  if (global == 0) global = experts;
  const auto numel = static_cast<std::int32_t>(ids.size());
  auto local_of = [&](std::int32_t id) {
    if (id < 0 || id >= global) return -1;
    const std::int32_t l = map != nullptr ? (*map)[static_cast<std::size_t>(id)] : id;
    return l >= 0 && l < experts ? l : -1;
  };
  std::vector<std::int64_t> count(experts, 0), start(experts + 1, 0);
  for (std::int32_t id : ids)
    if (local_of(id) >= 0) ++count[local_of(id)];
  for (std::int32_t e = 0; e < experts; ++e)
    start[e + 1] = start[e] + (count[e] + block_size - 1) / block_size * block_size;
  AlignOutputs r;
  r.num_tokens_post_pad = static_cast<std::int32_t>(start[experts]);
  r.sorted_token_ids.assign(static_cast<std::size_t>(align_max_padded(numel, experts, block_size)), numel);
  r.expert_ids.assign(static_cast<std::size_t>(align_max_blocks(numel, experts, block_size)), -1);
  std::vector<std::int64_t> next(start.begin(), start.end() - 1);
  for (std::int32_t i = 0; i < numel; ++i)
    if (local_of(ids[i]) >= 0) r.sorted_token_ids[next[local_of(ids[i])]++] = i;
  for (std::int32_t e = 0; e < experts; ++e)
    for (std::int64_t b = start[e] / block_size; b < start[e + 1] / block_size; ++b) r.expert_ids[b] = e;
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

namespace moejit::test {

// Routing as an expert-parallel rank sees it: `global` experts of which `experts` live here, at
// random global ids (the highest included) in a random local order; a few map entries then
// broken the ways an unchecked map can be (a second global id for a local expert, ids past the
// local count, negatives other than -1), which the align must survive without a stray write.
struct RandomRouting {
  std::vector<std::int32_t> ids, map;
  std::int32_t global = 0;
};

inline RandomRouting random_routing(std::mt19937& rng, std::int32_t numel, std::int32_t experts, bool with_map) {
  RandomRouting r;
  r.global = with_map ? experts + static_cast<std::int32_t>(rng() % (3 * experts + 1)) : experts;
  r.ids = random_ids(rng, numel, r.global);
  if (!with_map) return r;
  std::vector<std::int32_t> globals(r.global);
  for (std::int32_t g = 0; g < r.global; ++g) globals[g] = g;
  std::shuffle(globals.begin(), globals.end(), rng);
  std::swap(*std::find(globals.begin(), globals.end(), r.global - 1), globals[rng() % experts]);
  r.map.assign(r.global, -1);
  for (std::int32_t l = 0; l < experts; ++l) r.map[globals[l]] = l;
  const std::int32_t broken[] = {0, experts - 1, experts, experts + 3, -2, std::numeric_limits<std::int32_t>::min()};
  for (std::int32_t g = experts; g < r.global; ++g)
    if (rng() % 8 == 0) r.map[globals[g]] = broken[rng() % 6];
  return r;
}

}  // namespace moejit::test
