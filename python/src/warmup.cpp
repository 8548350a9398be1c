// Warm-up (compile a model's kernels into the store, for any architecture) and prepare (also
// load them on this context's device before CUDA graph capture), with a progress callback.

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <string>
#include <vector>

#include "context.hpp"

namespace moejit_python {

namespace {

// The progress callable runs with the GIL taken back; the first exception it raises is
// re-raised once the C call returns (the C call itself cannot be interrupted).
struct Progress {
  nb::object callback;
  std::optional<nb::python_error> error;

  static void call(void* self, uint32_t done, uint32_t total, const char* what) {
    auto* p = static_cast<Progress*>(self);
    nb::gil_scoped_acquire gil;
    if (p->error) return;
    try {
      p->callback(done, total, what);
    } catch (nb::python_error& e) {
      p->error.emplace(std::move(e));
    }
  }
};

moejit_model_desc_t model_desc(const nb::dict& model) {
  moejit_model_desc_t d;
  moejit_model_desc_init(&d);
  auto u32 = [&](const char* key, uint32_t& field) {
    if (model.contains(key) && !nb::try_cast(model[key], field))
      invalid_argument(std::string("model field '") + key + "' = " + nb::repr(model[key]).c_str() +
                       ": expected an integer from 0 to 4294967295");
  };
  auto enumeration = [&](const char* key, auto& field) {
    if (model.contains(key)) field = static_cast<std::remove_reference_t<decltype(field)>>(nb::cast<int>(model[key]));
  };
  u32("hidden", d.hidden);
  u32("intermediate", d.intermediate);
  u32("experts", d.experts);
  u32("topk", d.topk);
  enumeration("format", d.format);
  u32("group_size", d.group_size);
  enumeration("scale_dtype", d.scale_dtype);
  enumeration("act_dtype", d.act_dtype);
  enumeration("out_dtype", d.out_dtype);
  enumeration("activation", d.activation);
  u32("tensor_parallel", d.tensor_parallel);
  u32("expert_parallel", d.expert_parallel);
  u32("max_tokens", d.max_tokens);
  enumeration("act_scale", d.act_scale);
  return d;
}

template <typename Call>
void run_with_progress(const Context& ctx, nb::object progress, Call&& call) {
  Progress p{std::move(progress), std::nullopt};
  const bool has_progress = !p.callback.is_none();
  const moejit_status_t status = call_unlocked(ctx, [&](moejit_context_t c) {
    return call(c, has_progress ? &Progress::call : nullptr, has_progress ? &p : nullptr);
  });
  if (p.error) {
    p.error->restore();
    throw nb::python_error();
  }
  check(status);
}

}  // namespace

void bind_warmup(nb::module_& m) {
  // A config.json's text -> the moejit_model_desc_t fields it sets (enumerations as C values),
  // over moejit_model_desc_init's defaults.
  m.def(
      "model_desc_from_hf_config",
      [](const std::string& config_json) {
        moejit_model_desc_t d;
        moejit_model_desc_init(&d);
        check(moejit_model_desc_from_hf_config(config_json.data(), config_json.size(), &d));
        nb::dict out;
        out["hidden"] = d.hidden;
        out["intermediate"] = d.intermediate;
        out["experts"] = d.experts;
        out["topk"] = d.topk;
        out["format"] = static_cast<int>(d.format);
        out["group_size"] = d.group_size;
        out["scale_dtype"] = static_cast<int>(d.scale_dtype);
        out["act_dtype"] = static_cast<int>(d.act_dtype);
        out["act_scale"] = static_cast<int>(d.act_scale);
        out["activation"] = static_cast<int>(d.activation);
        return out;
      },
      nb::arg("config_json"));
  // `model`: the moejit_model_desc_t fields by name (enumerations as their C values); the rest
  // keep moejit_model_desc_init's defaults.
  m.def(
      "warmup",
      [](const Context& ctx, const nb::dict& model, const std::vector<std::string>& archs, nb::object progress) {
        const moejit_model_desc_t d = model_desc(model);
        std::vector<const char*> names;
        for (const std::string& a : archs) names.push_back(a.c_str());
        run_with_progress(ctx, std::move(progress), [&](moejit_context_t c, moejit_progress_fn fn, void* user) {
          return moejit_warmup(c, &d, names.empty() ? nullptr : names.data(), static_cast<uint32_t>(names.size()), fn,
                               user);
        });
      },
      nb::arg("ctx"), nb::arg("model"), nb::arg("archs"), nb::arg("progress").none());
  m.def(
      "prepare",
      [](const Context& ctx, const nb::dict& model, nb::object progress) {
        const moejit_model_desc_t d = model_desc(model);
        run_with_progress(ctx, std::move(progress), [&](moejit_context_t c, moejit_progress_fn fn, void* user) {
          return moejit_prepare(c, &d, fn, user);
        });
      },
      nb::arg("ctx"), nb::arg("model"), nb::arg("progress").none());
}

}  // namespace moejit_python
