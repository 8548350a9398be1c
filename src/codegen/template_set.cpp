#include "codegen/template_set.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

#include "codegen/embedded_templates.hpp"
#include "support/env.hpp"
#include "support/fs.hpp"

namespace moejit::codegen {

std::shared_ptr<const TemplateSet> TemplateSet::embedded() {
  static const std::shared_ptr<const TemplateSet> set = [] {
    std::map<std::string, std::string> files;
    for (const auto& t : embedded_templates()) files.emplace(t.path, std::string(t.content));
    return std::make_shared<const TemplateSet>(std::move(files));
  }();
  return set;
}

Result<std::shared_ptr<const TemplateSet>> TemplateSet::from_directory(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    return error(Code::not_found, "template directory '{}' does not exist", root);
  std::map<std::string, std::string> files;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    auto ext = it->path().extension();
    if (ext != ".cuh" && ext != ".cu") continue;
    MOEJIT_ASSIGN_OR_RETURN(std::string content, read_file(it->path().string()));
    files.emplace(fs::relative(it->path(), root).generic_string(), std::move(content));
  }
  if (ec) return error(Code::io_error, "cannot list template directory '{}': {}", root, ec.message());
  if (files.empty())
    return error(Code::not_found, "template directory '{}' holds no .cuh or .cu files", root);
  return std::make_shared<const TemplateSet>(std::move(files));
}

Result<std::shared_ptr<const TemplateSet>> TemplateSet::from_environment() {
  if (auto dir = env_string("MOEJIT_TEMPLATE_DIR")) return from_directory(*dir);
  return embedded();
}

const std::string* TemplateSet::find(std::string_view logical_path) const {
  auto it = files_.find(std::string(logical_path));
  return it == files_.end() ? nullptr : &it->second;
}

std::vector<std::string> quoted_includes(std::string_view source) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < source.size()) {
    std::size_t end = source.find('\n', pos);
    if (end == std::string_view::npos) end = source.size();
    std::string_view line = source.substr(pos, end - pos);
    pos = end + 1;
    auto skip_space = [&] {
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    };
    skip_space();
    if (!line.starts_with('#')) continue;
    line.remove_prefix(1);
    skip_space();
    if (!line.starts_with("include")) continue;
    line.remove_prefix(7);
    skip_space();
    if (!line.starts_with('"')) continue;
    line.remove_prefix(1);
    if (auto close = line.find('"'); close != std::string_view::npos)
      out.emplace_back(line.substr(0, close));
  }
  return out;
}

Result<std::vector<std::string>> TemplateSet::include_closure(std::string_view entry) const {
  if (find(entry) == nullptr) return error(Code::not_found, "no template '{}'", entry);
  std::set<std::string> seen{std::string(entry)};
  std::vector<std::string> pending{std::string(entry)};
  while (!pending.empty()) {
    std::string current = std::move(pending.back());
    pending.pop_back();
    for (auto& inc : quoted_includes(*find(current))) {
      if (find(inc) == nullptr)
        return error(Code::not_found,
                     "template '{}' includes \"{}\", which is not a template (includes are "
                     "logical paths relative to templates/)",
                     current, inc);
      if (seen.insert(inc).second) pending.push_back(std::move(inc));
    }
  }
  return std::vector<std::string>(seen.begin(), seen.end());
}

Result<Hash128> TemplateSet::closure_hash(std::string_view entry) const {
  {
    std::lock_guard lock(memo_mutex_);
    if (auto it = closure_hashes_.find(entry); it != closure_hashes_.end()) return it->second;
  }
  MOEJIT_ASSIGN_OR_RETURN(auto closure, include_closure(entry));
  Hasher128 h;
  for (const auto& path : closure) {
    const std::string& content = *find(path);
    std::uint64_t size = content.size();
    h.update(path.data(), path.size() + 1);  // includes the terminating NUL as a separator
    h.update(&size, sizeof size);
    h.update(content);
  }
  Hash128 digest = h.digest();
  std::lock_guard lock(memo_mutex_);
  closure_hashes_.emplace(std::string(entry), digest);
  return digest;
}

}  // namespace moejit::codegen
