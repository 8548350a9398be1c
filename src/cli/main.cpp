// moejit: the command-line entry point. Every command takes --json and then prints exactly one
// JSON object on stdout (a contract that tools script against; see README), errors included:
// a bad command line, a failed command and an unexpected exception all end in fail() and exit 1.

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"

namespace {

using namespace moejit;
using namespace moejit::cli;

// Whether --json is on the command line. Read from argv, not from the parsed flag: a parse error
// can stop CLI11 before it has stored the flag, and that error must be JSON too. The last
// occurrence wins, as it does for CLI11; "--" ends the options.
bool json_requested(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--json") json = true;
    else if (a.starts_with("--json=")) {
      std::string_view v = a.substr(7);
      json = !(v == "false" || v == "0" || v == "off" || v == "no");
    }
  }
  return json;
}

std::string command_names(const std::vector<Command>& commands) {
  std::string names;
  for (const auto& c : commands) names += (names.empty() ? "" : ", ") + c.app->get_name();
  return names;
}

int run(int argc, char** argv, GlobalOptions& g) {
  CLI::App app{"moejit: runtime-specialized MoE grouped-GEMM kernels"};
  app.fallthrough();  // global flags may follow the subcommand
  app.require_subcommand(0, 1);
  bool version = false;
  app.add_flag("--version", version, "Print the version of moejit and of the compiler it uses");
  app.add_flag("--json", g.json, "Print one JSON object instead of text");
  app.add_option("--cache-dir", g.cache_dir, "Writable store root (overrides MOEJIT_CACHE_DIR)");

  std::vector<Command> commands = {add_compile_command(app, g), add_cache_command(app, g),
                                   add_warmup_command(app, g), add_demo_command(app, g)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help (and CLI11's other requests with exit code 0) print what was asked for.
    if (e.get_exit_code() == 0) return app.exit(e);
    // A usage error is an error like any other: exit 1, and with --json the error object. Its
    // text from CLI11 names the option and what it expected.
    if (g.json) return fail(g, error(Code::invalid_argument, "command line: {} (moejit --help lists the options)", e.what()));
    app.exit(e);
    return 1;
  }
  if (version) return print_version(g);
  for (auto& c : commands)
    if (c.app->parsed()) return c.run();
  const Status no_command =
      error(Code::invalid_argument, "expected a command: one of {} (moejit --help describes them)", command_names(commands));
  if (!g.json) std::fprintf(stderr, "%s\n", app.help().c_str());
  return fail(g, no_command);
}

}  // namespace

int main(int argc, char** argv) {
  GlobalOptions g;
  g.json = json_requested(argc, argv);
  try {
    return run(argc, argv, g);
  } catch (const std::exception& e) {
    // Nothing should escape a command, but if something does, the caller still gets the normal
    // error output (and with --json a JSON object), never an abort.
    return fail(g, error(Code::internal, "unexpected exception: {}", e.what()));
  } catch (...) {
    return fail(g, error(Code::internal, "unexpected exception"));
  }
}
