#pragma once
// The finite set of kernels a model's fused MoE layer can use: what warm-up compiles.

#include <cstdint>
#include <vector>

#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit::dispatch {

struct ModelDesc {
  std::uint32_t hidden = 0, intermediate = 0, experts = 0, topk = 0;
  WeightFormat format = WeightFormat::none;
  std::uint32_t group_size = 0;  // 0: per-channel (each projection's own K)
  DType scale = DType::none;
  // e4m3: W4A8 (weights packed for e4m3; hidden states in bf16, f16 or e4m3); e2m1: W4A4 (MXFP4
  // weights packed for e2m1, sm_120a / sm_121a; hidden states in bf16, f16 or e2m1)
  DType act = DType::bf16;
  ActScale act_scale = ActScale::none;  // e4m3: token or block128; e2m1: block32
  DType out = DType::bf16;
  Epilogue activation = Epilogue::silu_and_mul;
  std::uint32_t tensor_parallel = 1;  // intermediate split this many ways
  std::uint32_t expert_parallel = 1;  // experts split this many ways
  std::uint32_t max_tokens = 8192;
};

// Every spec (align, gate/up, down, reduce for each reachable tile) the fused layer of `model`
// can pick for 1..max_tokens tokens on `arch`, in a stable order without repeats: on every
// device profile of the arch, and on a device of `extra_sms` SMs too when it is not 0 (a GPU
// of another SM count); with `only_sms`, on that SM count alone (what one device will use).
Result<std::vector<KernelSpec>> model_specs(const ModelDesc& model, Arch arch, Backend backend,
                                            std::uint32_t extra_sms = 0, bool only_sms = false);

}  // namespace moejit::dispatch
