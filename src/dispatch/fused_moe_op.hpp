#pragma once
// The fused MoE layer: routing align -> gate/up GEMM with the activation -> down GEMM with the
// routing weights -> top-k reduction in fixed k order. Four launches, no allocation, no host
// synchronization: the caller's workspace holds every intermediate (graph-capturable).

#include <cstdint>

#include "dispatch/grouped_gemm_op.hpp"

namespace moejit::dispatch {

struct FusedMoeRequest {
  PackedWeightsView w13;  // N = 2I, K = H, act-and-mul columns
  PackedWeightsView w2;   // N = H, K = I
  DType act = DType::bf16;
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
};

// Checks shapes and dtypes and returns the workspace the request needs for any T up to its
// max_tokens on a device of `sms` multiprocessors.
Result<std::uint64_t> fused_moe_workspace(const FusedMoeRequest& request, Arch arch, std::uint32_t sms);

Status run_fused_moe(OpContext& ctx, const FusedMoeRequest& request, void* stream);

// The specs the fused layer uses for `tokens` tokens (align, gate/up, down, reduce) on a device
// with `sms` multiprocessors, as the run would pick them; warm-up enumerates these over every
// tile the heuristic can choose.
struct FusedMoeSpecs {
  KernelSpec align, up, down, reduce;
};
Result<FusedMoeSpecs> fused_moe_specs(const FusedMoeRequest& request, Arch arch, Backend backend, std::uint32_t sms);

}  // namespace moejit::dispatch
