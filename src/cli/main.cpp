// moejit: the command-line entry point. Every command takes --json and then prints exactly one
// JSON object on stdout (a contract that tools script against; see README).

#include <vector>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  using namespace moejit::cli;
  CLI::App app{"moejit: runtime-specialized MoE grouped-GEMM kernels"};
  app.fallthrough();  // global flags may follow the subcommand
  app.require_subcommand(0, 1);
  GlobalOptions g;
  bool version = false;
  app.add_flag("--version", version, "Print the version of moejit and of the compiler it uses");
  app.add_flag("--json", g.json, "Print one JSON object instead of text");
  app.add_option("--cache-dir", g.cache_dir, "Writable store root (overrides MOEJIT_CACHE_DIR)");

  std::vector<Command> commands = {add_compile_command(app, g), add_cache_command(app, g),
                                   add_warmup_command(app, g), add_demo_command(app, g)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (version) return print_version(g);
  for (auto& c : commands)
    if (c.app->parsed()) return c.run();
  std::printf("%s", app.help().c_str());
  return 0;
}
