#pragma once
// The weights of one (model, format, projection) run of benchmark cases on the device: one
// expert quantized and packed by src/quant, replicated over every expert and over enough copies
// of the layer that launches rotating over them read weights from HBM rather than L2.

#include <cstdint>
#include <random>

#include "bench/gpu/gemm_cases.hpp"
#include "quant/quantized_weights.hpp"
#include "runtime/device_buffer.hpp"

namespace moejit::bench {

// Every expert's packed weights, scales and bias, in `copies` full copies of the layer so that
// a run of launches rotating over them reads weights from HBM rather than L2.
struct WeightSet {
  DeviceBuffer weights, scales, bias;
  std::uint32_t copies = 1, experts = 0;
  std::uint64_t expert_weight = 0, expert_scale = 0, expert_bias = 0;
  std::uint64_t copy_scale_stride = 0;  // bytes of one copy's packed scales buffer
  quant::QuantizedWeights block;  // the quantized rows repeated across N (the baselines' weights)
  const u8* weights_of(std::uint32_t copy) const {
    return weights.as<const u8>() + std::uint64_t{copy} * experts * expert_weight;
  }
  const void* scales_of(std::uint32_t copy) const {
    return scales.as<const u8>() + std::uint64_t{copy} * copy_scale_stride;
  }
  const float* bias_of(std::uint32_t copy) const {
    return bias ? reinterpret_cast<const float*>(bias.as<const u8>() + std::uint64_t{copy} * experts * expert_bias)
                : nullptr;
  }
};

// Makes the weights of `c`'s model, format and projection; the copies of the layer make a
// rotation over them span `rotate_bytes`.
Result<WeightSet> make_weights(DeviceLauncher& l, CUstream stream, const GemmCase& c, std::uint64_t rotate_bytes,
                               std::mt19937_64& rng);

}  // namespace moejit::bench
