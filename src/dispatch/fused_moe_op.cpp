#include "dispatch/fused_moe_op.hpp"

#include <algorithm>
#include <tuple>
#include <vector>

#include "dispatch/tile_configs.hpp"
#include "kernels/act_quantize.hpp"
#include "kernels/grouped_gemm.hpp"
#include "kernels/moe_align.hpp"
#include "kernels/moe_reduce.hpp"
#include "moe/quantize_params.cuh"
#include "moe/reduce_params.cuh"
#include "quant/formats.hpp"
#include "quant/pack.hpp"
#include "spec/act_scale_rule.hpp"
#include "spec/arch.hpp"
#include "spec/spec_fields.hpp"
#include "support/log.hpp"

namespace moejit::dispatch {
namespace {

constexpr std::uint64_t kAlign = 256;  // every workspace region starts 256-byte aligned

std::uint64_t round_up(std::uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

std::uint32_t global_experts(const FusedMoeRequest& r) { return r.global_experts ? r.global_experts : r.w13.experts; }

// The activations both GEMMs read: e4m3 (W4A8) or e2m1 (W4A4) rows when the weights were packed
// for them, else none (the hidden states' own 16-bit type).
DType quantized_act(const FusedMoeRequest& r) { return quant::quantized_act_of(r.w13.order); }
bool is_quantized(const FusedMoeRequest& r) { return quantized_act(r) != DType::none; }
// The layer quantizes the hidden states itself (quantized weights, 16-bit hidden states).
bool quantizes_hidden(const FusedMoeRequest& r) { return is_quantized(r) && r.act != quantized_act(r); }
// The 16-bit type of the gate/up output and of the pair rows: the hidden states' for W4A16; bf16
// with quantized activations (its range covers what the quantization is given, and f16's extra
// bits would be lost to e4m3 or e2m1 anyway).
DType row_dtype(const FusedMoeRequest& r) { return is_quantized(r) ? DType::bf16 : r.act; }
// Quantized rows of `k` values: bytes per row, and their scales' bytes per row and stride between
// rows (in the scales' unit: f32 for e4m3, 0 for one per row; bytes for e2m1, rows 16-byte aligned).
std::uint64_t quantized_row_bytes(ActScale s, std::uint64_t k) { return s == ActScale::block32 ? k / 2 : k; }
std::int64_t scale_stride(ActScale s, std::uint64_t k) {
  return static_cast<std::int64_t>(s == ActScale::block128 ? k / 128 : s == ActScale::block32 ? (k / 32 + 15) / 16 * 16 : 0);
}
std::uint64_t scale_row_bytes(ActScale s, std::uint64_t k) {
  return s == ActScale::block32 ? static_cast<std::uint64_t>(scale_stride(s, k)) : s == ActScale::block128 ? k / 128 * 4 : 4;
}

// Quantizes `rows` rows of `n` 16-bit values at `in` to e4m3 or e2m1 at `out`, scales at `scales`.
Status run_quantize(OpContext& ctx, const KernelSpec& spec, const void* in, void* out, void* scales, std::int32_t rows,
                    std::int64_t rows_per_expert, const char* what, void* stream) {
  ActQuantizeParams q{};
  q.in = in;
  q.out = out;
  q.scales = scales;
  q.ld_in = spec.n;
  q.ld_out = static_cast<std::int64_t>(quantized_row_bytes(spec.act_scale, spec.n));
  q.scale_ld = scale_stride(spec.act_scale, spec.n);
  q.rows = rows;
  return run_kernel(ctx, spec, act_quantize_grid(rows), &q, sizeof q, stream,
                    Decision{what, rows, rows_per_expert, std::nullopt});
}

// Where each intermediate lives in the workspace. The routing and activation regions are sized
// for max_tokens and every block size, so one workspace serves every T up to max_tokens (graph
// capture at several batch sizes); the split-K region after them is laid out per call for the
// call's kernels (its size for any T up to max_tokens is bounded by fused_moe_workspace). The
// routing align zeroes the split-K counters at the start of every call, so the caller's
// workspace may hold anything.
// Quantized activations (W4A8, W4A4) add the quantized hidden states (when given in 16 bits) and
// the quantized gate/up output, each with its scales.
struct WorkspaceLayout {
  std::uint64_t sorted = 0, expert_ids = 0, post_pad = 0, intermediate = 0, pairs = 0;
  std::uint64_t hidden_q = 0, hidden_scales = 0, intermediate_q = 0, intermediate_scales = 0;
  std::uint64_t split = 0;
};

WorkspaceLayout workspace_layout(const FusedMoeRequest& r) {
  const std::int64_t max_pairs = static_cast<std::int64_t>(std::max(r.max_tokens, r.tokens)) * r.topk;
  const std::uint32_t experts = r.w13.experts;  // the align gives slots to local experts only
  std::int64_t slots = 0, blocks = 0;
  for (std::uint16_t bm : kGemmBlockRows) {
    slots = std::max<std::int64_t>(slots, align_max_padded(max_pairs, experts, bm));
    blocks = std::max<std::int64_t>(blocks, align_max_blocks(max_pairs, experts, bm));
  }
  const std::uint64_t inter = r.w13.n / 2, hidden = r.w13.k, rows = static_cast<std::uint64_t>(max_pairs);
  const std::uint64_t tokens = static_cast<std::uint64_t>(std::max(r.max_tokens, r.tokens));
  WorkspaceLayout l;
  l.sorted = 0;
  l.expert_ids = l.sorted + round_up(static_cast<std::uint64_t>(slots) * 4);
  l.post_pad = l.expert_ids + round_up(static_cast<std::uint64_t>(blocks) * 4);
  l.intermediate = l.post_pad + kAlign;
  l.pairs = l.intermediate + round_up(rows * inter * 2);
  l.hidden_q = l.pairs + round_up(rows * hidden * 2);
  const bool own_hidden = quantizes_hidden(r), quantized = is_quantized(r);
  const ActScale s = r.act_scale;
  l.hidden_scales = l.hidden_q + (own_hidden ? round_up(tokens * quantized_row_bytes(s, hidden)) : 0);
  l.intermediate_q = l.hidden_scales + (own_hidden ? round_up(tokens * scale_row_bytes(s, hidden)) : 0);
  l.intermediate_scales = l.intermediate_q + (quantized ? round_up(rows * quantized_row_bytes(s, inter)) : 0);
  l.split = l.intermediate_scales + (quantized ? round_up(rows * scale_row_bytes(s, inter)) : 0);
  return l;
}

// The split-K region of one call: both GEMMs' counters (zeroed by the align), then both
// GEMMs' partial sums.
struct SplitRegion {
  std::uint64_t up_counters = 0, down_counters = 0;  // u32 words
  std::uint64_t counters = 0, up_partials = 0, down_partials = 0, bytes = 0;  // offsets from the region start
};

SplitRegion split_region(const KernelSpec& up, const KernelSpec& down, std::int32_t pairs) {
  const GemmTiles up_tiles = grouped_gemm_tiles(up, pairs), down_tiles = grouped_gemm_tiles(down, pairs);
  SplitRegion s;
  s.up_counters = grouped_gemm_counter_count(up, up_tiles);
  s.down_counters = grouped_gemm_counter_count(down, down_tiles);
  s.counters = 0;
  s.up_partials = round_up((s.up_counters + s.down_counters) * 4);
  s.down_partials = s.up_partials + round_up(grouped_gemm_partial_bytes(up, up_tiles));
  s.bytes = s.down_partials + round_up(grouped_gemm_partial_bytes(down, down_tiles));
  return s;
}

// What the layer's shapes allow: enough to choose kernels and size the workspace, so the
// workspace query needs no data pointers (engines size it at start-up, before any batch).
Status check_shapes(const FusedMoeRequest& r) {
  if (r.tokens < 0)
    return error(Code::invalid_argument, "argument 'tokens' = {}: expected >= 0 (0: an empty batch)", r.tokens);
  if (r.max_tokens != 0 && r.max_tokens < r.tokens)
    return error(Code::invalid_argument, "argument 'max_tokens' = {}: expected 0 or at least tokens = {}", r.max_tokens,
                 r.tokens);
  if (r.topk == 0 || r.topk > 64) return error(Code::invalid_argument, "argument 'topk' = {}: expected 1 to 64", r.topk);
  if (r.activation != Epilogue::silu_and_mul && r.activation != Epilogue::swiglu_oai)
    return error(Code::invalid_argument, "argument 'activation' = {}: expected silu_and_mul or swiglu_oai",
                 to_string(r.activation));
  if (!r.w13.act_and_mul)
    return error(Code::invalid_argument, "argument 'w13': packed as plain rows; expected gate/up (act_and_mul) weights");
  if (r.w2.act_and_mul)
    return error(Code::invalid_argument, "argument 'w2': packed with gate/up interleaving; expected plain rows");
  if (r.w2.experts != r.w13.experts)
    return error(Code::invalid_argument, "argument 'w2': {} experts, but w13 has {}", r.w2.experts, r.w13.experts);
  if (r.w2.n != r.w13.k || r.w2.k != r.w13.n / 2)
    return error(Code::invalid_argument,
                 "argument 'w2': N x K = {} x {}; expected H x I = {} x {} (w13 is 2I x H = {} x {})", r.w2.n, r.w2.k,
                 r.w13.k, r.w13.n / 2, r.w13.n, r.w13.k);
  if (global_experts(r) < r.w13.experts)
    return error(Code::invalid_argument, "argument 'global_experts' = {}: fewer than the {} local experts; expected >= local",
                 global_experts(r), r.w13.experts);
  if (global_experts(r) > kMaxRoutedIndex)
    return error(Code::invalid_argument, "argument 'global_experts' = {}: expected at most {}", global_experts(r),
                 kMaxRoutedIndex);
  if (const std::int64_t slots = routed_slots(std::max(r.tokens, r.max_tokens), r.topk, r.w13.experts);
      slots > kMaxRoutedIndex)
    return error(Code::invalid_argument,
                 "argument 'tokens' = {} (max_tokens {}) x topk {}: {} routed slots with padding; expected at most {} "
                 "(fewer tokens per call)",
                 r.tokens, r.max_tokens, r.topk, slots, kMaxRoutedIndex);
  auto packed_for = [&](PackedOrder order) -> std::string_view { return quant::packed_for_name(order, r.w13.format); };
  // Both weights meet the same activations: the same quantized type, or 16-bit ones of either
  // format (whose orders may differ: MXFP4 has one per 16-bit type, INT4 one for both).
  if (quant::quantized_act_of(r.w2.order) != quant::quantized_act_of(r.w13.order))
    return error(Code::invalid_argument,
                 "argument 'w2': packed for {} activations, but w13 for {}; expected both packed with the same act_dtype",
                 quant::packed_for_name(r.w2.order, r.w2.format), packed_for(r.w13.order));
  if (r.act != DType::bf16 && r.act != DType::f16 && r.act != DType::e4m3 && r.act != DType::e2m1)
    return error(Code::invalid_argument, "argument 'act_dtype' = {}: expected bf16, f16, e4m3 or e2m1", to_string(r.act));
  if ((r.act == DType::e4m3 || r.act == DType::e2m1) && r.act != quantized_act(r))
    return error(Code::invalid_argument,
                 "argument 'act_dtype' = {}: the weights were packed for {} activations; expected weights packed with "
                 "act_dtype {} for such hidden states",
                 to_string(r.act), packed_for(r.w13.order), to_string(r.act));
  // 16-bit hidden states with 16-bit weights: MXFP4 tiles are packed for bf16 or for f16, and each
  // weight may have its own format.
  for (const auto& [w, name] : {std::pair{&r.w13, "w13"}, std::pair{&r.w2, "w2"}})
    if (!is_quantized(r) && w->order != quant::packed_order_for(r.act, w->format))
      return error(Code::invalid_argument,
                   "argument 'act_dtype' = {}: the {} weights of '{}' were packed for {} activations; expected weights "
                   "packed with act_dtype {}",
                   to_string(r.act), to_string(w->format), name, quant::packed_for_name(w->order, w->format),
                   quant::packed_act_option_name(quant::packed_order_for(r.act, w->format), w->format));
  if (is_quantized(r)) {
    if (!act_scale_fits(quantized_act(r), r.act_scale))
      return error(Code::invalid_argument,
                   "argument 'act_scale' = {}: the weights were packed for {} activations; expected {} (the scales of "
                   "the hidden states and of the gate/up output)",
                   to_string(r.act_scale), packed_for(r.w13.order), act_scales_for(quantized_act(r)));
    const std::uint32_t block = r.act_scale == ActScale::block128 ? 128 : r.act_scale == ActScale::block32 ? 64 : 1;
    if (r.w13.k % block != 0 || r.w2.k % block != 0)
      return error(Code::invalid_argument,
                   "argument 'act_scale' = {}: hidden = {} and intermediate = {}; expected both multiples of {}",
                   to_string(r.act_scale), r.w13.k, r.w2.k, block);
    // The rows moejit quantizes (the hidden states it is given in 16 bits, always the gate/up
    // output) are held by one block each.
    for (const auto& [quantized, name, value] :
         {std::tuple{quantizes_hidden(r), "hidden", r.w13.k}, std::tuple{true, "intermediate", r.w2.k}})
      if (quantized && value > kActQuantizeMaxColumns)
        return error(Code::invalid_argument,
                     "argument 'w13'/'w2': {} = {} with weights packed for {} activations; expected at most {} (the "
                     "rows moejit quantizes)",
                     name, value, packed_for(r.w13.order), kActQuantizeMaxColumns);
  } else if (!act_scale_fits(r.act, r.act_scale)) {
    return error(Code::invalid_argument,
                 "argument 'act_scale' = {}: the weights were packed for 16-bit activations; expected none (scales "
                 "apply to weights packed for e4m3 or e2m1)",
                 to_string(r.act_scale));
  }
  if (r.out != DType::bf16 && r.out != DType::f16 && r.out != DType::f32)
    return error(Code::invalid_argument, "argument 'out_dtype' = {}: expected bf16, f16 or f32", to_string(r.out));
  return {};
}

// The data a call reads and writes: present, aligned, and a map wherever ids are global.
Status check_data(const FusedMoeRequest& r) {
  // Without a map, topk_ids index the weights directly: a wider range would read past them.
  if (r.expert_map == nullptr && global_experts(r) != r.w13.experts)
    return error(Code::invalid_argument,
                 "argument 'global_experts' = {}: expected the {} local experts when expert_map is NULL (topk_ids then "
                 "index the weights); give an expert_map for expert parallelism",
                 global_experts(r), r.w13.experts);
  // 16-byte rows for the vector loads and stores; 4-byte routing arrays.
  const struct {
    const void* p;
    const char* name;
    std::uintptr_t alignment;
  } pointers[] = {{r.hidden, "hidden", 16}, {r.output, "output", 16}, {r.topk_ids, "topk_ids", 4},
                  {r.topk_weights, "topk_weights", 4}, {r.workspace, "workspace", 256}};
  for (const auto& [p, name, alignment] : pointers) {
    if (p == nullptr && std::string_view(name) != "workspace")
      return error(Code::invalid_argument, "argument '{}' is null: expected a pointer to the call's data", name);
    if (reinterpret_cast<std::uintptr_t>(p) % alignment != 0)
      return error(Code::invalid_argument, "argument '{}' = {}: expected {}-byte alignment", name, p, alignment);
  }
  if (r.expert_map != nullptr && reinterpret_cast<std::uintptr_t>(r.expert_map) % 4 != 0)
    return error(Code::invalid_argument, "argument 'expert_map': expected 4-byte alignment");
  if (r.hidden_scale_k_stride < 0)
    return error(Code::invalid_argument,
                 "argument 'hidden_scale_k_stride' = {}: expected >= 0 (0 or 1: row-major; more: column-major)",
                 r.hidden_scale_k_stride);
  if (r.act == DType::e4m3 || r.act == DType::e2m1) {
    MOEJIT_TRY(check_offset_stride("hidden_scale_ld", r.hidden_scale_ld, std::max(r.tokens, r.max_tokens),
                                   "tokens"));
    MOEJIT_TRY(check_offset_stride("hidden_scale_k_stride", r.hidden_scale_k_stride, r.w13.k / 128 + 1,
                                   "128-column blocks"));
  }
  if (r.hidden_scale_k_stride > 1 && !(r.act == DType::e4m3 && r.act_scale == ActScale::block128))
    return error(Code::invalid_argument,
                 "argument 'hidden_scale_k_stride' = {}: expected 0 or 1 (row-major; only e4m3 hidden states with "
                 "block128 scales may give them column-major)",
                 r.hidden_scale_k_stride);
  if (r.act == DType::e2m1) {
    if (r.hidden_scales == nullptr || reinterpret_cast<std::uintptr_t>(r.hidden_scales) % 16 != 0)
      return error(Code::invalid_argument,
                   "argument 'hidden_scales' = {}: expected the E8M0 scales of the e2m1 hidden states, 16-byte aligned",
                   r.hidden_scales);
    if (r.hidden_scale_ld < r.w13.k / 32 || r.hidden_scale_ld % 16 != 0)
      return error(Code::invalid_argument,
                   "argument 'hidden_scale_ld' = {}: expected a multiple of 16 of at least hidden / 32 = {} (one E8M0 "
                   "byte per 32 columns, 16-byte aligned rows)",
                   r.hidden_scale_ld, r.w13.k / 32);
  }
  if (r.act == DType::e4m3) {
    if (r.hidden_scales == nullptr || reinterpret_cast<std::uintptr_t>(r.hidden_scales) % 4 != 0)
      return error(Code::invalid_argument,
                   "argument 'hidden_scales' = {}: expected the f32 scales of the e4m3 hidden states, 4-byte aligned",
                   r.hidden_scales);
    const bool column_major = r.hidden_scale_k_stride > 1;
    if (r.act_scale == ActScale::block128 && !column_major && r.hidden_scale_ld < r.w13.k / 128)
      return error(Code::invalid_argument,
                   "argument 'hidden_scale_ld' = {}: expected at least hidden / 128 = {} (one f32 per 128 columns)",
                   r.hidden_scale_ld, r.w13.k / 128);
    if (r.act_scale == ActScale::block128 && column_major && r.hidden_scale_ld < 1)
      return error(Code::invalid_argument,
                   "argument 'hidden_scale_ld' = {} with hidden_scale_k_stride = {} (column-major scales): expected >= 1 "
                   "(floats between tokens)",
                   r.hidden_scale_ld, r.hidden_scale_k_stride);
  }
  return {};
}


// Where the routing align and the quantizations write and the GEMMs read; null for spec
// enumeration.
struct LayerBuffers {
  const i32* sorted = nullptr;
  const i32* expert_ids = nullptr;
  const i32* post_pad = nullptr;
  void* intermediate = nullptr;  // gate/up output, bf16/f16
  void* pairs = nullptr;         // down output, bf16/f16
  const void* up_a = nullptr;    // the gate/up GEMM's A: the hidden states, or their quantized copy
  const void* up_scales = nullptr;
  std::int64_t up_scale_ld = 0;
  std::int64_t up_scale_k_stride = 0;  // the caller's column-major block128 scales; 0: row-major
  const void* down_a = nullptr;  // the down GEMM's A: the intermediate, or its quantized copy
  const void* down_scales = nullptr;
  std::int64_t down_scale_ld = 0;
};

// The gate/up and down GEMMs of the layer for tile rows `bm`: the gate/up projection reads one
// hidden row per token and writes one activated row per pair into `intermediate`; the down
// projection reads those and writes each pair's row, scaled by its routing weight, into `pairs`.
struct LayerGemms {
  GroupedGemmRequest up, down;
};

LayerGemms layer_gemms(const FusedMoeRequest& r, std::uint32_t bm, const LayerBuffers& b) {
  const std::uint32_t inter = r.w13.n / 2, hidden = r.w13.k;
  LayerGemms g;
  GroupedGemmRequest& up = g.up;
  up.weights = r.w13;
  up.act = is_quantized(r) ? quantized_act(r) : r.act;
  up.act_scale = r.act_scale;
  up.out = row_dtype(r);
  up.layout = Layout::indexed;
  up.epilogue = r.activation;
  up.block_size = bm;
  up.params.m = r.tokens * static_cast<i32>(r.topk);
  up.params.a = b.up_a;
  up.params.lda = hidden;
  up.params.a_scales = b.up_scales;
  up.params.a_scale_ld = b.up_scale_ld;
  up.params.a_scale_k_stride = b.up_scale_k_stride;
  up.params.c = b.intermediate;
  up.params.ldc = inter;
  up.params.sorted_token_ids = b.sorted;
  up.params.expert_ids = b.expert_ids;
  up.params.num_tokens_post_pad = b.post_pad;
  up.params.a_row_divisor = static_cast<i32>(r.topk);
  up.topk_hint = r.topk;
  up.global_experts_hint = global_experts(r);
  up.fused_layer = true;
  GroupedGemmRequest& down = g.down;
  down = up;
  down.weights = r.w2;
  down.epilogue = Epilogue::topk_weight;
  down.params.a = b.down_a;
  down.params.lda = inter;
  down.params.a_scales = b.down_scales;
  down.params.a_scale_ld = b.down_scale_ld;
  down.params.a_scale_k_stride = 0;  // the layer's own scales: row-major
  down.params.c = b.pairs;
  down.params.ldc = hidden;
  down.params.a_row_divisor = 1;
  down.params.topk_weights = r.topk_weights;
  // The down projection's routing, split-K counters and weights are complete when the gate/up
  // GEMM begins: it requests its first weights before waiting for the gate/up output.
  down.params.weights_before_dependency = 1;
  return g;
}

// The caller's weights on this context's target. Warm-up enumerates specs for targets without
// checking this: it lists each GEMM that cannot be built there instead of stopping.
Status check_target(const FusedMoeRequest& r, Arch arch) {
  if (quantized_act(r) == DType::e4m3 && arch_info(arch).sm < 89)
    return error(Code::unsupported,
                 "argument 'w13': packed for e4m3 activations (W4A8), which need the FP8 mma of sm_89 or newer; this "
                 "target is {} (pack for bf16 or f16 activations there)",
                 arch_info(arch).name);
  return {};
}

}  // namespace

namespace {

// The smallest tile rows that cover the rows each busy local expert gets on average.
std::uint16_t covering_block_rows(const FusedMoeRequest& r) {
  const double pairs = static_cast<double>(r.tokens) * r.topk;
  return pick_block_rows(routed_rows(pairs, r.w13.experts, global_experts(r), r.topk).per_busy_expert);
}

// How much faster (predicted) a shorter tile must be to be taken: the model's figures are
// estimates (the mma rates, L2 hits for the re-read weights), and a shorter tile reads each
// expert's weights more often.
constexpr double kShorterTileGain = 0.03;

// The layer's tile rows, which are also the align block size. Routed rows scatter around their
// mean (binomially), so a tile that just covers the mean gives many busy experts a second tile,
// mostly rows without a token, which the mma's multiply all the same. Shorter tiles pad less,
// but have more CTAs read each busy expert's weights: the time model (gemm_time_model.hpp, its
// mma bound counting the padded rows) weighs the covering tile and each one half as tall as the
// last, down to 16 rows, for both GEMMs of the layer, with an expert's weights coming from DRAM
// once (the CTAs of its row tiles are neighbours in the grid) and every CTA's bytes passing
// through its SM. A shorter tile replaces the best so far only when it is kShorterTileGain faster.
// Weighed on the device the layer runs on: sm_90a's wgmma tiles want taller rows than the
// mma.sync tiles of other targets (bench/perf_model/README.md), and a device of fewer SMs fills
// with fewer, taller tiles. So the rows are a function of the layer, T and the device, and a usage
// manifest records the layer (LayerCall) for warm-up to ask another target.
std::uint16_t layer_block_rows(const FusedMoeRequest& r, Arch arch, std::uint32_t sms) {
  const std::uint16_t covering = covering_block_rows(r);
  if (covering == kGemmBlockRows.front()) return covering;
  auto layer_seconds = [&](std::uint16_t bm) {
    const LayerGemms g = layer_gemms(r, bm, {});
    double seconds = 0;
    for (const GroupedGemmRequest* gemm : {&g.up, &g.down}) {
      const GemmPlan p = plan_gemm(gemm_work(*gemm), bm, arch, sms);
      seconds += std::max(p.weights_seconds, p.sm_seconds);
    }
    return seconds;
  };
  std::uint16_t best = covering;
  double best_seconds = layer_seconds(covering);
  for (std::uint16_t bm = covering / 2; bm >= kGemmBlockRows.front(); bm /= 2) {
    const double seconds = layer_seconds(bm);
    if (seconds < best_seconds * (1 - kShorterTileGain)) {
      best = bm;
      best_seconds = seconds;
    }
  }
  return best;
}

// fused_moe_specs for a request whose shapes were checked (run and the workspace scan check them
// once, not per call of this).
Result<FusedMoeSpecs> specs_of_checked(const FusedMoeRequest& r, Arch arch, Backend backend, std::uint32_t sms) {
  if (quantized_act(r) == DType::e2m1 && !has_block_scale_mma(arch))
    return error(Code::unsupported,
                 "argument 'w13': packed for e2m1 activations (W4A4), which need the block-scaled mma of sm_120a or "
                 "sm_121a; this target is {} (pack for e4m3 or bf16 activations there)",
                 arch_info(arch).name);
  const std::uint16_t bm = layer_block_rows(r, arch, sms);

  FusedMoeSpecs s;
  s.align.op = Op::moe_align;
  s.align.arch = arch;
  s.align.backend = backend;
  s.align.experts = r.w13.experts;  // buckets are local experts (see moe/align_params.cuh)
  s.align.bm = bm;
  s.align.warps = moe_align_warps(r.w13.experts, arch);

  const LayerGemms gemms = layer_gemms(r, bm, {});
  MOEJIT_ASSIGN_OR_RETURN(s.up, grouped_gemm_spec(gemms.up, arch, backend, sms));
  MOEJIT_ASSIGN_OR_RETURN(s.down, grouped_gemm_spec(gemms.down, arch, backend, sms));
  if (quantizes_hidden(r)) s.quantize_hidden = act_quantize_spec(r.act, r.act_scale, r.w13.k, arch, backend);
  if (is_quantized(r)) s.quantize_intermediate = act_quantize_spec(row_dtype(r), r.act_scale, r.w2.k, arch, backend);

  s.reduce.op = Op::moe_reduce;
  s.reduce.arch = arch;
  s.reduce.backend = backend;
  s.reduce.act = row_dtype(r);
  s.reduce.out = r.out;
  s.reduce.n = r.w13.k;
  s.reduce.warps = kMoeReduceWarps;
  return s;
}

}  // namespace

Result<FusedMoeSpecs> fused_moe_specs(const FusedMoeRequest& r, Arch arch, Backend backend, std::uint32_t sms) {
  MOEJIT_TRY(check_shapes(r));
  return specs_of_checked(r, arch, backend, sms);
}

LayerCall layer_call(const FusedMoeRequest& r, Arch arch, Backend backend) {
  LayerCall c;
  c.arch = arch;
  c.backend = backend;
  c.w13_weight = r.w13.format;
  c.w13_scale = r.w13.scale;
  c.w13_group_size = r.w13.group_size;
  c.w13_packed_for = quant::packed_act_of(r.w13.order);
  c.w2_weight = r.w2.format;
  c.w2_scale = r.w2.scale;
  c.w2_group_size = r.w2.group_size;
  c.w2_packed_for = quant::packed_act_of(r.w2.order);
  c.act = r.act;
  c.act_scale = r.act_scale;
  c.out = r.out;
  c.activation = r.activation;
  c.hidden = r.w13.k;
  c.intermediate = r.w13.n / 2;
  c.experts = r.w13.experts;
  c.global_experts = global_experts(r);
  c.topk = r.topk;
  const auto tokens = static_cast<std::uint32_t>(std::clamp<std::int64_t>(r.tokens, 1, kLayerMaxTokens));
  std::tie(c.tokens_from, c.tokens_to) = layer_token_range(tokens);
  return c;
}

Result<FusedMoeRequest> layer_request(const LayerCall& c, std::int32_t tokens) {
  // What packing checks of a caller's weights; a record read from disk has not been through it.
  if (c.intermediate > kMaxPackedExtent / 2)
    return error(Code::invalid_argument, "argument 'w13.n' = 2 x intermediate = {}: expected at most {}",
                 2ull * c.intermediate, kMaxPackedExtent);
  const std::uint32_t gate_up = 2 * c.intermediate;
  MOEJIT_TRY(quant::check_packed_extents(c.experts, gate_up, c.hidden, "w13."));
  MOEJIT_TRY(quant::check_packed_extents(c.experts, c.hidden, c.intermediate, "w2."));
  MOEJIT_TRY(quant::check_weight_format(c.w13_weight, c.w13_group_size, c.w13_scale, c.hidden, "w13."));
  MOEJIT_TRY(quant::check_weight_format(c.w2_weight, c.w2_group_size, c.w2_scale, c.intermediate, "w2."));
  FusedMoeRequest r;
  r.w13 = {c.w13_weight, c.w13_group_size, c.w13_scale, c.experts, gate_up, c.hidden, true,
           nullptr, nullptr, nullptr, nullptr, quant::packed_order_for(c.w13_packed_for, c.w13_weight)};
  r.w2 = {c.w2_weight, c.w2_group_size, c.w2_scale, c.experts, c.hidden, c.intermediate, false,
          nullptr, nullptr, nullptr, nullptr, quant::packed_order_for(c.w2_packed_for, c.w2_weight)};
  r.act = c.act;
  r.act_scale = c.act_scale;
  r.out = c.out;
  r.activation = c.activation;
  r.topk = c.topk;
  r.global_experts = c.global_experts;
  r.tokens = tokens;
  return r;
}

Result<std::uint64_t> fused_moe_workspace(const FusedMoeRequest& r, Arch arch, std::uint32_t sms) {
  MOEJIT_TRY(check_shapes(r));
  MOEJIT_TRY(check_target(r, arch));
  if (std::max(r.tokens, r.max_tokens) == 0) return std::uint64_t{0};  // only empty batches: none used
  // The split-K region is largest at some T up to max_tokens; only decode tiles that cover the
  // mean rows per busy expert split (plan_gemm), and those rows grow with T, so the scan stops
  // at the first T whose covering tile is a prefill one.
  std::uint64_t split = 0;
  FusedMoeRequest at = r;
  for (std::int32_t t = 1; t <= std::max(r.max_tokens, r.tokens); ++t) {
    at.tokens = t;
    // Checked above for max(tokens, max_tokens), which bounds every t.
    MOEJIT_ASSIGN_OR_RETURN(FusedMoeSpecs s, specs_of_checked(at, arch, Backend::device, sms));
    // A size is promised only for a layer whose kernels exist: each spec passes the checks that
    // compiling it would make (the run checks them when it resolves them).
    for (const KernelSpec* spec : {&s.align, &s.up, &s.down, &s.quantize_hidden, &s.quantize_intermediate, &s.reduce})
        if (spec->op != Op::none) MOEJIT_TRY(validate_spec(*spec));
    if (covering_block_rows(at) > kMaxSplitRows) break;
    split = std::max(split, split_region(s.up, s.down, t * static_cast<std::int32_t>(r.topk)).bytes);
  }
  return workspace_layout(r).split + split;
}

Status check_routing_inputs(Launcher& launcher, const FusedMoeRequest& r, void* stream, bool on_device) {
  const std::size_t count = static_cast<std::size_t>(r.tokens) * r.topk;
  const std::uint32_t experts = global_experts(r);
  const std::int32_t* ids = r.topk_ids;
  const std::int32_t* map = r.expert_map;
  std::vector<std::int32_t> ids_copy, map_copy;
  if (launcher.backend() != Backend::host) {
    if (!on_device) return {};
    MOEJIT_ASSIGN_OR_RETURN(const bool capturing, launcher.capturing(stream));
    if (capturing) {
      log(LogLevel::warn,
          "MOEJIT_CHECK_INPUTS: stream {} is being captured into a CUDA graph, so this fused call's topk_ids and "
          "expert_map are not checked (copying them to the host would end the capture); they are checked on "
          "calls outside a capture",
          stream);
      return {};
    }
    ids_copy.resize(count);
    MOEJIT_TRY(launcher.copy_from_backend(ids_copy.data(), r.topk_ids, count * sizeof(std::int32_t), stream));
    ids = ids_copy.data();
    if (map != nullptr) {
      map_copy.resize(experts);
      MOEJIT_TRY(launcher.copy_from_backend(map_copy.data(), r.expert_map, experts * sizeof(std::int32_t), stream));
      map = map_copy.data();
    }
    MOEJIT_TRY(launcher.synchronize(stream));
  }
  for (std::size_t i = 0; i < count; ++i)
    if (ids[i] < 0 || static_cast<std::uint32_t>(ids[i]) >= experts)
      return error(Code::invalid_argument, "argument 'topk_ids[{}]' (token {}, k {}) = {}: expected an expert id in [0, {})",
                   i, i / r.topk, i % r.topk, ids[i], experts);
  if (map != nullptr)
    for (std::uint32_t e = 0; e < experts; ++e)
      if (map[e] < -1 || map[e] >= static_cast<std::int32_t>(r.w13.experts))
        return error(Code::invalid_argument,
                     "argument 'expert_map[{}]' = {}: expected a local expert in [0, {}) or -1 (not on this rank)", e,
                     map[e], r.w13.experts);
  return {};
}

Status run_fused_moe(OpContext& ctx, const FusedMoeRequest& r, void* stream) {
  // The shapes first: a call whose layer is wrong is told so before anything about its data.
  MOEJIT_TRY(check_shapes(r));
  const Arch arch = ctx.launcher.arch();
  MOEJIT_TRY(check_target(r, arch));
  // An empty batch (an expert-parallel rank no token was routed to): nothing to read or write;
  // its tensors' pointers may be anything, NULL included.
  if (r.tokens == 0) return {};
  MOEJIT_TRY(check_data(r));
  MOEJIT_ASSIGN_OR_RETURN(FusedMoeSpecs specs,
                          specs_of_checked(r, arch, ctx.launcher.backend(), ctx.launcher.sm_count()));
  ctx.observer.used_layer(layer_call(r, arch, ctx.launcher.backend()));
  MOEJIT_TRY(check_routing_inputs(ctx.launcher, r, stream, ctx.check_inputs_on_device));
  const i32 numel = r.tokens * static_cast<i32>(r.topk);
  const WorkspaceLayout l = workspace_layout(r);
  const SplitRegion split = split_region(specs.up, specs.down, numel);
  if (r.workspace == nullptr)
    return error(Code::invalid_argument,
                 "argument 'workspace' is null: expected {} bytes or more for this layer at {} tokens; size it with "
                 "moejit_fused_moe_workspace_size for max_tokens",
                 l.split + split.bytes, r.tokens);
  if (r.workspace_bytes < l.split + split.bytes)
    return error(Code::invalid_argument,
                 "argument 'workspace_bytes' = {}: expected at least {} for this layer at {} tokens; size it with "
                 "moejit_fused_moe_workspace_size for max_tokens",
                 r.workspace_bytes, l.split + split.bytes, r.tokens);
  auto* ws = static_cast<unsigned char*>(r.workspace);
  auto* sorted = reinterpret_cast<i32*>(ws + l.sorted);
  auto* expert_ids = reinterpret_cast<i32*>(ws + l.expert_ids);
  auto* post_pad = reinterpret_cast<i32*>(ws + l.post_pad);
  unsigned char* split_base = ws + l.split;
  auto* counters = reinterpret_cast<u32*>(split_base + split.counters);
  const std::int64_t rows_per_expert = specs.align.bm;
  const std::uint32_t hidden = r.w13.k;

  // 1. Routing align.
  MoeAlignParams align{};
  align.topk_ids = r.topk_ids;
  align.expert_map = r.expert_map;
  align.sorted_token_ids = sorted;
  align.expert_ids = expert_ids;
  align.num_tokens_post_pad = post_pad;
  align.numel = numel;
  align.global_experts = static_cast<i32>(global_experts(r));
  align.clear_words = counters;
  align.clear_count = static_cast<i32>(split.up_counters + split.down_counters);
  MOEJIT_TRY(run_kernel(ctx, specs.align, moe_align_grid(), &align, sizeof align, stream,
                        Decision{"fused_moe align", numel, rows_per_expert, std::nullopt}));

  LayerBuffers b{sorted, expert_ids, post_pad, ws + l.intermediate, ws + l.pairs};
  b.up_a = r.hidden;
  b.down_a = b.intermediate;
  if (is_quantized(r)) {
    b.up_scales = r.hidden_scales;
    b.up_scale_ld = r.act_scale == ActScale::token ? 0 : r.hidden_scale_ld;
    b.up_scale_k_stride = r.hidden_scale_k_stride;  // check_data: above 1 only for block128
    b.down_a = ws + l.intermediate_q;
    b.down_scales = ws + l.intermediate_scales;
    b.down_scale_ld = scale_stride(r.act_scale, r.w2.k);
  }

  // 2. Quantized activations with 16-bit hidden states: quantize them.
  if (quantizes_hidden(r)) {
    MOEJIT_TRY(run_quantize(ctx, specs.quantize_hidden, r.hidden, ws + l.hidden_q, ws + l.hidden_scales, r.tokens,
                            rows_per_expert, "fused_moe quantize hidden", stream));
    b.up_a = ws + l.hidden_q;
    b.up_scales = ws + l.hidden_scales;
    b.up_scale_ld = scale_stride(r.act_scale, hidden);
    b.up_scale_k_stride = 0;
  }

  // 3-4. Gate/up projection with the activation (then, for quantized activations, its output
  // quantized), then the
  // down projection with the routing weights.
  LayerGemms gemms = layer_gemms(r, specs.align.bm, b);
  gemms.up.workspace = split.up_counters ? split_base + split.up_partials : nullptr;
  gemms.up.workspace_bytes = split.up_counters ? split.down_partials - split.up_partials : 0;
  gemms.down.workspace = split.down_counters ? split_base + split.down_partials : nullptr;
  gemms.down.workspace_bytes = split.down_counters ? split.bytes - split.down_partials : 0;
  gemms.up.counters = counters;
  gemms.down.counters = counters + split.up_counters;
  MOEJIT_TRY(run_grouped_gemm(ctx, gemms.up, stream));
  if (is_quantized(r)) {
    // Every pair row is quantized, computed or not (rows of experts on other ranks hold stale
    // bytes; no GEMM reads their quantized copies, and the reduction skips their pairs).
    MOEJIT_TRY(run_quantize(ctx, specs.quantize_intermediate, b.intermediate, ws + l.intermediate_q,
                            ws + l.intermediate_scales, numel, rows_per_expert, "fused_moe quantize intermediate",
                            stream));
  }
  MOEJIT_TRY(run_grouped_gemm(ctx, gemms.down, stream));

  // 5. Sum each token's pairs in k order.
  MoeReduceParams reduce{};
  reduce.pairs = b.pairs;
  reduce.topk_ids = r.topk_ids;
  reduce.expert_map = r.expert_map;
  reduce.out = r.output;
  reduce.ld_pairs = hidden;
  reduce.ld_out = hidden;
  reduce.tokens = r.tokens;
  reduce.topk = static_cast<i32>(r.topk);
  reduce.experts = static_cast<i32>(global_experts(r));
  reduce.local_experts = static_cast<i32>(r.w13.experts);
  return run_kernel(ctx, specs.reduce, moe_reduce_grid(specs.reduce, r.tokens), &reduce, sizeof reduce, stream,
                    Decision{"fused_moe reduce", r.tokens, rows_per_expert, std::nullopt});
}

}  // namespace moejit::dispatch
