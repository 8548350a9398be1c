#pragma once
// Writes a generated translation unit and its template closure to disk, laid out so that
// `nvcc -I <dir>` (or the host compiler) reproduces the compile outside moejit.
// Directory: $MOEJIT_DUMP_DIR, else <tmp>/moejit-dump-<uid>.

#include <string>

#include "codegen/generate.hpp"
#include "support/status.hpp"

namespace moejit {

// The dump root in use.
std::string dump_root();

// True when MOEJIT_DUMP_DIR is set: every compiled translation unit is dumped.
bool dump_every_compile();

// Returns the path of the dumped translation unit.
Result<std::string> dump_sources(const codegen::GeneratedKernel& kernel,
                                 const codegen::TemplateSet& templates);

}  // namespace moejit
