#pragma once
// Reads the `-Xptxas -v` report in an NVRTC log into a KernelReport.

#include <string_view>

#include "compile/compiler.hpp"
#include "support/status.hpp"

namespace moejit {

// The report of `lowered_name`; an error if the log has no report for it.
Result<KernelReport> parse_ptxas_report(std::string_view log, std::string_view lowered_name);

}  // namespace moejit
