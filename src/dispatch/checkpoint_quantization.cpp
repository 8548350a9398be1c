#include "dispatch/checkpoint_quantization.hpp"

#include <fmt/format.h>

#include <optional>
#include <vector>

#include "spec/spec_fields.hpp"
#include "support/json_input.hpp"

namespace moejit::dispatch {
namespace {

using json = nlohmann::json;
using Kind = CheckpointQuantization::Kind;

CheckpointQuantization unsupported(std::string method, std::string reason) {
  CheckpointQuantization q;
  q.kind = Kind::unsupported;
  q.method = std::move(method);
  q.reason = std::move(reason);
  return q;
}

// A field of `obj` that may be absent or null (nullopt); any other type than the expected one is
// an error naming the field.
struct Fields {
  const json& obj;
  std::string_view what;  // "config.json: quantization_config" or deeper

  const json* find(const char* key) const {
    auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  Result<std::optional<std::int64_t>> integer(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) return std::optional<std::int64_t>{};
    // Unsigned values past INT64_MAX would read back negative (a group_size of 2^64 - 1 as -1,
    // GPTQ's per-channel): refused rather than reinterpreted.
    if (!v->is_number_integer())
      return error(Code::invalid_argument, "{}: '{}' = {}: expected an integer", what, key, json_excerpt(*v));
    if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
      return error(Code::invalid_argument, "{}: '{}' = {}: expected an integer of at most {}", what, key,
                   json_excerpt(*v), INT64_MAX);
    return std::optional<std::int64_t>{v->get<std::int64_t>()};
  }
  Result<std::optional<bool>> boolean(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) return std::optional<bool>{};
    if (!v->is_boolean())
      return error(Code::invalid_argument, "{}: '{}' = {}: expected true or false", what, key, json_excerpt(*v));
    return std::optional<bool>{v->get<bool>()};
  }
  Result<std::optional<std::string>> string(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) return std::optional<std::string>{};
    if (!v->is_string())
      return error(Code::invalid_argument, "{}: '{}' = {}: expected a string", what, key, json_excerpt(*v));
    return std::optional<std::string>{v->get<std::string>()};
  }
};

// INT4 with `group` as configs write it: -1 (GPTQ, AWQ) is per-channel.
CheckpointQuantization int4(const std::string& method, bool symmetric, std::int64_t group, DType scale) {
  if (group != -1 && group != 32 && group != 64 && group != 128)
    return unsupported(method, fmt::format("group size {}: moejit's INT4 groups are 32, 64, 128 or per-channel", group));
  CheckpointQuantization q;
  q.kind = Kind::four_bit;
  q.method = method;
  q.format = symmetric ? WeightFormat::int4_sym : WeightFormat::int4_asym;
  q.group_size = group == -1 ? 0 : static_cast<std::uint32_t>(group);
  q.scale = scale;
  return q;
}

std::string lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return text;
}

CheckpointQuantization not_four_bit(const std::string& method, std::int64_t bits) {
  return unsupported(method, fmt::format("{}-bit weights: moejit runs 4-bit ones", bits));
}

// GPTQ (AutoGPTQ, GPTQModel): f16 scales; group_size 128 when absent (their default). Act-order
// permutes the K groups through g_idx, except with one group (per-channel, which vLLM runs as
// no act-order) or static_groups (AutoGPTQ then writes the trivial g_idx).
Result<CheckpointQuantization> gptq(const Fields& f, const std::string& method) {
  MOEJIT_ASSIGN_OR_RETURN(auto bits, f.integer("bits"));
  if (bits.value_or(4) != 4) return not_four_bit(method, *bits);
  MOEJIT_ASSIGN_OR_RETURN(auto desc_act, f.boolean("desc_act"));
  MOEJIT_ASSIGN_OR_RETURN(auto static_groups, f.boolean("static_groups"));
  MOEJIT_ASSIGN_OR_RETURN(auto sym, f.boolean("sym"));
  MOEJIT_ASSIGN_OR_RETURN(auto group, f.integer("group_size"));
  // Other serializations of the same quantization (GPTQModel's checkpoint_format, AutoGPTQ's
  // is_marlin_format, GPTQModel's pack_dtype) hold the weights in layouts no moejit source reads.
  MOEJIT_ASSIGN_OR_RETURN(auto checkpoint_format, f.string("checkpoint_format"));
  if (const std::string cf = lowercase(checkpoint_format.value_or("gptq")); cf != "gptq" && cf != "gptq_v2")
    return unsupported(method, fmt::format("checkpoint_format '{}': its weights are laid out for that kernel; moejit "
                                           "reads GPTQ's own packing (checkpoint_format gptq or gptq_v2)",
                                           *checkpoint_format));
  MOEJIT_ASSIGN_OR_RETURN(auto marlin, f.boolean("is_marlin_format"));
  if (marlin.value_or(false))
    return unsupported(method, "is_marlin_format: true (weights serialized for the Marlin kernel): moejit reads "
                               "GPTQ's own packing");
  MOEJIT_ASSIGN_OR_RETURN(auto pack_dtype, f.string("pack_dtype"));
  if (const std::string pd = lowercase(pack_dtype.value_or("int32")); pd != "int32" && pd != "torch.int32")
    return unsupported(method, fmt::format("pack_dtype '{}': moejit reads GPTQ words of 32 bits (int32)", *pack_dtype));
  if (desc_act.value_or(false) && group.value_or(128) != -1 && !static_groups.value_or(false))
    return unsupported(method, "act-order (desc_act: true): its g_idx permutes the K groups, which moejit does not");
  return int4(method, sym.value_or(true), group.value_or(128), DType::f16);
}

// AWQ (AutoAWQ): asymmetric, f16 scales, the GEMM packing, which the exllama and ipex versions
// load too (they repack at run time). GEMV packs differently, llm-awq's own format (int16 words,
// scaled zeros) too, and moejit's AWQ source reads zero points.
Result<CheckpointQuantization> awq(const Fields& f, const std::string& method) {
  MOEJIT_ASSIGN_OR_RETURN(auto bits, f.integer("bits"));
  MOEJIT_ASSIGN_OR_RETURN(auto w_bit, f.integer("w_bit"));  // the spelling of AutoAWQ's quant_config
  if (const std::int64_t b = bits.value_or(w_bit.value_or(4)); b != 4) return not_four_bit(method, b);
  MOEJIT_ASSIGN_OR_RETURN(auto backend, f.string("backend"));
  if (backend && lowercase(*backend) == "llm-awq")
    return unsupported(method, "llm-awq's format (int16 words, scaled zero points): moejit reads AutoAWQ's GEMM one");
  MOEJIT_ASSIGN_OR_RETURN(auto version, f.string("version"));
  if (const std::string v = lowercase(version.value_or("gemm")); v != "gemm" && v != "exllama" && v != "ipex")
    return unsupported(method, fmt::format("AWQ version '{}' packs its weights differently: moejit reads GEMM's "
                                           "packing (versions gemm, exllama, ipex)",
                                           *version));
  MOEJIT_ASSIGN_OR_RETURN(auto zero_point, f.boolean("zero_point"));
  if (!zero_point.value_or(true))
    return unsupported(method, "AWQ without zero points (zero_point: false): moejit's AWQ source reads zero points");
  MOEJIT_ASSIGN_OR_RETURN(auto group, f.integer("group_size"));
  MOEJIT_ASSIGN_OR_RETURN(auto q_group, f.integer("q_group_size"));
  return int4(method, false, group.value_or(q_group.value_or(128)), DType::f16);
}

// compressed-tensors input_activations of a group: FP8 (E4M3) per token, per tensor (one scale
// for every token is a per-token scale too) or per 128 k maps to moejit's W4A8; the rest leaves
// 16-bit activations, with a note.
Status read_activations(const json* acts, const std::string& where, CheckpointQuantization& q) {
  if (acts == nullptr) return {};
  if (!acts->is_object())
    return error(Code::invalid_argument, "{}.input_activations: {}: expected an object", where, json_excerpt(*acts));
  const std::string acts_where = where + ".input_activations";
  const Fields a{*acts, acts_where};
  MOEJIT_ASSIGN_OR_RETURN(auto type, a.string("type"));
  MOEJIT_ASSIGN_OR_RETURN(auto bits, a.integer("num_bits"));
  MOEJIT_ASSIGN_OR_RETURN(auto strategy, a.string("strategy"));
  MOEJIT_ASSIGN_OR_RETURN(auto group_size, a.integer("group_size"));
  if (type.value_or("") != "float" || bits.value_or(0) != 8) {
    q.act_note = fmt::format("{}-bit {} activations are not an input moejit quantizes to; 16-bit activations run",
                             bits.value_or(0), type.value_or("?"));
    return {};
  }
  const std::string how = strategy.value_or("");
  if (how == "token" || how == "tensor") {
    q.act = DType::e4m3;
    q.act_scale = ActScale::token;
    MOEJIT_ASSIGN_OR_RETURN(auto dynamic, a.boolean("dynamic"));
    if (how == "tensor" && !dynamic.value_or(false))
      q.act_note = "a static per-tensor FP8 input scale: the engine passes it as every token's scale";
  } else if (how == "group" && group_size.value_or(0) == 128) {
    q.act = DType::e4m3;
    q.act_scale = ActScale::block128;
  } else {
    q.act_note = fmt::format("FP8 activations with strategy '{}'{}: moejit's scales are per token or per 128 k; "
                             "16-bit activations run",
                             how.empty() ? "none" : how,
                             group_size ? fmt::format(" and group_size {}", *group_size) : std::string());
  }
  return {};
}

// A torch dtype as configs write it ("bfloat16", "torch.float16"): the scale dtype moejit reads,
// none for any other (float32 scales, say).
DType scale_dtype_of(std::string name) {
  if (name.starts_with("torch.")) name = name.substr(6);
  if (name == "bfloat16") return DType::bf16;
  if (name == "float16") return DType::f16;
  return DType::none;
}

// compressed-tensors: the config group whose weights are 4-bit integers, packed ("pack-quantized";
// a config without a format holds unpacked ones, compressed-tensors' default). The scales have
// the weights' scale_dtype, else the model's dtype.
Result<CheckpointQuantization> compressed_tensors(const Fields& f, const std::string& method,
                                                  const std::string& model_dtype) {
  MOEJIT_ASSIGN_OR_RETURN(auto top_format, f.string("format"));
  const json* groups = f.find("config_groups");
  if (groups == nullptr) return unsupported(method, "no config_groups: nothing says how the weights are quantized");
  if (!groups->is_object())
    return error(Code::invalid_argument, "{}: 'config_groups' = {}: expected an object", f.what, json_excerpt(*groups));
  std::vector<CheckpointQuantization> found;
  std::string skipped;  // why the other groups' weights cannot run
  for (const auto& item : groups->items()) {
    // Named, not structured bindings: the lambda below captures the name (clang's C++20 cannot).
    const std::string name = item.key();
    const json& group = item.value();
    const std::string where = fmt::format("{}: config_groups.{}", f.what, name);
    if (group.is_array()) {  // a preset scheme's name mapped to its targets: recipes write these
      skipped += fmt::format("{}{}: preset scheme (moejit reads a scheme written out)", skipped.empty() ? "" : "; ",
                             name);
      continue;
    }
    if (!group.is_object())
      return error(Code::invalid_argument, "{}: {}: expected an object", where, json_excerpt(group));
    const Fields g{group, where};
    const json* weights = g.find("weights");
    if (weights == nullptr) continue;  // activations only
    if (!weights->is_object())
      return error(Code::invalid_argument, "{}.weights: {}: expected an object", where, json_excerpt(*weights));
    const std::string weights_where = where + ".weights";
    const Fields w{*weights, weights_where};
    MOEJIT_ASSIGN_OR_RETURN(auto type, w.string("type"));
    MOEJIT_ASSIGN_OR_RETURN(auto bits, w.integer("num_bits"));
    MOEJIT_ASSIGN_OR_RETURN(auto format, g.string("format"));
    if (!format) format = top_format;
    auto skip = [&](std::string why) { skipped += fmt::format("{}{}: {}", skipped.empty() ? "" : "; ", name, why); };
    if (type.value_or("int") != "int" || bits.value_or(8) != 4) {
      skip(fmt::format("{} {}-bit weights", type.value_or("int"), bits.value_or(8)));
      continue;
    }
    if (!format || *format != "pack-quantized") {
      skip(fmt::format("format '{}' (moejit reads pack-quantized)", format.value_or("none: unpacked weights")));
      continue;
    }
    // actorder "group" (alias "dynamic") stores a g_idx that permutes K; "weight" (alias
    // "static") reorders nothing at run time. Early exports wrote a boolean (true meant "group").
    const json* actorder = w.find("actorder");
    if (actorder != nullptr &&
        ((actorder->is_boolean() && actorder->get<bool>()) ||
         (actorder->is_string() && (lowercase(actorder->get<std::string>()) == "group" ||
                                    lowercase(actorder->get<std::string>()) == "dynamic")))) {
      skip(fmt::format("actorder {} (its g_idx permutes the K groups)", json_excerpt(*actorder)));
      continue;
    }
    MOEJIT_ASSIGN_OR_RETURN(auto scale_dtype, w.string("scale_dtype"));
    const std::string scale_name = scale_dtype.value_or(model_dtype);
    const DType scale = scale_dtype_of(scale_name);
    if (scale == DType::none) {
      skip(fmt::format("scales in {} (moejit's INT4 scales are bf16 or f16)", scale_name));
      continue;
    }
    MOEJIT_ASSIGN_OR_RETURN(auto strategy, w.string("strategy"));
    MOEJIT_ASSIGN_OR_RETURN(auto group_size, w.integer("group_size"));
    MOEJIT_ASSIGN_OR_RETURN(auto symmetric, w.boolean("symmetric"));
    std::int64_t size = 0;
    if (strategy.value_or("") == "channel") {
      size = -1;
    } else if (strategy.value_or("") == "group" && group_size) {
      size = *group_size;
    } else {
      skip(fmt::format("strategy '{}'{} (moejit reads 'group' and 'channel')", strategy.value_or("none"),
                       strategy.value_or("") == "group" ? " without a group_size" : ""));
      continue;
    }
    CheckpointQuantization q = int4(method, symmetric.value_or(true), size, scale);
    if (q.kind == Kind::unsupported) {
      skip(q.reason);
      continue;
    }
    MOEJIT_TRY(read_activations(g.find("input_activations"), where, q));
    found.push_back(q);
  }
  if (found.empty())
    return unsupported(method, skipped.empty() ? "no config group quantizes weights" : "config_groups hold " + skipped);
  for (const CheckpointQuantization& q : found)
    if (q.format != found[0].format || q.group_size != found[0].group_size || q.act != found[0].act ||
        q.act_scale != found[0].act_scale)
      return unsupported(method, fmt::format("config_groups describe several 4-bit schemes ({}{} and {}{}); moejit "
                                             "cannot tell which the experts use",
                                             weights_spelling(found[0].format, found[0].group_size),
                                             found[0].act == DType::e4m3 ? " with FP8 activations" : "",
                                             weights_spelling(q.format, q.group_size),
                                             q.act == DType::e4m3 ? " with FP8 activations" : ""));
  // Other groups may be the experts' (INT4 attention, NVFP4 experts): the caller says so.
  found[0].skipped_groups = skipped;
  return found[0];
}

}  // namespace

Result<CheckpointQuantization> read_checkpoint_quantization(const json& config, std::string_view what) {
  const json* q = nullptr;
  for (const json* doc : {&config, config.contains("text_config") ? &config["text_config"] : nullptr}) {
    if (doc == nullptr || !doc->is_object()) continue;
    if (auto it = doc->find("quantization_config"); it != doc->end() && !it->is_null()) {
      q = &*it;
      break;
    }
  }
  if (q == nullptr) return CheckpointQuantization{};
  const std::string where = fmt::format("{}: quantization_config", what);
  if (!q->is_object()) return error(Code::invalid_argument, "{} = {}: expected an object", where, json_excerpt(*q));
  const Fields f{*q, where};
  MOEJIT_ASSIGN_OR_RETURN(auto method_field, f.string("quant_method"));
  if (!method_field) return error(Code::invalid_argument, "{}: no 'quant_method': expected e.g. \"gptq\"", where);
  const std::string method = *method_field;
  const std::string lower = lowercase(method);

  if (lower == "mxfp4") {
    CheckpointQuantization out;
    out.kind = Kind::four_bit;
    out.method = method;
    out.format = WeightFormat::mxfp4;
    out.group_size = 32;
    out.scale = DType::e8m0;
    return out;
  }
  if (lower == "gptq" || lower == "gptq_marlin") return gptq(f, method);
  if (lower == "awq" || lower == "awq_marlin") return awq(f, method);
  if (lower == "compressed-tensors" || lower == "compressed_tensors") {
    // The model's dtype (newer transformers write "dtype"), also under a wrapper's text_config;
    // bf16 where none is written.
    std::string model_dtype = "bfloat16";
    bool found = false;
    for (const json* doc : {&config, config.contains("text_config") ? &config["text_config"] : nullptr}) {
      if (found || doc == nullptr || !doc->is_object()) continue;
      const Fields top{*doc, what};
      for (const char* key : {"dtype", "torch_dtype"}) {
        MOEJIT_ASSIGN_OR_RETURN(auto dtype, top.string(key));
        if (dtype && !found) {
          model_dtype = *dtype;
          found = true;
        }
      }
    }
    return compressed_tensors(f, method, model_dtype);
  }
  if (lower == "fp8") return unsupported(method, "FP8 weights: moejit runs 4-bit ones");
  return unsupported(method, "not a method moejit reads (mxfp4, gptq, awq, compressed-tensors)");
}

std::string weights_spelling(WeightFormat format, std::uint32_t group_size) {
  if (format == WeightFormat::mxfp4) return "mxfp4";
  const std::string group = group_size == 0 ? "channel" : fmt::format("g{}", group_size);
  return fmt::format("int4-{}{}", format == WeightFormat::int4_asym ? "asym-" : "", group);
}

}  // namespace moejit::dispatch
