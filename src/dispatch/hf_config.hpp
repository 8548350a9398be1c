#pragma once
// The MoE layer shape of a Hugging Face config.json: hidden size, expert FFN size, expert count,
// experts per token, the activation, and the checkpoint's weight format (quantization_config,
// read by checkpoint_quantization.hpp). Field names differ between model families; every
// spelling moejit knows is tried, and a missing field is an error naming the ones looked for.

#include <cstdint>
#include <string>

#include "dispatch/checkpoint_quantization.hpp"
#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit::dispatch {

struct MoeLayerShape {
  std::string model_type;
  std::uint32_t hidden = 0, intermediate = 0, experts = 0, topk = 0;
  Epilogue activation = Epilogue::silu_and_mul;  // swiglu_oai for gpt-oss
  CheckpointQuantization quantization;           // from quantization_config
};

Result<MoeLayerShape> read_hf_config(const std::string& path);
Result<MoeLayerShape> parse_hf_config(std::string_view json, std::string_view what);

}  // namespace moejit::dispatch
