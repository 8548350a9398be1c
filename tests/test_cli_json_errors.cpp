// The `moejit` command's error contract on bad input: with --json anywhere on the command line,
// every error (a bad command line, hostile JSON in a spec, config or usage manifest, an exception)
// is exactly one JSON error object on stdout and exit 1; without --json it is text on stderr and
// exit 1. --help stays help and exit 0.

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "test_support.hpp"

using namespace moejit;
using namespace moejit::test;
using Json = nlohmann::json;

#ifndef MOEJIT_CLI
#error "MOEJIT_CLI must name the moejit binary"
#endif

namespace {

// Runs moejit with `args` as given (the caller places --json), in a store under `dir`.
ProcessResult moejit_run(const TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {MOEJIT_CLI, "--cache-dir", dir / "store"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, {{"MOEJIT_LOCK_DIR", dir / "locks"}});
}

// The failure as --json promises it: exit 1, stdout one line holding only {"error": {code, message}}.
// Returns the inner object.
Json json_error(const ProcessResult& r) {
  CAPTURE(r.out);
  CAPTURE(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("Sanitizer") == std::string::npos);
  REQUIRE(!r.out.empty());
  REQUIRE(r.out.back() == '\n');
  REQUIRE(r.out.find('\n') == r.out.size() - 1);
  const Json doc = Json::parse(r.out, nullptr, false);
  REQUIRE(doc.is_object());
  REQUIRE(doc.size() == 1);
  REQUIRE(doc.contains("error"));
  const Json& e = doc["error"];
  REQUIRE(e.is_object());
  CHECK(e.size() == 2);
  REQUIRE(e["code"].is_string());
  REQUIRE(e["message"].is_string());
  CHECK(!e["message"].get<std::string>().empty());
  return e;
}

// The failure without --json: exit 1, nothing on stdout, a message on stderr.
void check_text_error(const ProcessResult& r, const std::string& expect_in_stderr) {
  CAPTURE(r.out);
  CAPTURE(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK(r.err.find("Sanitizer") == std::string::npos);
  CHECK(r.err.find(expect_in_stderr) != std::string::npos);
}

bool contains(const Json& e, const std::string& part) {
  return e["message"].get<std::string>().find(part) != std::string::npos;
}

std::string nested_arrays(std::size_t levels) { return std::string(levels, '[') + "7" + std::string(levels, ']'); }

std::string nested_objects(std::size_t levels) {
  std::string text;
  for (std::size_t i = 0; i < levels; ++i) text += R"({"a":)";
  return text + "7" + std::string(levels, '}');
}

// A small MoE config whose model_type is `model_type` (JSON text).
std::string config_with_model_type(const std::string& model_type) {
  return R"({"model_type": )" + model_type + R"(, "hidden_size": 256, "moe_intermediate_size": 128,
             "n_routed_experts": 16, "num_experts_per_tok": 4})";
}

}  // namespace

TEST_CASE("moejit: a spec, config or usage manifest nested 100,000 deep is an error, not a crash") {
  TempDir dir;
  // Each places the deep value where the old readers recursed on it: a field's value (dumped into
  // the message), text_config (copied), a manifest line's field.
  write_text(dir / "spec.json", R"({"op": "moe_align", "bm": )" + nested_arrays(100000) + "}");
  write_text(dir / "spec-objects.json", nested_objects(100000));
  write_text(dir / "config.json", R"({"model_type": "qwen3_moe", "hidden_size": )" + nested_arrays(100000) + "}");
  write_text(dir / "config-text.json", R"({"text_config": )" + nested_objects(100000) + "}");
  write_text(dir / "usage.jsonl", R"({"op": )" + nested_arrays(100000) + "}\n");
  const std::vector<std::vector<std::string>> commands = {
      {"compile", "--spec", dir / "spec.json"},
      {"compile", "--spec", dir / "spec-objects.json"},
      {"warmup", "--model", dir / "config.json", "--arch", "sm_90a"},
      {"warmup", "--model", dir / "config-text.json", "--arch", "sm_90a"},
      {"demo", "--model", dir / "config.json", "--backend", "host"},
      {"demo", "--model", dir / "config-text.json", "--backend", "host"},
      {"warmup", "--from-usage", dir / "usage.jsonl"},
  };
  for (const auto& args : commands) {
    CAPTURE(args[2]);
    CAPTURE(args[0]);
    std::vector<std::string> with_json = {"--json"};
    with_json.insert(with_json.end(), args.begin(), args.end());
    const Json e = json_error(moejit_run(dir, with_json));
    CHECK(e["code"] == "invalid_argument");
    CHECK(contains(e, args[2]));  // the file
    CHECK(contains(e, "deeper than 64"));
    check_text_error(moejit_run(dir, args), "deeper than 64");
  }
}

TEST_CASE("moejit warmup and demo: a model_type that is not a string is an error naming it") {
  TempDir dir;
  for (const char* kind : {"null", "42", "-1.5", "true", "false", R"(["deepseek_v3"])", R"({"name": "gpt_oss"})"}) {
    const std::string kind_text = kind;
    CAPTURE(kind_text);
    write_text(dir / "config.json", config_with_model_type(kind));
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"warmup", "--model", dir / "config.json", "--arch", "sm_90a", "--max-tokens", "2"},
          std::vector<std::string>{"demo", "--model", dir / "config.json", "--backend", "host", "--tokens", "2"}}) {
      CAPTURE(args[0]);
      std::vector<std::string> with_json = args;
      with_json.push_back("--json");
      const Json e = json_error(moejit_run(dir, with_json));
      CHECK(e["code"] == "invalid_argument");
      CHECK(contains(e, "'model_type'"));
      CHECK(contains(e, "expected a string"));
      check_text_error(moejit_run(dir, args), "'model_type'");
    }
  }
}

TEST_CASE("moejit: a key repeated in a spec or a model config is refused") {
  TempDir dir;
  write_text(dir / "spec.json", R"({"op": "moe_align", "experts": 128, "bm": 32, "warps": 4, "bm": 64, "arch": "sm_90a"})");
  const Json spec = json_error(moejit_run(dir, {"--json", "compile", "--spec", dir / "spec.json"}));
  CHECK(spec["code"] == "invalid_argument");
  CHECK(contains(spec, "duplicate key 'bm'"));
  write_text(dir / "config.json", R"({"model_type": "deepseek_v3", "hidden_size": 256, "moe_intermediate_size": 128,
    "n_routed_experts": 16, "num_experts_per_tok": 4, "n_routed_experts": 64})");
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--json", "warmup", "--model", dir / "config.json", "--arch", "sm_90a"},
        std::vector<std::string>{"--json", "demo", "--model", dir / "config.json", "--backend", "host"}}) {
    CAPTURE(args[1]);
    const Json config = json_error(moejit_run(dir, args));
    CHECK(config["code"] == "invalid_argument");
    CHECK(contains(config, "duplicate key 'n_routed_experts'"));
  }
}

TEST_CASE("moejit --json: every command-line error is the JSON error object and exit 1") {
  TempDir dir;
  write_text(dir / "config.json", config_with_model_type(R"("deepseek_v3")"));
  struct Case {
    std::string what;
    std::vector<std::string> args;
    std::string in_message;  // names the option or command at fault
    // Whether --json may also come last: after an option that lacks its value, CLI11 takes
    // "--json" as that value (then the command fails on it, still as JSON, but for another reason).
    bool json_last = true;
  };
  const std::vector<Case> cases = {
      {"unknown flag", {"compile", "--spec", dir / "s.json", "--bogus"}, "--bogus"},
      {"unknown global flag", {"--frobnicate"}, "--frobnicate"},
      {"unknown command", {"frobnicate"}, "frobnicate"},
      {"unknown cache command", {"cache", "frobnicate"}, "subcommand"},
      {"missing required option", {"compile"}, "--spec"},
      {"missing required option of a cache command", {"cache", "prune"}, "--max-bytes"},
      {"missing required argument", {"cache", "export"}, "FILE"},
      {"missing subcommand", {"cache"}, "subcommand"},
      {"option without its value", {"compile", "--spec"}, "--spec", false},
      {"negative count", {"warmup", "--model", dir / "config.json", "--arch", "sm_90a", "--tp", "-1"}, "--tp"},
      {"not a number", {"warmup", "--model", dir / "config.json", "--arch", "sm_90a", "--tp", "two"}, "--tp"},
      {"out of range", {"warmup", "--model", dir / "config.json", "--max-tokens", "99999999999"}, "--max-tokens"},
      {"not a number (demo)", {"demo", "--tokens", "abc"}, "--tokens"},
      {"out of range (demo)", {"demo", "--tokens", "100000"}, "--tokens"},
      {"zero iterations (demo)", {"demo", "--iterations", "0"}, "--iterations"},
      {"two commands", {"compile", "--spec", dir / "s.json", "demo"}, "demo"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    // --json first, and after everything (global flags may follow the command).
    std::vector<std::string> first = {"--json"};
    first.insert(first.end(), c.args.begin(), c.args.end());
    std::vector<std::string> last = c.args;
    last.push_back("--json");
    std::vector<std::vector<std::string>> placements = {first};
    if (c.json_last) placements.push_back(last);
    for (const auto& args : placements) {
      const Json e = json_error(moejit_run(dir, args));
      CHECK(e["code"] == "invalid_argument");
      CAPTURE(e["message"].get<std::string>());
      CHECK(contains(e, c.in_message));
    }
    // Without --json: text on stderr, nothing on stdout, exit 1 (not CLI11's 104-114).
    check_text_error(moejit_run(dir, c.args), c.in_message);
  }
}

TEST_CASE("moejit --json with no command is an error listing the commands, and --help stays help") {
  TempDir dir;
  const Json e = json_error(moejit_run(dir, {"--json"}));
  CHECK(e["code"] == "invalid_argument");
  for (const char* command : {"compile", "cache", "warmup", "demo"}) {
    const std::string command_text = command;
    CAPTURE(command_text);
    CHECK(contains(e, command));
  }
  const ProcessResult bare = moejit_run(dir, {});
  check_text_error(bare, "expected a command");
  CHECK(bare.err.find("--help") != std::string::npos);
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--help"}, std::vector<std::string>{"--json", "--help"},
                                               std::vector<std::string>{"compile", "--help", "--json"}}) {
    const ProcessResult help = moejit_run(dir, args);
    CAPTURE(help.out);
    CHECK(help.exit_code == 0);
    CHECK(help.out.find("Usage") != std::string::npos);
  }
}

TEST_CASE("moejit demo: a --model path the system cannot look up is an error, not an abort") {
  TempDir dir;
  const std::string too_long = dir / std::string(5000, 'm');
  const Json e = json_error(moejit_run(dir, {"--json", "demo", "--model", too_long, "--backend", "host"}));
  CHECK(e["code"] == "io_error");
  CHECK(contains(e, "--model"));
  check_text_error(moejit_run(dir, {"demo", "--model", too_long, "--backend", "host"}), "--model");
}

TEST_CASE("moejit demo: a config whose layer the demo cannot build is an error before the weights are made") {
  TempDir dir;
  auto config = [&](const std::string& name, std::uint64_t hidden, std::uint64_t intermediate) {
    write_text(dir / name, fmt::format(R"({{"model_type": "qwen3_moe", "hidden_size": {}, "moe_intermediate_size": {},
                                          "num_experts": 16, "num_experts_per_tok": 2}})",
                                       hidden, intermediate));
    return dir / name;
  };
  struct Case {
    std::string what, path, in_message;
  };
  std::vector<Case> cases = {
      {"hidden size off the packed tile", config("odd.json", 1000, 256), "'w13.k' = 1000"},
      {"intermediate size past the packed extent", config("wide.json", 256, 1u << 20), "intermediate size"},
      {"largest intermediate size a config may give", config("huge.json", 256, 1u << 30), "1073741824"},
  };
  // 16 experts of hidden 65536 and intermediate 32768: 96 GiB of codes alone.
  const double need = 3.0 * 16 * 65536 * 32768;
  const double physical = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (physical < need) cases.push_back({"weights larger than memory", config("big.json", 65536, 32768), "GiB of host memory"});
  else MESSAGE("the larger-than-memory case is skipped: this machine has ", physical / (1ull << 30), " GiB");
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const Json e = json_error(moejit_run(dir, {"--json", "demo", "--model", c.path, "--backend", "host"}));
    CAPTURE(e["message"].get<std::string>());
    CHECK(e["code"] == "invalid_argument");
    CHECK(contains(e, "--model"));
    CHECK(contains(e, c.in_message));
    check_text_error(moejit_run(dir, {"demo", "--model", c.path, "--backend", "host"}), c.in_message);
  }
}
