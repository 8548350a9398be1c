// Fuzz target: the Hugging Face config reader (parse_hf_config) on arbitrary bytes. What it
// accepts must be a usable MoE shape: every size positive, no more experts per token than experts;
// and a checkpoint format moejit can build (a format, group and scale dtype a spec accepts, FP8
// activations with token or block128 scales), or a reason it cannot.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dispatch/hf_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto shape = moejit::dispatch::parse_hf_config(text, "config.json");
  if (!shape.ok()) {
    if (shape.status().message().find("config.json") == std::string_view::npos) __builtin_trap();  // names the file
    return 0;
  }
  const auto& s = *shape;
  if (s.hidden == 0 || s.intermediate == 0 || s.experts == 0 || s.topk == 0 || s.topk > s.experts) __builtin_trap();
  using moejit::DType, moejit::WeightFormat, moejit::ActScale;
  using Kind = moejit::dispatch::CheckpointQuantization::Kind;
  const auto& q = s.quantization;
  if ((q.kind == Kind::unsupported || q.kind == Kind::invalid) && q.reason.empty()) __builtin_trap();
  if (q.kind == Kind::four_bit) {
    const bool mxfp4 = q.format == WeightFormat::mxfp4 && q.group_size == 32 && q.scale == DType::e8m0;
    const bool int4 = (q.format == WeightFormat::int4_sym || q.format == WeightFormat::int4_asym) &&
                      (q.group_size == 0 || q.group_size == 32 || q.group_size == 64 || q.group_size == 128) &&
                      (q.scale == DType::bf16 || q.scale == DType::f16);
    if (!mxfp4 && !int4) __builtin_trap();
    if (q.act != DType::none &&
        (q.act != DType::e4m3 || (q.act_scale != ActScale::token && q.act_scale != ActScale::block128)))
      __builtin_trap();
  }
  return 0;
}
