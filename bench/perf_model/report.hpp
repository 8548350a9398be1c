#pragma once
// What perf_model writes: the JSON record of a run, the Markdown tables for the README, and one
// line per case for the terminal.

#include <nlohmann/json.hpp>

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bench/perf_model/cases.hpp"
#include "bench/perf_model/evaluate.hpp"

namespace moejit::perf {

struct RunInfo {
  std::string date;       // UTC, ISO 8601
  std::string commit;     // the commit the binary was built from
  std::string nvrtc;      // compiler identity of the kernels
  Disassembler nvdisasm;
  std::string templates;  // "embedded" or $MOEJIT_TEMPLATE_DIR
  std::vector<std::uint32_t> tokens;
  std::vector<DeviceProfile> profiles;
};

// One case with its kernel's analysis and, when both worked, the model's answer.
struct CaseRecord {
  const Case* c = nullptr;
  const KernelAnalysis* kernel = nullptr;  // null when the compile failed
  std::optional<CaseResult> result;
  std::string error;
};

nlohmann::ordered_json report_json(const RunInfo& run, std::span<const KernelAnalysis> kernels,
                           std::span<const CaseRecord> cases, std::span<const SkippedCase> skipped);

// The record as text: numbers to 6 significant digits, and each element of a top-level array of
// objects (kernels, cases) on one line, so that the file stays small and greps well.
std::string report_text(const nlohmann::ordered_json& report);

// Per profile: the predicted percentage of the floor and the binding bound for every model x
// GEMM x format (rows) and token count (columns); then, for the smallest token count, the figures
// behind it (bytes per warp-instruction, registers, CTAs per SM, bytes in flight).
std::string report_markdown(const RunInfo& run, std::span<const CaseRecord> cases);

// "H200 Ling-3.0-flash up mxfp4 T=1 ...: predicted fraction 22.4% of the HBM floor (issue bound)".
std::string case_line(const CaseRecord& record);

}  // namespace moejit::perf
