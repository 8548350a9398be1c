#pragma once
// The fused MoE layer: routing align -> gate/up GEMM with the activation -> down GEMM with the
// routing weights -> top-k reduction in fixed k order. Four launches (quantized activations add
// the quantization of 16-bit hidden states and of the gate/up output), no allocation, no host
// synchronization: the caller's workspace holds every intermediate (graph-capturable).

#include <cstdint>

#include "dispatch/grouped_gemm_op.hpp"

namespace moejit::dispatch {

// Weights packed for e4m3 activations (PackedOrder::a8) make the layer W4A8: both GEMMs read
// e4m3 rows with f32 scales of granularity `act_scale` (token or block128). Weights packed for
// e2m1 ones (PackedOrder::a4, MXFP4) make it W4A4: e2m1 rows with E8M0 scales per 32 (block32).
// The hidden states come quantized (act e4m3 / e2m1, with hidden_scales) or in bf16/f16, which
// the layer quantizes itself; the gate/up output is quantized the same way before the down
// projection (recipes in moe/quantize_params.cuh). Between the GEMMs and before the reduction
// the rows are bf16.
struct FusedMoeRequest {
  PackedWeightsView w13;  // N = 2I, K = H, act-and-mul columns
  PackedWeightsView w2;   // N = H, K = I
  DType act = DType::bf16;  // the hidden states: bf16, f16, or e4m3 / e2m1 (weights packed for it)
  DType out = DType::bf16;
  Epilogue activation = Epilogue::silu_and_mul;
  std::int32_t tokens = 0;
  std::uint32_t topk = 0;
  std::uint32_t global_experts = 0;  // 0: w13.experts
  const void* hidden = nullptr;      // [T, H]
  const std::int32_t* topk_ids = nullptr;
  const float* topk_weights = nullptr;
  const std::int32_t* expert_map = nullptr;  // [global_experts] -> local or -1; null: identity
  void* output = nullptr;                    // [T, H]
  void* workspace = nullptr;
  std::uint64_t workspace_bytes = 0;
  std::int32_t max_tokens = 0;               // 0: tokens
  ActScale act_scale = ActScale::none;       // W4A8: token or block128; W4A4: block32; else none
  // act e4m3: f32 [T] (token) or [T, hidden_scale_ld] (block128); act e2m1: E8M0 bytes
  // [T, hidden_scale_ld] (block32, 16-byte aligned rows)
  const void* hidden_scales = nullptr;
  std::int64_t hidden_scale_ld = 0;          // block128: at least H / 128; block32: H / 32 rounded up to 16
  std::int64_t hidden_scale_k_stride = 0;    // block128 only: > 1 for column-major scales (moejit.h)
};

// Checks shapes and dtypes and returns the workspace the request needs for any T up to its
// max_tokens on a device of `sms` multiprocessors.
// The kernels index expert ids and routed slots with 32-bit integers. The slots of `tokens` x
// `topk` pairs, padded to whole tiles of the largest block rows (128) per local expert, must stay
// within kMaxRoutedIndex; the run and warm-up refuse layers whose largest call would not. The
// align rounds the padded count up to a whole tile and steps through it by its block's threads
// (at most 1024), so that much more must fit as well.
inline constexpr std::int64_t kMaxRoutedIndex = 2147483647;
constexpr std::int64_t routed_slots(std::int64_t tokens, std::int64_t topk, std::int64_t local_experts) {
  const std::int64_t padded = tokens * topk + local_experts * 127;
  return (padded + 127) / 128 * 128 + 1024;
}

Result<std::uint64_t> fused_moe_workspace(const FusedMoeRequest& request, Arch arch, std::uint32_t sms);

Status run_fused_moe(OpContext& ctx, const FusedMoeRequest& request, void* stream);

// Expert ids outside [0, experts) would be dropped by the align kernel without a word, and a map
// entry outside [0, local) or below -1 would send pairs to weights that do not exist (or drop
// them): an error naming the entry where the routing can be read without a device
// synchronization (the host backend), or when asked to (`on_device`, MOEJIT_CHECK_INPUTS=1: the
// device backend copies them to the host and synchronizes `stream`). Not while `stream` is being
// captured into a CUDA graph, which the copy would end: skipped there, with a warning.
Status check_routing_inputs(Launcher& launcher, const FusedMoeRequest& request, void* stream, bool on_device);

// The specs the fused layer uses for `tokens` tokens (align, gate/up, down, reduce, and for
// quantized activations the quantization of 16-bit hidden states and of the gate/up output; op none where unused) on a
// device with `sms` multiprocessors, as the run would pick them; warm-up enumerates these over
// every tile the heuristic can choose.
struct FusedMoeSpecs {
  KernelSpec align, up, down, reduce;
  KernelSpec quantize_hidden, quantize_intermediate;
};
Result<FusedMoeSpecs> fused_moe_specs(const FusedMoeRequest& request, Arch arch, Backend backend, std::uint32_t sms);

// What a usage manifest records of a call on `arch` / `backend`: the layer and its batch size's
// token range (spec_observer.hpp); and the request with its shapes and formats at `tokens`, no
// buffers, for fused_moe_specs, once the weights' shapes and formats pass what packing checks
// (errors name them as w13.* and w2.*).
LayerCall layer_call(const FusedMoeRequest& request, Arch arch, Backend backend);
Result<FusedMoeRequest> layer_request(const LayerCall& call, std::int32_t tokens);

}  // namespace moejit::dispatch
