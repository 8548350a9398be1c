#pragma once
// The weight format a Hugging Face config.json's quantization_config describes, so that warm-up
// and the demo build kernels for the checkpoint that will be served rather than for a default.
// Read: gpt-oss's "mxfp4", GPTQ, AWQ and compressed-tensors "pack-quantized" INT4, with the FP8
// activations of compressed-tensors W4AFP8 exports. Anything else (FP8, NVFP4, 8-bit, act-order GPTQ, ...) is reported as unsupported with the reason.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "spec/kernel_spec.hpp"
#include "support/status.hpp"

namespace moejit::dispatch {

struct CheckpointQuantization {
  enum class Kind : std::uint8_t {
    none,         // no quantization_config: the checkpoint holds 16-bit weights
    four_bit,     // format / group_size / scale below
    unsupported,  // method and reason below
    invalid,      // a malformed quantization_config: reason holds the error
  };
  Kind kind = Kind::none;
  std::string method;  // quant_method as the config writes it
  WeightFormat format = WeightFormat::none;
  std::uint32_t group_size = 0;  // 0: per-channel
  DType scale = DType::none;
  std::string reason;  // unsupported: what moejit cannot run; invalid: what is malformed
  std::string skipped_groups;  // four_bit compressed-tensors: the other groups' schemes moejit passed over
  // The activations the checkpoint was quantized for (compressed-tensors input_activations):
  // E4M3 with token or block128 scales (W4AFP8 exports), or none (16-bit). Activations moejit
  // cannot quantize to (int8, say) leave none, with the reason in act_note: the weights still
  // run with 16-bit activations.
  DType act = DType::none;
  ActScale act_scale = ActScale::none;
  std::string act_note;
};

// `config` is the whole config.json object (its dtype decides compressed-tensors' scale dtype);
// `what` names it in errors. Malformed fields (a quant_method that is not a string, a group_size
// that is not an integer) are errors; well-formed schemes moejit cannot run are `unsupported`.
// (parse_hf_config keeps an error as Kind::invalid: the layer's shape is still good, and
// --weights may make the checkpoint's description moot.)
Result<CheckpointQuantization> read_checkpoint_quantization(const nlohmann::json& config, std::string_view what);

// The command line's spelling of a weight format (--weights "mxfp4", "int4-g32",
// "int4-asym-channel"; group_size 0 is per-channel).
std::string weights_spelling(WeightFormat format, std::uint32_t group_size);

}  // namespace moejit::dispatch
