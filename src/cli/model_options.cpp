#include "cli/model_options.hpp"

#include <charconv>

#include "spec/spec_fields.hpp"
#include "support/log.hpp"

namespace moejit::cli {

std::string_view weights_help() {
  return "mxfp4, int4-g32|g64|g128|channel (symmetric) or int4-asym-g32|g64|g128|channel";
}

Result<WeightChoice> parse_weights(std::string_view text, std::string_view scale) {
  WeightChoice w;
  if (text == "mxfp4") {
    if (!scale.empty() && scale != "e8m0")
      return error(Code::invalid_argument, "--scale {}: MXFP4 scales are e8m0", scale);
    return w;
  }
  std::string_view rest;
  if (text.starts_with("int4-asym-")) {
    w.format = WeightFormat::int4_asym;
    rest = text.substr(10);
  } else if (text.starts_with("int4-")) {
    w.format = WeightFormat::int4_sym;
    rest = text.substr(5);
  } else {
    return error(Code::invalid_argument, "--weights {}: expected {}", text, weights_help());
  }
  if (rest == "channel") {
    w.group_size = 0;
  } else {
    std::uint32_t g = 0;
    auto [end, ec] = std::from_chars(rest.data() + (rest.starts_with('g') ? 1 : 0), rest.data() + rest.size(), g);
    if (!rest.starts_with('g') || ec != std::errc() || end != rest.data() + rest.size() || (g != 32 && g != 64 && g != 128))
      return error(Code::invalid_argument, "--weights {}: expected {}", text, weights_help());
    w.group_size = g;
  }
  if (scale.empty() || scale == "bf16") w.scale = DType::bf16;
  else if (scale == "f16") w.scale = DType::f16;
  else return error(Code::invalid_argument, "--scale {}: expected bf16 or f16 for INT4", scale);
  return w;
}

Result<WeightChoice> choose_weights(std::string_view weights, std::string_view scale,
                                    const dispatch::CheckpointQuantization& checkpoint, std::string_view config) {
  using Kind = dispatch::CheckpointQuantization::Kind;
  if (!weights.empty()) {
    MOEJIT_ASSIGN_OR_RETURN(WeightChoice w, parse_weights(weights, scale));
    // --weights naming the checkpoint's own format keeps its scales unless --scale says otherwise.
    if (scale.empty() && checkpoint.kind == Kind::four_bit && w.format != WeightFormat::mxfp4 &&
        w.format == checkpoint.format && w.group_size == checkpoint.group_size)
      w.scale = checkpoint.scale;
    if (checkpoint.kind == Kind::four_bit &&
        (w.format != checkpoint.format || w.group_size != checkpoint.group_size))
      log(LogLevel::warn, "--weights {}: {}'s quantization_config ({}) describes {} weights; building for --weights",
          weights, config, checkpoint.method, dispatch::weights_spelling(checkpoint.format, checkpoint.group_size));
    else if (checkpoint.kind == Kind::four_bit && w.scale != checkpoint.scale)
      log(LogLevel::warn, "--scale {}: {}'s quantization_config ({}) has {} scales; building for --scale",
          to_string(w.scale), config, checkpoint.method, to_string(checkpoint.scale));
    if (checkpoint.kind == Kind::invalid)
      log(LogLevel::warn, "ignoring {}'s quantization_config for --weights {}: {}", config, weights, checkpoint.reason);
    return w;
  }
  if (checkpoint.kind == Kind::invalid)
    return error(Code::invalid_argument, "{}; pass --weights ({}) to build for the checkpoint that will be served",
                 checkpoint.reason, weights_help());
  if (checkpoint.kind == Kind::unsupported)
    return error(Code::invalid_argument,
                 "{}: quantization_config '{}' is not a format moejit runs ({}); pass --weights ({}) for the 4-bit "
                 "checkpoint that will be served",
                 config, checkpoint.method, checkpoint.reason, weights_help());
  if (checkpoint.kind == Kind::none) return parse_weights("mxfp4", scale);
  const std::string spelling = dispatch::weights_spelling(checkpoint.format, checkpoint.group_size);
  // The checkpoint's own scale dtype unless --scale says otherwise.
  const std::string_view scale_name =
      !scale.empty() || checkpoint.format == WeightFormat::mxfp4 ? scale : to_string(checkpoint.scale);
  MOEJIT_ASSIGN_OR_RETURN(WeightChoice w, parse_weights(spelling, scale_name));
  log(LogLevel::info, "weights {} ({} scales), from {}'s quantization_config ({})", spelling, to_string(w.scale), config,
      checkpoint.method);
  if (w.scale != checkpoint.scale && checkpoint.format != WeightFormat::mxfp4)
    log(LogLevel::warn, "--scale {}: {}'s quantization_config ({}) has {} scales; building for --scale", scale, config,
        checkpoint.method, to_string(checkpoint.scale));
  if (!checkpoint.skipped_groups.empty())
    log(LogLevel::warn,
        "{}'s quantization_config also has config groups moejit cannot run ({}); if the experts are among them, "
        "pass --weights",
        config, checkpoint.skipped_groups);
  return w;
}

Result<ActChoice> choose_act(std::string_view act, std::string_view act_scale, const WeightChoice& weights,
                             const dispatch::CheckpointQuantization& checkpoint, std::string_view config) {
  ActChoice c;
  const bool checkpoint_weights = checkpoint.kind == dispatch::CheckpointQuantization::Kind::four_bit &&
                                  weights.format == checkpoint.format && weights.group_size == checkpoint.group_size;
  if (act.empty() && checkpoint_weights && checkpoint.act == DType::e4m3) {
    c.act = DType::e4m3;
    MOEJIT_ASSIGN_OR_RETURN(c.scale, parse_act_scale(act_scale, c.act));  // --act-scale over the checkpoint's
    if (act_scale.empty()) c.scale = checkpoint.act_scale;
    log(LogLevel::info, "activations e4m3 ({} scales), from {}'s quantization_config (input_activations)",
        to_string(c.scale), config);
    if (!checkpoint.act_note.empty()) log(LogLevel::info, "{}'s quantization_config: {}", config, checkpoint.act_note);
    return c;
  }
  if (act.empty() && checkpoint_weights && !checkpoint.act_note.empty())
    log(LogLevel::info, "{}'s quantization_config: {}", config, checkpoint.act_note);
  MOEJIT_ASSIGN_OR_RETURN(c.act, parse_act(act.empty() ? "bf16" : act));
  MOEJIT_ASSIGN_OR_RETURN(c.scale, parse_act_scale(act_scale, c.act));
  return c;
}

Result<DType> parse_act(std::string_view text) {
  if (text == "bf16") return DType::bf16;
  if (text == "f16") return DType::f16;
  if (text == "e4m3") return DType::e4m3;
  if (text == "e2m1" || text == "mxfp4") return DType::e2m1;
  return error(Code::invalid_argument, "--act {}: expected bf16, f16, e4m3 or e2m1 (also spelled mxfp4)", text);
}

Result<ActScale> parse_act_scale(std::string_view text, DType act) {
  if (act == DType::e2m1) {
    if (text.empty() || text == "block32") return ActScale::block32;
    return error(Code::invalid_argument, "--act-scale {}: expected block32 with --act e2m1 (E8M0 scales per 32)", text);
  }
  if (act != DType::e4m3) {
    if (!text.empty())
      return error(Code::invalid_argument, "--act-scale {}: applies to --act e4m3 or e2m1 only (the activations are {})",
                   text, to_string(act));
    return ActScale::none;
  }
  if (text.empty() || text == "token") return ActScale::token;
  if (text == "block128") return ActScale::block128;
  return error(Code::invalid_argument, "--act-scale {}: expected token or block128", text);
}

Result<DType> parse_out(std::string_view text) {
  if (text == "f32") return DType::f32;
  if (text == "bf16") return DType::bf16;
  if (text == "f16") return DType::f16;
  return error(Code::invalid_argument, "--out {}: expected bf16, f16 or f32", text);
}

}  // namespace moejit::cli
