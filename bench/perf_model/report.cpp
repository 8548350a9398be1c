#include "bench/perf_model/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include "spec/spec_fields.hpp"
#include "spec/spec_json.hpp"

namespace moejit::perf {
namespace {

using json = nlohmann::ordered_json;

std::string hex_address(std::uint32_t a) { return fmt::format("{:#06x}", a); }

std::string tile_text(const KernelSpec& s) {
  return fmt::format("{}x{}x{}, {} stages, {} warps{}", s.bm, s.bn, s.bk, s.stages, s.warps,
                     s.split_k > 1 ? fmt::format(", split-K {}", s.split_k) : "");
}

json counts_json(const InstrCounts& counts) {
  json by_class = json::object();
  for (std::size_t i = 0; i < kInstrClassCount; ++i)
    if (counts.by_class[i] != 0) by_class[std::string(to_string(static_cast<InstrClass>(i)))] = counts.by_class[i];
  // Most frequent first, so the JSON reads like a profile.
  std::vector<std::pair<std::string, std::uint64_t>> ops(counts.by_opcode.begin(), counts.by_opcode.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  json by_opcode = json::array();
  for (const auto& [op, n] : ops) by_opcode.push_back({op, n});
  return {{"instructions", counts.total}, {"by_class", by_class}, {"by_opcode", by_opcode}};
}

json kernel_json(const KernelAnalysis& k) {
  const ResolvedKernel& kernel = *k.kernel;
  json j;
  j["key"] = kernel.key.hex();
  j["spec"] = json::parse(spec_to_json(kernel.spec));
  j["symbol"] = kernel.meta.kernel_name;
  j["registers"] = kernel.meta.registers;
  j["spill_bytes"] = kernel.meta.spill_load_bytes + kernel.meta.spill_store_bytes;
  j["stack_bytes"] = kernel.meta.stack_bytes;
  j["static_shared_bytes"] = kernel.meta.static_shared_bytes;
  j["dynamic_shared_bytes"] = kernel.meta.dynamic_shared_bytes;
  j["block_threads"] = kernel.meta.block_threads;
  j["function_instructions"] = k.function_instructions;
  if (!k.error.empty()) j["error"] = k.error;
  if (!k.loop) return j;
  const MainLoopAnalysis& l = *k.loop;
  json main = counts_json(l.main_counts);
  main["start"] = hex_address(l.main.start);
  main["end"] = hex_address(l.main.end);
  main["mma"] = l.main_counts.of(InstrClass::mma);
  j["main_loop"] = main;
  j["mma_per_stage_per_warp"] = l.mma_per_stage;
  j["mma_for_unroll"] = l.unroll_mma;
  j["unroll_raw"] = l.unroll_raw;
  json counted = counts_json(l.counts);
  counted["start"] = hex_address(l.counted.start);
  counted["end"] = hex_address(l.counted.end);
  counted["inner_trips"] = l.inner_trips;
  counted["stages_per_iteration"] = l.stages;
  counted["in_other_nested_loops"] = l.in_other_nested_loops;
  j["counted_loop"] = counted;
  if (!l.note.empty()) j["note"] = l.note;
  if (!l.warning.empty()) j["warning"] = l.warning;
  return j;
}

json case_json(const CaseRecord& rec) {
  const Case& c = *rec.c;
  const KernelSpec& s = c.spec;
  json j;
  j["model"] = c.model->name;
  j["format"] = c.format->name;
  j["gemm"] = to_string(c.gemm);
  j["tokens"] = c.tokens;
  j["prefill"] = c.prefill();
  j["profile"] = c.profile->name;
  j["arch"] = to_string(s.arch);
  j["n"] = s.n;
  j["k"] = s.k;
  j["experts"] = c.experts();
  j["topk"] = c.topk();
  j["tile"] = {{"bm", s.bm},         {"bn", s.bn},       {"bk", s.bk},
               {"stages", s.stages}, {"warps", s.warps}, {"split_k", s.split_k}};
  if (rec.kernel != nullptr) j["kernel"] = rec.kernel->kernel->key.hex();
  if (!rec.error.empty()) j["error"] = rec.error;
  if (!rec.result) return j;
  const CaseResult& r = *rec.result;
  // grid: column tiles, row tiles (the most the routing can need), K splits.
  j["launch"] = {{"grid", {r.tiles.columns, r.tiles.rows, r.tiles.splits}},
                 {"block_threads", r.block_threads},
                 {"dynamic_shared_bytes", r.dynamic_shared_bytes}};
  j["expected_tiles"] = r.expected_tiles;
  j["mma_row_share"] = r.mma_row_share;
  j["ctas"] = r.ctas;
  j["occupancy"] = {{"ctas_per_sm", r.occupancy.ctas_per_sm},
                    {"limiter", r.occupancy.limiter},
                    {"by_registers", r.occupancy.by_registers},
                    {"by_shared", r.occupancy.by_shared},
                    {"by_threads", r.occupancy.by_threads},
                    {"by_blocks", r.occupancy.by_blocks},
                    {"registers_per_warp", r.occupancy.registers_per_warp},
                    {"shared_per_block", r.occupancy.shared_per_block}};
  j["bytes"] = {{"stage_weight", r.stage.weight},
                {"stage_scale", r.stage.scale},
                {"stage_zero", r.stage.zero},
                {"stages_per_iteration", r.stages_per_iteration},
                {"instructions_per_iteration", r.instructions_per_iteration},
                {"weight_per_iteration_per_warp", r.weight_bytes_per_iteration},
                {"scale_zero_per_iteration_per_warp", r.scale_zero_bytes_per_iteration},
                {"weight_per_warp_instruction", r.weight_bytes_per_instruction},
                {"scale_zero_per_warp_instruction", r.scale_zero_bytes_per_instruction},
                {"per_warp_instruction", r.bytes_per_instruction}};
  j["busy_sms"] = r.bounds.busy_sms;
  j["ctas_on_busiest_sm"] = r.bounds.ctas_on_busiest_sm;
  j["resident_ctas_on_busiest_sm"] = r.bounds.resident_ctas;
  j["resident_warps_on_busiest_sm"] = r.bounds.resident_warps;
  j["stages_per_cta"] = r.stages_per_cta;
  j["inflight_bytes_per_sm"] = r.bounds.inflight_bytes_per_sm;
  j["needed_inflight_bytes"] = r.bounds.needed_inflight_bytes;
  j["waves"] = r.bounds.waves;
  j["bounds"] = {{"issue", r.bounds.issue},
                 {"latency", r.bounds.latency},
                 {"fill", r.bounds.fill},
                 {"mma", r.bounds.mma}};
  j["predicted_fraction"] = r.bounds.fraction;
  j["binding"] = to_string(r.bounds.binding);
  j["active_experts"] = r.active_experts;
  j["floor_bytes"] = r.floor_bytes;
  j["floor_us"] = r.floor_seconds * 1e6;
  j["predicted_us"] = r.predicted_seconds * 1e6;
  if (r.mma_share) j["mma_share"] = *r.mma_share;
  return j;
}

std::string percent_cell(const CaseRecord& rec) {
  if (!rec.result) return "error";
  const Bounds& b = rec.result->bounds;
  const double pct = 100 * b.fraction;
  const char bound = static_cast<char>(b.binding);
  return pct < 10 ? fmt::format("{:.1f} {}", pct, bound) : fmt::format("{:.0f} {}", pct, bound);
}

// Fractions to 6 significant digits (the model is no more precise than that); whole numbers,
// byte counts mostly, stay exact.
void round_numbers(json& j) {
  if (j.is_number_float()) {
    const double x = j.get<double>();
    if (x != std::floor(x)) j = std::stod(fmt::format("{:.6g}", x));
  } else if (j.is_structured()) {
    for (auto& element : j) round_numbers(element);
  }
}

// Rows of the tables: model x GEMM x format, in the order the cases came.
struct RowKey {
  std::string model, format;
  Gemm gemm;
  auto operator<=>(const RowKey&) const = default;
};

}  // namespace

nlohmann::ordered_json report_json(const RunInfo& run, std::span<const KernelAnalysis> kernels,
                           std::span<const CaseRecord> cases, std::span<const SkippedCase> skipped) {
  json j;
  j["benchmark"] = "perf_model";
  j["date"] = run.date;
  j["commit"] = run.commit;
  j["nvrtc"] = run.nvrtc;
  // The tool by name and version, not by path: results are committed, and a path names the
  // machine that made them.
  j["nvdisasm"] = {{"name", std::filesystem::path(run.nvdisasm.path).filename().string()},
                   {"version", run.nvdisasm.version}};
  j["templates"] = run.templates;
  j["tokens"] = run.tokens;
  json profiles = json::array();
  for (const auto& p : run.profiles)
    profiles.push_back({{"name", p.name},
                        {"arch", to_string(p.arch)},
                        {"sms", p.sms},
                        {"clock_ghz", p.clock_ghz},
                        {"memory_bytes_per_s", p.memory_bytes_per_s},
                        {"memory_latency_ns", p.memory_latency_ns},
                        {"mma_per_clock", p.mma_per_clock},
                        {"wgmma_per_clock", p.wgmma_per_clock},
                        {"shared_per_sm", p.shared_per_sm},
                        {"registers_per_sm", p.registers_per_sm},
                        {"max_threads_per_sm", p.max_threads_per_sm},
                        {"max_blocks_per_sm", p.max_blocks_per_sm}});
  j["profiles"] = profiles;
  json assumptions = json::array();
  for (auto a : model_assumptions()) assumptions.push_back(a);
  j["assumptions"] = assumptions;
  json k = json::array();
  for (const auto& a : kernels) k.push_back(kernel_json(a));
  j["kernels"] = k;
  json c = json::array();
  for (const auto& rec : cases) c.push_back(case_json(rec));
  j["cases"] = c;
  json s = json::array();
  for (const auto& sk : skipped)
    s.push_back({{"model", sk.model}, {"format", sk.format}, {"profile", sk.profile}, {"tokens", sk.tokens},
                 {"reason", sk.reason}});
  j["skipped"] = s;
  return j;
}

std::string report_text(const nlohmann::ordered_json& report) {
  json rounded = report;
  round_numbers(rounded);
  std::string text = "{\n";
  std::size_t i = 0;
  for (auto it = rounded.begin(); it != rounded.end(); ++it, ++i) {
    text += fmt::format("  {}: ", json(it.key()).dump());
    const json& v = it.value();
    const bool records = v.is_array() && !v.empty() && v.front().is_object();
    const bool scalars =
        v.is_array() && std::none_of(v.begin(), v.end(), [](const json& e) { return e.is_structured(); });
    if (scalars) {
      text += v.dump();
    } else if (records) {
      text += "[\n";
      for (std::size_t r = 0; r < v.size(); ++r)
        text += fmt::format("    {}{}\n", v[r].dump(), r + 1 < v.size() ? "," : "");
      text += "  ]";
    } else {
      std::string value = v.dump(2);
      for (std::size_t pos = value.find('\n'); pos != std::string::npos; pos = value.find('\n', pos + 1))
        value.insert(pos + 1, "  ");
      text += value;
    }
    text += i + 1 < rounded.size() ? ",\n" : "\n";
  }
  return text + "}\n";
}

std::string report_markdown(const RunInfo& run, std::span<const CaseRecord> cases) {
  std::string md;
  for (const DeviceProfile& p : run.profiles) {
    std::vector<RowKey> rows;
    std::map<std::pair<RowKey, std::uint32_t>, const CaseRecord*> cells;
    std::vector<std::uint32_t> tokens;
    for (const auto& rec : cases) {
      if (rec.c->profile->name != p.name) continue;
      RowKey key{rec.c->model->name, std::string(rec.c->format->name), rec.c->gemm};
      if (std::find(rows.begin(), rows.end(), key) == rows.end()) rows.push_back(key);
      if (std::find(tokens.begin(), tokens.end(), rec.c->tokens) == tokens.end()) tokens.push_back(rec.c->tokens);
      cells[{key, rec.c->tokens}] = &rec;
    }
    if (rows.empty()) continue;
    std::sort(tokens.begin(), tokens.end());

    md += fmt::format("#### {} ({}, {} SMs, {:.2f} TB/s): predicted % of the HBM floor\n\n", p.name, to_string(p.arch),
                      p.sms, p.memory_bytes_per_s / 1e12);
    md += "Binding bound: I issue, L latency (bytes in flight), F fill (busy SMs, CTAs on the busiest SM), M mma "
          "(tensor cores); T marked * is prefill.\n\n";
    md += "| model | GEMM | format |";
    for (auto t : tokens) md += fmt::format(" T={}{} |", t, t > kLargestDecodeTokens ? "*" : "");
    md += "\n|---|---|---|";
    for (std::size_t i = 0; i < tokens.size(); ++i) md += "---|";
    md += "\n";
    for (const auto& row : rows) {
      md += fmt::format("| {} | {} | {} |", row.model, to_string(row.gemm), row.format);
      for (auto t : tokens) {
        auto it = cells.find({row, t});
        md += fmt::format(" {} |", it == cells.end() ? std::string("-") : percent_cell(*it->second));
      }
      md += "\n";
    }

    const std::uint32_t t0 = tokens.front();
    md += fmt::format("\nAt T={} ({}):\n\n", t0, p.name);
    md += "| model | GEMM | format | tile | weight B/instr | scale B/instr | instr/stage | registers | CTAs/SM | "
          "CTAs | in flight KB/SM | issue | latency | fill | mma |\n";
    md += "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const auto& row : rows) {
      auto it = cells.find({row, t0});
      if (it == cells.end()) continue;
      const CaseRecord& rec = *it->second;
      if (!rec.result) {
        md += fmt::format("| {} | {} | {} | {} | error: {} ||||||||||\n", row.model, to_string(row.gemm), row.format,
                          tile_text(rec.c->spec), rec.error);
        continue;
      }
      const CaseResult& r = *rec.result;
      md += fmt::format("| {} | {} | {} | {} | {:.2f} | {:.3f} | {:.0f} | {} | {} | {:.0f} | {:.1f} | {:.0f}% | "
                        "{:.0f}% | {:.0f}% | {:.0f}% |\n",
                        row.model, to_string(row.gemm), row.format, tile_text(rec.c->spec),
                        r.weight_bytes_per_instruction, r.scale_zero_bytes_per_instruction,
                        r.instructions_per_iteration / r.stages_per_iteration, rec.kernel->kernel->meta.registers,
                        r.occupancy.ctas_per_sm, r.ctas, r.bounds.inflight_bytes_per_sm / 1024, 100 * r.bounds.issue,
                        100 * r.bounds.latency, 100 * r.bounds.fill, 100 * r.bounds.mma);
    }
    md += "\n";
  }
  return md;
}

std::string case_line(const CaseRecord& rec) {
  const Case& c = *rec.c;
  std::string head = fmt::format("{} {} {} {} T={}{} [{}]", c.profile->name, c.model->name, to_string(c.gemm),
                                 c.format->name, c.tokens, c.prefill() ? " (prefill)" : "", tile_text(c.spec));
  if (!rec.result) return head + ": error: " + rec.error;
  const CaseResult& r = *rec.result;
  return fmt::format("{}: {:.2f} weight + {:.3f} scale B/warp-instr, {} CTAs/SM, {:.1f} CTAs, {:.1f} KB in flight/SM; "
                     "issue {:.1f}% latency {:.1f}% fill {:.1f}% mma {:.1f}% -> predicted fraction {:.1f}% of the HBM "
                     "floor ({} bound), {:.2f} us vs floor {:.2f} us",
                     head, r.weight_bytes_per_instruction, r.scale_zero_bytes_per_instruction, r.occupancy.ctas_per_sm,
                     r.ctas, r.bounds.inflight_bytes_per_sm / 1024, 100 * r.bounds.issue, 100 * r.bounds.latency,
                     100 * r.bounds.fill, 100 * r.bounds.mma, 100 * r.bounds.fraction, to_string(r.bounds.binding),
                     r.predicted_seconds * 1e6, r.floor_seconds * 1e6);
}

}  // namespace moejit::perf
