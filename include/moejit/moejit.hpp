// moejit — a thin C++ wrapper over the C ABI (moejit.h): RAII for contexts, exceptions for
// failed calls. Header-only; it adds no ABI of its own.
#ifndef MOEJIT_MOEJIT_HPP
#define MOEJIT_MOEJIT_HPP

#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "moejit/moejit.h"

namespace moejit {

// A failed moejit call: its status code and moejit_last_error()'s message.
class Error : public std::runtime_error {
 public:
  Error(moejit_status_t status, const std::string& message)
      : std::runtime_error(std::string(moejit_status_name(status)) + ": " + message), status_(status) {}
  moejit_status_t status() const noexcept { return status_; }

 private:
  moejit_status_t status_;
};

inline void check(moejit_status_t status) {
  if (status != MOEJIT_OK) throw Error(status, moejit_last_error());
}

inline moejit_context_options_t context_options() {
  moejit_context_options_t o;
  moejit_context_options_init(&o);
  return o;
}

// The MoE layer and checkpoint formats of a Hugging Face config.json's text
// (moejit_model_desc_from_hf_config), over `model`'s other fields (default: moejit_model_desc_init's).
inline moejit_model_desc_t model_from_hf_config(const std::string& config_json, moejit_model_desc_t model = [] {
  moejit_model_desc_t m;
  moejit_model_desc_init(&m);
  return m;
}()) {
  check(moejit_model_desc_from_hf_config(config_json.data(), config_json.size(), &model));
  return model;
}

class Context {
 public:
  Context() : Context(context_options()) {}
  explicit Context(const moejit_context_options_t& options) { check(moejit_context_create(&options, &ctx_)); }
  ~Context() {
    if (ctx_ != nullptr) moejit_context_destroy(ctx_);
  }
  Context(Context&& other) noexcept : ctx_(std::exchange(other.ctx_, nullptr)) {}
  Context& operator=(Context&& other) noexcept {
    std::swap(ctx_, other.ctx_);
    return *this;
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  moejit_context_t get() const noexcept { return ctx_; }

  moejit_backend_t backend() const {
    moejit_backend_t b;
    check(moejit_context_backend(ctx_, &b, nullptr));
    return b;
  }
  // "" when the context has no GPU to take an architecture from.
  std::string arch() const {
    const char* a = nullptr;
    check(moejit_context_backend(ctx_, nullptr, &a));
    return a != nullptr ? a : "";
  }
  moejit_stats_t stats() const {
    moejit_stats_t s;
    moejit_stats_init(&s);
    check(moejit_get_stats(ctx_, &s));
    return s;
  }

  moejit_packed_sizes_t packed_size(const moejit_weights_desc_t& desc) const {
    moejit_packed_sizes_t s;
    check(moejit_packed_weights_size(ctx_, &desc, &s));
    return s;
  }
  void pack(const moejit_weights_desc_t& desc, moejit_packed_weights_t& packed, void* stream = nullptr) const {
    check(moejit_pack_weights(ctx_, &desc, &packed, stream));
  }

  uint64_t grouped_gemm_workspace(const moejit_grouped_gemm_args_t& args) const {
    uint64_t bytes = 0;
    check(moejit_grouped_gemm_workspace_size(ctx_, &args, &bytes));
    return bytes;
  }
  void grouped_gemm(const moejit_grouped_gemm_args_t& args, void* stream = nullptr) const {
    check(moejit_grouped_gemm(ctx_, &args, stream));
  }

  uint64_t fused_moe_workspace(const moejit_fused_moe_args_t& args) const {
    uint64_t bytes = 0;
    check(moejit_fused_moe_workspace_size(ctx_, &args, &bytes));
    return bytes;
  }
  void fused_moe(const moejit_fused_moe_args_t& args, void* stream = nullptr) const {
    check(moejit_fused_moe(ctx_, &args, stream));
  }

  using Progress = std::function<void(uint32_t done, uint32_t total, const char* what)>;
  void warmup(const moejit_model_desc_t& model, const std::vector<std::string>& archs = {},
              const Progress& progress = {}) const {
    std::vector<const char*> names;
    for (const auto& a : archs) names.push_back(a.c_str());
    auto trampoline = [](void* user, uint32_t done, uint32_t total, const char* what) {
      (*static_cast<const Progress*>(user))(done, total, what);
    };
    check(moejit_warmup(ctx_, &model, names.data(), static_cast<uint32_t>(names.size()),
                        progress ? +trampoline : nullptr, const_cast<Progress*>(&progress)));
  }

  // Before CUDA graph capture: every kernel of the model's layer on this device, loaded.
  void prepare(const moejit_model_desc_t& model, const Progress& progress = {}) const {
    auto trampoline = [](void* user, uint32_t done, uint32_t total, const char* what) {
      (*static_cast<const Progress*>(user))(done, total, what);
    };
    check(moejit_prepare(ctx_, &model, progress ? +trampoline : nullptr, const_cast<Progress*>(&progress)));
  }

 private:
  moejit_context_t ctx_ = nullptr;
};

}  // namespace moejit

#endif  // MOEJIT_MOEJIT_HPP
