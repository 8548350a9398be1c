#include "compile/source_dump.hpp"

#include <unistd.h>

#include <filesystem>

#include "support/env.hpp"
#include "support/fs.hpp"

namespace moejit {

std::string dump_root() {
  if (auto dir = env_string("MOEJIT_DUMP_DIR")) return *dir;
  std::error_code ec;
  auto tmp = std::filesystem::temp_directory_path(ec);
  if (ec) tmp = "/tmp";
  return (tmp / fmt::format("moejit-dump-{}", ::getuid())).string();
}

bool dump_every_compile() { return env_string("MOEJIT_DUMP_DIR").has_value(); }

Result<std::string> dump_sources(const codegen::GeneratedKernel& kernel,
                                 const codegen::TemplateSet& templates) {
  namespace fs = std::filesystem;
  const std::string root = dump_root();
  // The default root sits in the shared temporary directory, where another user could have
  // made it first (or a link in its place): it must be a private directory of ours. A root the
  // user named may be shared with their group, but must not be someone else's.
  if (dump_every_compile()) {
    MOEJIT_TRY(make_private_dirs(root));
    MOEJIT_TRY(check_trusted_dir(root));
  } else {
    MOEJIT_TRY(make_private_dir_checked(root));
  }
  fs::path dir = fs::path(root) / (kernel.source_name + "." + unique_suffix());
  for (const auto& header : kernel.headers) {
    const std::string* text = templates.find(header);
    if (text == nullptr)
      return error(Code::internal, "template '{}' of {} vanished from its set", header,
                   kernel.source_name);
    fs::path target = dir / header;
    MOEJIT_TRY(make_private_dirs(target.parent_path().string()));
    MOEJIT_TRY(write_file_atomic(target.string(), *text));
  }
  MOEJIT_TRY(make_private_dirs(dir.string()));
  fs::path tu = dir / kernel.source_name;
  MOEJIT_TRY(write_file_atomic(tu.string(), kernel.source));
  return tu.string();
}

}  // namespace moejit
