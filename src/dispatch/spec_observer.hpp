#pragma once
// Makes every dispatch decision observable (DESIGN §8): the first time a context uses a kernel
// spec, it is printed (MOEJIT_PRINT_CONFIGS=1) with the reason it was chosen, and appended to
// the usage manifest (one JSON record per line) that `moejit warmup --from-usage` reads to warm
// exactly what a previous run used, or what another target's heuristic would pick for the same
// calls. Later uses cost one shared-lock hash probe, no allocation.

#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit::dispatch {

// Why a spec was chosen: the op and the problem size the heuristic saw. Plain data, so that
// recording a use costs nothing when the spec has been seen before.
// A grouped GEMM call's inputs to its tile choice that its spec does not hold (the rest, N, K,
// formats, layout and the indexed layout's tile rows, are in the spec). With them, warm-up asks
// another target's heuristic what it would pick for the same call.
struct GemmCall {
  std::uint32_t m = 0;  // at most 2^31 - 1, as the GEMM's
  std::uint32_t rows_per_expert_hint = 0, topk_hint = 0, global_experts_hint = 0;
  std::uint32_t weights_before_dependency = 0;
  // 1: one of a fused layer's GEMMs, whose tile rows are the layer's (its LayerCall record
  // re-targets it); 0: a grouped GEMM call of the caller's own.
  std::uint32_t fused_layer = 0;
  friend bool operator==(const GemmCall&, const GemmCall&) = default;
};

// A fused MoE layer call's inputs to the choice of its kernels. Its tile rows, which the align
// and both GEMMs follow, are weighed on the device the layer runs on (fused_moe_op.cpp), so the
// kernels of one GEMM do not say what another target would run for the layer: warm-up asks that
// target for the whole layer at every batch size from tokens_from to tokens_to. A run records
// each batch size up to kLayerExactTokens as it is, and larger ones as the range from the power
// of two below (excluded) to the one above, so a prefill server adds a line per layer and power
// of two, not per batch size.
struct LayerCall {
  Arch arch = Arch::none;
  Backend backend = Backend::device;
  WeightFormat w13_weight = WeightFormat::none, w2_weight = WeightFormat::none;
  DType w13_scale = DType::none, w2_scale = DType::none;
  std::uint32_t w13_group_size = 0, w2_group_size = 0;
  // The activations each projection's tiles were packed for (quant::packed_act_of).
  DType w13_packed_for = DType::none, w2_packed_for = DType::none;
  DType act = DType::none, out = DType::none;
  ActScale act_scale = ActScale::none;
  Epilogue activation = Epilogue::none;
  std::uint32_t hidden = 0, intermediate = 0, experts = 0, global_experts = 0, topk = 0;
  std::uint32_t tokens_from = 0, tokens_to = 0;
  friend bool operator==(const LayerCall&, const LayerCall&) = default;
};
inline constexpr std::uint32_t kLayerExactTokens = 256;
inline constexpr std::uint32_t kLayerMaxTokens = 1u << 20;
// The batch sizes a record of a layer called with `tokens` (1 to kLayerMaxTokens) stands for.
std::pair<std::uint32_t, std::uint32_t> layer_token_range(std::uint32_t tokens);

struct Decision {
  const char* op = "";
  std::int64_t rows = 0;             // M as the op received it (pairs, rows, max rows)
  std::int64_t rows_per_expert = 0;  // what the tile choice was made from
  std::optional<GemmCall> gemm;      // grouped GEMMs: the call the tile was chosen for
};

// One line of a usage manifest: a spec a context used, and for a grouped GEMM the call that chose
// it (lines written before calls were recorded hold the spec alone); or a fused layer's call
// (`layer`, with no spec: op none).
struct UsageRecord {
  KernelSpec spec{};
  std::optional<GemmCall> gemm;
  std::optional<LayerCall> layer;
  friend bool operator==(const UsageRecord&, const UsageRecord&) = default;
};
struct UsageRecordHash {
  std::size_t operator()(const UsageRecord& r) const noexcept;
};

// The manifest line of `record`: the spec's JSON alone, {"spec": ..., "gemm_call": ...}, or
// {"fused_moe": ...}.
std::string usage_record_json(const UsageRecord& record);

class SpecObserver {
 public:
  // `manifest`: file to append used specs to ("" for none); records it already lists (from
  // earlier runs) are not appended again, so it does not grow with every restart: a grouped GEMM
  // adds a line per spec and problem size (M) it was called with where its tile depends on M
  // (decode tiles), a line per spec otherwise (stand_in_call). `print`: log each first use.
  SpecObserver(std::string manifest, bool print);

  void used(const KernelSpec& spec, const Decision& why);
  // A fused layer's call: recorded in the manifest (a line per layer and token range), not printed
  // (its kernels are). Costs nothing without a manifest.
  void used_layer(const LayerCall& call);

  const std::string& manifest() const { return manifest_; }

 private:
  // Appends `record` to the manifest the first time this context uses it; `why`: print it too.
  void remember(const UsageRecord& record, const Decision* why);

  std::string manifest_;
  bool print_;
  std::shared_mutex mutex_;
  // Both hold records as remembered_as (spec_observer.cpp) keys them.
  std::unordered_set<UsageRecord, UsageRecordHash> seen_;      // used by this context
  std::unordered_set<UsageRecord, UsageRecordHash> recorded_;  // in the manifest
};

// Records listed in a usage manifest, in order, without repeats. Malformed lines are errors
// naming the file and line, except a last line without its newline (a writer stopped in the
// middle of it), which is skipped with a warning. A manifest that lists no spec is an error.
Result<std::vector<UsageRecord>> read_usage_manifest(const std::string& path);

}  // namespace moejit::dispatch
