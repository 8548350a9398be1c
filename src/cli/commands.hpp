#pragma once
// The subcommands of `moejit`. Each registers itself on the CLI11 app and runs when chosen.

#include <CLI/CLI.hpp>

#include <functional>

#include "cli/cli_common.hpp"

namespace moejit::cli {

// A registered subcommand, run if CLI11 parsed it.
struct Command {
  CLI::App* app;
  std::function<int()> run;
};

Command add_compile_command(CLI::App& app, const GlobalOptions& g);
Command add_cache_command(CLI::App& app, const GlobalOptions& g);
Command add_warmup_command(CLI::App& app, const GlobalOptions& g);
Command add_demo_command(CLI::App& app, const GlobalOptions& g);

// `moejit --version` output.
int print_version(const GlobalOptions& g);

}  // namespace moejit::cli
