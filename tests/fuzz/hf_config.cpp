// Fuzz target: the Hugging Face config reader (parse_hf_config) on arbitrary bytes. What it
// accepts must be a usable MoE shape: every size positive, no more experts per token than experts.

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
  return 0;
}
