#include "cli/cli_common.hpp"

#include <cstdio>

namespace moejit::cli {
namespace {

// Messages and paths come from users and the file system and need not be UTF-8 (a file name, a
// byte of a bad spec); dump() would throw on them, so they are printed with U+FFFD instead.
std::string dump(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

void print_text(const Json& doc, const std::string& indent) {
  for (const auto& [key, value] : doc.items()) {
    if (value.is_object()) {
      std::printf("%s%s:\n", indent.c_str(), key.c_str());
      print_text(value, indent + "  ");
    } else if (value.is_array() && !value.empty() && value.front().is_object()) {
      std::printf("%s%s:\n", indent.c_str(), key.c_str());
      for (const auto& item : value) {
        print_text(item, indent + "  ");
        std::printf("\n");
      }
    } else {
      std::string text = value.is_string() ? value.get<std::string>() : dump(value);
      std::printf("%s%s: %s\n", indent.c_str(), key.c_str(), text.c_str());
    }
  }
}

}  // namespace

int print(const GlobalOptions& g, const Json& doc) {
  if (g.json) std::printf("%s\n", dump(doc).c_str());
  else print_text(doc, "");
  return 0;
}

int fail(const GlobalOptions& g, const Status& status) {
  if (g.json) {
    Json doc;
    doc["error"] = {{"code", code_name(status.code())}, {"message", status.message()}};
    std::printf("%s\n", dump(doc).c_str());
  } else {
    std::fprintf(stderr, "moejit: error: %s\n", status.to_string().c_str());
  }
  return 1;
}

Result<store::StoreOptions> store_options(const GlobalOptions& g) {
  MOEJIT_ASSIGN_OR_RETURN(auto o, store::StoreOptions::from_environment());
  if (!g.cache_dir.empty()) o.dir = g.cache_dir;
  return o;
}

Result<KernelResolver::Options> resolver_options(const GlobalOptions& g) {
  MOEJIT_ASSIGN_OR_RETURN(auto o, KernelResolver::Options::from_environment());
  MOEJIT_ASSIGN_OR_RETURN(o.store, store_options(g));
  return o;
}

}  // namespace moejit::cli
