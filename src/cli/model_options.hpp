#pragma once
// Options shared by `moejit warmup` and `moejit demo`: the weight format named on the command
// line, and the model description built from a Hugging Face config.json.

#include <string>

#include "dispatch/hf_config.hpp"
#include "dispatch/model_specs.hpp"
#include "support/status.hpp"

namespace moejit::cli {

struct WeightChoice {
  WeightFormat format = WeightFormat::mxfp4;
  std::uint32_t group_size = 32;  // 0 with int4: per-channel (K)
  DType scale = DType::e8m0;
};

// "mxfp4", "int4-g128" (symmetric), "int4-asym-g64", "int4-channel", "int4-asym-channel";
// `scale` ("bf16" / "f16", empty: bf16) for INT4.
Result<WeightChoice> parse_weights(std::string_view text, std::string_view scale);

// The weights to build kernels for, given --weights / --scale (empty when not on the command line)
// and the model config's quantization_config (read from `config`): the flags when given, with a
// warning where the checkpoint says otherwise; else the checkpoint's 4-bit format; else MXFP4 (a
// config of 16-bit weights). A checkpoint moejit cannot run, with no --weights, is an error that
// says why and what to pass.
Result<WeightChoice> choose_weights(std::string_view weights, std::string_view scale,
                                    const dispatch::CheckpointQuantization& checkpoint, std::string_view config);

// The activations: --act / --act-scale when given (empty when not); else those the checkpoint was
// quantized for, where `weights` are the checkpoint's (compressed-tensors W4AFP8 exports: e4m3,
// per token or per 128 k); else bf16.
struct ActChoice {
  DType act = DType::bf16;
  ActScale scale = ActScale::none;
};
Result<ActChoice> choose_act(std::string_view act, std::string_view act_scale, const WeightChoice& weights,
                             const dispatch::CheckpointQuantization& checkpoint, std::string_view config);

// --act: bf16, f16, e4m3 (W4A8: FP8 activations, weights packed for them) or e2m1 / mxfp4 (W4A4:
// MXFP4 activations, sm_120a / sm_121a).
Result<DType> parse_act(std::string_view text);
// --act-scale for `act`: token (the default) or block128 with e4m3; block32 (the default, the only
// one) with e2m1; empty otherwise.
Result<ActScale> parse_act_scale(std::string_view text, DType act);
// The fused layer's output dtype (--out): bf16, f16 or f32.
Result<DType> parse_out(std::string_view text);

std::string_view weights_help();

}  // namespace moejit::cli
