#pragma once
// Paths through the PTX of a kernel, for orderings the host backend cannot see: that every path
// from the kernel's entry to some instruction passes another first (every exit of a kernel
// launched with programmatic dependent launch passes griddepcontrol.wait, say). The walk is
// path-insensitive: a conditional branch is taken both ways whatever its predicate, so a kernel
// passes only if the order holds on every path of its control flow, feasible or not.

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace moejit::test {

namespace ptx_detail {

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

struct Statement {
  std::string text;         // without its predicate
  bool predicated = false;  // @p / @!p: may not execute
  bool label = false;
};

// The statements of the first .entry's body: labels and instructions, directives and the braces
// of inline-assembly scopes left out.
inline std::vector<Statement> entry_statements(std::string_view ptx) {
  std::vector<Statement> out;
  const std::size_t entry = ptx.find(".entry");
  if (entry == std::string_view::npos) return out;
  int depth = 0;
  bool in_body = false;
  std::size_t pos = ptx.find('\n', entry);
  while (pos != std::string_view::npos && pos < ptx.size()) {
    const std::size_t end = std::min(ptx.find('\n', pos + 1), ptx.size());
    std::string_view line = ptx.substr(pos + 1, end - pos - 1);
    pos = end == ptx.size() ? std::string_view::npos : end;
    if (const std::size_t comment = line.find("//"); comment != std::string_view::npos) line = line.substr(0, comment);
    line = trim(line);
    if (line.empty()) continue;
    if (line == "{") {
      in_body = true;
      ++depth;
      continue;
    }
    if (line == "}") {
      if (--depth == 0 && in_body) break;
      continue;
    }
    if (!in_body || line.front() == '.') continue;
    Statement s;
    if (line.back() == ':') {
      s.label = true;
      s.text = std::string(line.substr(0, line.size() - 1));
    } else {
      if (line.front() == '@') {
        s.predicated = true;
        line = trim(line.substr(line.find_first_of(" \t")));
      }
      s.text = std::string(line);
    }
    out.push_back(std::move(s));
  }
  return out;
}

inline bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace ptx_detail

// A path from the entry of the first kernel in `ptx` to an instruction that starts with one of
// `to`, passing no unpredicated instruction that starts with `through`: the path's last
// statements, one per line; nullopt when every path passes one (or none reaches `to`).
inline std::optional<std::string> ptx_path_avoiding(std::string_view ptx, std::string_view through,
                                                    const std::vector<std::string_view>& to) {
  using namespace ptx_detail;
  const std::vector<Statement> code = entry_statements(ptx);
  std::unordered_map<std::string, std::size_t> labels;
  for (std::size_t i = 0; i < code.size(); ++i)
    if (code[i].label) labels.emplace(code[i].text, i);
  auto successors = [&](std::size_t i) {
    std::vector<std::size_t> next;
    const Statement& s = code[i];
    const bool branch = !s.label && starts_with(s.text, "bra");
    const bool ends = !s.label && (starts_with(s.text, "ret") || starts_with(s.text, "exit") ||
                                   starts_with(s.text, "trap"));
    if (branch) {
      std::string_view target = s.text;
      target = trim(target.substr(target.find_first_of(" \t")));
      if (!target.empty() && target.back() == ';') target.remove_suffix(1);
      if (auto it = labels.find(std::string(trim(target))); it != labels.end()) next.push_back(it->second);
    }
    if ((!branch && !ends) || s.predicated)
      if (i + 1 < code.size()) next.push_back(i + 1);
    return next;
  };
  std::vector<std::size_t> parent(code.size(), code.size());
  std::vector<bool> seen(code.size(), false);
  std::vector<std::size_t> stack;
  if (!code.empty()) {
    stack.push_back(0);
    seen[0] = true;
  }
  while (!stack.empty()) {
    const std::size_t i = stack.back();
    stack.pop_back();
    const Statement& s = code[i];
    if (!s.label) {
      for (std::string_view target : to)
        if (starts_with(s.text, target)) {
          std::vector<std::string> trail;
          for (std::size_t at = i; at != code.size() && trail.size() < 12; at = parent[at])
            trail.push_back((code[at].predicated ? "@p " : "") + code[at].text + (code[at].label ? ":" : ""));
          std::string text;
          for (auto it = trail.rbegin(); it != trail.rend(); ++it) text += *it + "\n";
          return text;
        }
      if (!s.predicated && starts_with(s.text, through)) continue;
    }
    for (std::size_t n : successors(i))
      if (!seen[n]) {
        seen[n] = true;
        parent[n] = i;
        stack.push_back(n);
      }
  }
  return std::nullopt;
}

}  // namespace moejit::test
