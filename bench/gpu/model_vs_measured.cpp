#include "bench/gpu/model_vs_measured.hpp"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace moejit::bench {
namespace {

using Json = nlohmann::ordered_json;

// The words of a name, lower case, with '-' and '_' read as spaces.
std::vector<std::string> words_of(std::string_view s) {
  std::vector<std::string> out;
  std::string w;
  for (char c : s) {
    if (c == ' ' || c == '-' || c == '_') {
      if (!w.empty()) out.push_back(std::move(w));
      w.clear();
    } else {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  if (!w.empty()) out.push_back(std::move(w));
  return out;
}

// perf_model names the gate/up GEMM "up", bench_gemm "gate_up".
std::string_view gemm_of_projection(std::string_view projection) {
  return projection == "gate_up" ? "up" : projection;
}

Json tile_of(const Json& c) { return c.contains("tile") ? c["tile"] : Json(nullptr); }

double number_or(const Json& j, const char* key, double fallback) {
  return j.is_object() && j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

}  // namespace

Json matching_profile(const Json& model, std::string_view gpu_name) {
  if (!model.is_object() || !model.contains("profiles") || !model["profiles"].is_array()) return nullptr;
  const std::vector<std::string> gpu = words_of(gpu_name);
  for (const Json& p : model["profiles"]) {
    if (!p.contains("name") || !p["name"].is_string()) continue;
    const std::vector<std::string> name = words_of(p["name"].get<std::string>());
    if (!name.empty() && std::ranges::all_of(name, [&](const std::string& w) { return std::ranges::find(gpu, w) != gpu.end(); }))
      return p;
  }
  return nullptr;
}

Json model_vs_measured(const Json& model, const Json& bench, std::string_view gpu_name) {
  const Json profile = matching_profile(model, gpu_name);
  if (profile.is_null())
    return {{"error", "the model's JSON has no profile for GPU '" + std::string(gpu_name) + "'"}};
  if (!bench.is_object() || !bench.contains("cases") || !bench["cases"].is_array())
    return {{"error", "bench_gemm's JSON has no cases"}};
  if (!model.contains("cases") || !model["cases"].is_array()) return {{"error", "the model's JSON has no cases"}};
  const std::string profile_name = profile["name"].get<std::string>();
  const double bandwidth = number_or(profile, "memory_bytes_per_s", 0);

  Json rows = Json::array(), unmatched = Json::array();
  for (const Json& m : bench["cases"]) {
    if (!m.contains("median_us") || !m["median_us"].is_number()) continue;  // a case that failed
    const std::string name = m.value("model", ""), format = m.value("format", "");
    const std::string gemm(gemm_of_projection(m.value("projection", "")));
    const auto tokens = m.value("tokens", 0u);
    const auto p = std::find_if(model["cases"].begin(), model["cases"].end(), [&](const Json& c) {
      return c.value("profile", "") == profile_name && c.value("model", "") == name &&
             c.value("format", "") == format && c.value("gemm", "") == gemm && c.value("tokens", 0u) == tokens &&
             c.contains("predicted_fraction");
    });
    if (p == model["cases"].end()) {
      unmatched.push_back({{"model", name}, {"format", format}, {"gemm", gemm}, {"tokens", tokens}});
      continue;
    }
    const double median_s = m["median_us"].get<double>() * 1e-6;
    const Json bytes = m.contains("bytes") ? m["bytes"] : Json(nullptr);
    const double weight_bytes = number_or(bytes, "weights", 0) + number_or(bytes, "scales", 0);
    const double predicted = (*p)["predicted_fraction"].get<double>();
    const double measured = median_s > 0 && bandwidth > 0 ? weight_bytes / median_s / bandwidth : 0;
    rows.push_back({{"model", name},
                     {"format", format},
                     {"gemm", gemm},
                     {"tokens", tokens},
                     {"predicted_fraction", predicted},
                     {"binding", p->value("binding", "")},
                     {"measured_fraction", measured},
                     {"measured_over_predicted", predicted > 0 ? measured / predicted : 0},
                     {"fraction_of_measured_floor", m.contains("fraction_of_floor") ? m["fraction_of_floor"] : Json(nullptr)},
                     {"median_us", m["median_us"]},
                     {"predicted_tile", tile_of(*p)},
                     {"measured_tile", tile_of(m)}});
  }
  return {{"profile", profile_name}, {"rows", rows}, {"unmatched", unmatched}};
}

}  // namespace moejit::bench
