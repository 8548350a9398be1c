// The `moejit` command: its JSON contract, exit codes and error messages.

#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <nlohmann/json.hpp>

#include "codegen/template_set.hpp"
#include "compile/nvrtc_library.hpp"
#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;
using Json = nlohmann::json;
namespace fs = std::filesystem;

#ifndef MOEJIT_CLI
#error "MOEJIT_CLI must name the moejit binary"
#endif

namespace {

struct CliRun {
  int exit_code;
  Json doc;
  std::string err;
};

// Runs moejit with --json; the output must be exactly one JSON object on one line.
CliRun moejit_json(const TempDir& dir, std::vector<std::string> args,
                   std::map<std::string, std::string> env = {}, const std::string& binary = MOEJIT_CLI) {
  std::vector<std::string> argv = {binary, "--json", "--cache-dir", dir / "store"};
  argv.insert(argv.end(), args.begin(), args.end());
  env.emplace("MOEJIT_LOCK_DIR", dir / "locks");
  ProcessResult r = run_process(argv, env);
  CAPTURE(r.out);
  CAPTURE(r.err);
  REQUIRE(!r.out.empty());
  REQUIRE(r.out.back() == '\n');
  REQUIRE(r.out.find('\n') == r.out.size() - 1);
  Json doc = Json::parse(r.out, nullptr, false);
  REQUIRE(doc.is_object());
  return {r.exit_code, doc, r.err};
}

const std::string kAlignSpec =
    R"({"op": "moe_align", "experts": 128, "bm": 32, "warps": 4, "arch": "sm_90a"})";

}  // namespace

TEST_CASE("moejit --version --json") {
  TempDir dir;
  auto r = moejit_json(dir, {"--version"});
  CHECK(r.exit_code == 0);
  CHECK(r.doc["version"] == moejit_version());
  CHECK(r.doc.contains("compiler"));
}

TEST_CASE("moejit compile reports compiled then disk and --arch overrides the spec") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  write_text(dir / "spec.json", kAlignSpec);
  auto first = moejit_json(dir, {"compile", "--spec", dir / "spec.json"});
  CHECK(first.exit_code == 0);
  for (const char* field : {"key", "source", "kernel", "registers", "spill_bytes", "shared_bytes",
                            "compile_ms"}) {
    CAPTURE(field);
    CHECK(first.doc.contains(field));
  }
  CHECK(first.doc["source"] == "compiled");
  CHECK(first.doc["spill_bytes"] == 0);
  CHECK(first.doc["shared_bytes"] == (4 * 128 + 128 + 1) * 4);
  CHECK(first.doc["key"].get<std::string>().size() == 32);
  auto second = moejit_json(dir, {"compile", "--spec", dir / "spec.json"});
  CHECK(second.doc["source"] == "disk");
  CHECK(second.doc["key"] == first.doc["key"]);
  auto other = moejit_json(dir, {"compile", "--spec", dir / "spec.json", "--arch", "sm_80"});
  CHECK(other.doc["source"] == "compiled");
  CHECK(other.doc["arch"] == "sm_80");
  CHECK(other.doc["key"] != first.doc["key"]);
}

TEST_CASE("two installs at different paths with templates from different checkouts agree on keys") {
  if (!nvrtc_or_skip()) return;
  TempDir a, b;
  std::vector<std::string> keys;
  for (const TempDir* root : {&a, &b}) {
    fs::create_directories(root->path() + "/prefix/bin");
    std::string bin = *root / "prefix/bin/moejit";
    fs::copy_file(MOEJIT_CLI, bin);
    for (const auto& [path, content] : codegen::TemplateSet::embedded()->files()) {
      fs::path target = fs::path(root->path()) / "checkout/templates" / path;
      fs::create_directories(target.parent_path());
      write_text(target.string(), content);
    }
    write_text(*root / "spec.json", kAlignSpec);
    auto r = moejit_json(*root, {"compile", "--spec", *root / "spec.json"},
                         {{"MOEJIT_TEMPLATE_DIR", *root / "checkout/templates"}}, bin);
    CHECK(r.exit_code == 0);
    keys.push_back(r.doc["key"].get<std::string>());
    // The embedded templates give the same key as the checkout's copy.
    auto embedded = moejit_json(*root, {"compile", "--spec", *root / "spec.json"}, {}, bin);
    CHECK(embedded.doc["key"] == r.doc["key"]);
    CHECK(embedded.doc["source"] == "disk");
  }
  CHECK(keys[0] == keys[1]);
}

TEST_CASE("moejit compile bad input gives a JSON error naming the problem") {
  TempDir dir;
  write_text(dir / "typo.json", R"({"op": "moe_align", "expert": 8, "arch": "sm_90a"})");
  auto r = moejit_json(dir, {"compile", "--spec", dir / "typo.json"});
  CHECK(r.exit_code == 1);
  CHECK(r.doc["error"]["code"] == "invalid_argument");
  CHECK(r.doc["error"]["message"].get<std::string>().find("'expert'") != std::string::npos);

  write_text(dir / "spec.json", kAlignSpec);
  r = moejit_json(dir, {"compile", "--spec", dir / "spec.json", "--arch", "sm_99"});
  CHECK(r.exit_code == 1);
  CHECK(r.doc["error"]["message"].get<std::string>().find("sm_99") != std::string::npos);

  write_text(dir / "range.json", R"({"op": "moe_align", "experts": 8, "bm": 8, "warps": 64, "arch": "sm_90a"})");
  r = moejit_json(dir, {"compile", "--spec", dir / "range.json"});
  CHECK(r.exit_code == 1);
  CHECK(r.doc["error"]["message"].get<std::string>().find("'warps' = 64") != std::string::npos);

  r = moejit_json(dir, {"compile", "--spec", dir / "absent.json"});
  CHECK(r.exit_code == 1);
  CHECK(r.doc["error"]["code"] == "not_found");
}

TEST_CASE("no NVRTC gives a clear error and no crash") {
  TempDir dir;
  write_text(dir / "spec.json", kAlignSpec);
  auto r = moejit_json(dir, {"compile", "--spec", dir / "spec.json"},
                       {{"MOEJIT_NVRTC_LIBRARY", dir / "no/libnvrtc.so"}});
  CHECK(r.exit_code == 1);
  CHECK(r.doc["error"]["code"] == "unavailable");
  auto message = r.doc["error"]["message"].get<std::string>();
  CHECK(message.find("NVRTC not found") != std::string::npos);
  CHECK(message.find("MOEJIT_NVRTC_LIBRARY") != std::string::npos);
  auto v = moejit_json(dir, {"--version"}, {{"MOEJIT_NVRTC_LIBRARY", dir / "no/libnvrtc.so"}});
  CHECK(v.exit_code == 0);
  CHECK(v.doc["compiler"].is_null());
}

TEST_CASE("moejit cache stat ls verify prune clear export import") {
  if (!nvrtc_or_skip()) return;
  TempDir dir;
  write_text(dir / "spec.json", kAlignSpec);
  REQUIRE(moejit_json(dir, {"compile", "--spec", dir / "spec.json"}).exit_code == 0);
  REQUIRE(moejit_json(dir, {"compile", "--spec", dir / "spec.json", "--arch", "sm_80"}).exit_code == 0);

  auto stat = moejit_json(dir, {"cache", "stat"});
  CHECK(stat.exit_code == 0);
  CHECK(stat.doc["entries"] == 2);
  CHECK(stat.doc["memory_only"] == false);
  CHECK(stat.doc["dir"] == dir / "store");

  auto ls = moejit_json(dir, {"cache", "ls"});
  REQUIRE(ls.doc["entries"].size() == 2);
  std::set<std::string> archs;
  for (const auto& e : ls.doc["entries"]) {
    CHECK(e["ok"] == true);
    CHECK(e["op"] == "moe_align");
    archs.insert(e["arch"].get<std::string>());
  }
  CHECK(archs == std::set<std::string>{"sm_80", "sm_90a"});

  auto verify = moejit_json(dir, {"cache", "verify"});
  CHECK(verify.exit_code == 0);
  CHECK(verify.doc["ok"] == true);
  CHECK(verify.doc["checked"] == 2);

  auto exported = moejit_json(dir, {"cache", "export", dir / "bundle.mjb"});
  CHECK(exported.exit_code == 0);
  CHECK(exported.doc["entries"] == 2);

  // Damage one entry: verify fails and names it.
  std::string bad_path = ls.doc["entries"][0]["path"];
  std::string bytes = slurp(bad_path);
  bytes[bytes.size() - 10] = static_cast<char>(bytes[bytes.size() - 10] ^ 4);
  write_text(bad_path, bytes);
  verify = moejit_json(dir, {"cache", "verify"});
  CHECK(verify.exit_code == 1);
  CHECK(verify.doc["ok"] == false);
  REQUIRE(verify.doc["bad"].size() == 1);
  CHECK(verify.doc["bad"][0]["path"] == bad_path);
  CHECK(verify.doc["bad"][0]["moved_aside"] == true);  // rebuilt when next needed
  CHECK(moejit_json(dir, {"cache", "verify"}).exit_code == 0);

  auto prune = moejit_json(dir, {"cache", "prune", "--max-bytes", "1"});
  CHECK(prune.exit_code == 0);
  CHECK(prune.doc["removed_entries"] == 1);
  CHECK(prune.doc["removed_other"] == 1);  // the entry verify moved aside
  CHECK(moejit_json(dir, {"cache", "stat"}).doc["entries"] == 0);

  auto imported = moejit_json(dir, {"cache", "import", dir / "bundle.mjb"});
  CHECK(imported.exit_code == 0);
  CHECK(imported.doc["entries"] == 2);
  CHECK(moejit_json(dir, {"cache", "verify"}).exit_code == 0);
  auto hit = moejit_json(dir, {"compile", "--spec", dir / "spec.json"});
  CHECK(hit.doc["source"] == "disk");

  auto clear = moejit_json(dir, {"cache", "clear"});
  CHECK(clear.exit_code == 0);
  CHECK(moejit_json(dir, {"cache", "stat"}).doc["entries"] == 0);

  auto bad_size = moejit_json(dir, {"cache", "prune", "--max-bytes", "lots"});
  CHECK(bad_size.exit_code == 1);
  CHECK(bad_size.doc["error"]["message"].get<std::string>().find("--max-bytes") != std::string::npos);
  auto bad_key = moejit_json(dir, {"cache", "export", dir / "x.mjb", "--key", "xyz"});
  CHECK(bad_key.exit_code == 1);
}
