#pragma once
// A set of kernel template files addressed by logical path ("common/types.cuh"). The library's
// own set is embedded at build time; a developer may point MOEJIT_TEMPLATE_DIR at a templates/
// directory to try edits without rebuilding. Keys hash file contents, never paths on disk, so
// both give the same key for the same bytes.
//
// Include rule: templates include each other only as `#include "logical/path.cuh"`, relative to
// the templates root; anything else would make the closure (and so the key) incomplete.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "support/hash.hpp"
#include "support/status.hpp"

namespace moejit::codegen {

class TemplateSet {
 public:
  // The templates embedded in this build (built once, shared).
  static std::shared_ptr<const TemplateSet> embedded();
  // Every *.cuh / *.cu file under `root`.
  static Result<std::shared_ptr<const TemplateSet>> from_directory(const std::string& root);
  // $MOEJIT_TEMPLATE_DIR if set, else the embedded set.
  static Result<std::shared_ptr<const TemplateSet>> from_environment();

  explicit TemplateSet(std::map<std::string, std::string> files) : files_(std::move(files)) {}

  const std::string* find(std::string_view logical_path) const;
  const std::map<std::string, std::string>& files() const { return files_; }

  // `entry` and every file it includes, transitively; sorted logical paths.
  Result<std::vector<std::string>> include_closure(std::string_view entry) const;

  // Content hash of the include closure (paths and bytes), as used in keys. Memoized.
  Result<Hash128> closure_hash(std::string_view entry) const;

 private:
  std::map<std::string, std::string> files_;
  mutable std::mutex memo_mutex_;
  mutable std::map<std::string, Hash128, std::less<>> closure_hashes_;
};

// The quoted includes of a source text, in order of appearance.
std::vector<std::string> quoted_includes(std::string_view source);

}  // namespace moejit::codegen
