#include "dispatch/hf_config.hpp"

#include <nlohmann/json.hpp>

#include <initializer_list>

#include "support/fs.hpp"
#include "support/json_input.hpp"

namespace moejit::dispatch {
namespace {

using json = nlohmann::json;

// The first of `names` present in `doc` as a positive integer.
Result<std::uint32_t> first_of(const json& doc, std::initializer_list<const char*> names, std::string_view what,
                               std::string_view meaning) {
  std::string tried;
  for (const char* name : names) {
    tried += (tried.empty() ? "" : ", ") + std::string(name);
    auto it = doc.find(name);
    if (it == doc.end() || it->is_null()) continue;
    if (!it->is_number_unsigned() || it->get<std::uint64_t>() == 0 || it->get<std::uint64_t>() > 1u << 30)
      return error(Code::invalid_argument, "{}: '{}' = {}: expected a positive integer of at most {} ({})", what,
                   name, json_excerpt(*it), 1u << 30, meaning);
    return static_cast<std::uint32_t>(it->get<std::uint64_t>());
  }
  return error(Code::invalid_argument, "{}: no {} ({}); expected one of: {}", what, meaning, "not an MoE config?", tried);
}

}  // namespace

Result<MoeLayerShape> parse_hf_config(std::string_view text, std::string_view what) {
  MOEJIT_ASSIGN_OR_RETURN(json doc, parse_json_input(text, what));
  if (!doc.is_object())
    return error(Code::invalid_argument, "{}: expected a JSON object (a Hugging Face config.json), got {}", what,
                 doc.type_name());
  MoeLayerShape s;
  if (auto q = read_checkpoint_quantization(doc, what); q.ok()) {
    s.quantization = std::move(q).value();
  } else {
    s.quantization.kind = CheckpointQuantization::Kind::invalid;
    s.quantization.reason = q.status().message();
  }
  // Multimodal wrappers keep the language model's fields under text_config.
  if (auto wrapped = doc.find("text_config");
      wrapped != doc.end() && !wrapped->is_null() && !doc.contains("hidden_size")) {
    if (!wrapped->is_object())
      return error(Code::invalid_argument, "{}: 'text_config' = {}: expected an object (the language model's config)",
                   what, json_excerpt(*wrapped));
    json inner = std::move(*wrapped);
    doc = std::move(inner);
  }
  // Absent is fine (the family then gets the default activation); anything but a string is not.
  if (auto type = doc.find("model_type"); type != doc.end()) {
    if (!type->is_string())
      return error(Code::invalid_argument, "{}: 'model_type' = {}: expected a string (e.g. \"gpt_oss\") or no such key",
                   what, json_excerpt(*type));
    s.model_type = type->get<std::string>();
  }
  MOEJIT_ASSIGN_OR_RETURN(s.hidden, first_of(doc, {"hidden_size", "d_model"}, what, "hidden size"));
  // The expert FFN width: families with dense layers too name it moe_intermediate_size.
  MOEJIT_ASSIGN_OR_RETURN(s.intermediate, first_of(doc, {"moe_intermediate_size", "expert_intermediate_size",
                                                         "intermediate_size", "ffn_dim"},
                                                   what, "expert intermediate size"));
  MOEJIT_ASSIGN_OR_RETURN(s.experts, first_of(doc, {"n_routed_experts", "num_experts", "num_local_experts",
                                                    "moe_num_experts", "num_routed_experts"},
                                              what, "expert count"));
  MOEJIT_ASSIGN_OR_RETURN(s.topk, first_of(doc, {"num_experts_per_tok", "experts_per_token", "moe_topk",
                                                 "num_selected_experts"},
                                           what, "experts per token"));
  if (s.topk > s.experts)
    return error(Code::invalid_argument, "{}: {} experts per token but only {} experts", what, s.topk, s.experts);
  if (s.model_type == "gpt_oss") {
    s.activation = Epilogue::swiglu_oai;  // its clamped SwiGLU, whatever hidden_act says
  } else {
    // The experts' activation: moejit's gated one is SiLU. Another (Grok's GELU, Gemma's
    // hidden_activation) would be warmed and described as SiLU without a word.
    for (const char* key : {"hidden_act", "hidden_activation"}) {
      auto act = doc.find(key);
      if (act == doc.end() || act->is_null()) continue;
      if (!act->is_string())
        return error(Code::invalid_argument, "{}: '{}' = {}: expected a string (e.g. \"silu\")", what, key,
                     json_excerpt(*act));
      const std::string name = act->get<std::string>();
      if (name != "silu" && name != "swish")
        return error(Code::unsupported,
                     "{}: '{}' = \"{}\": moejit's experts use SiLU-gated (silu, swish) or gpt-oss's SwiGLU "
                     "activations",
                     what, key, name);
    }
  }
  return s;
}

Result<MoeLayerShape> read_hf_config(const std::string& path) {
  MOEJIT_ASSIGN_OR_RETURN(std::string text, read_file(path));
  return parse_hf_config(text, path);
}

}  // namespace moejit::dispatch
