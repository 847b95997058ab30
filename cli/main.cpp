// hetplan: finds the fastest way to train and serve large models on a GPU cluster.
// Exit status: 0 success, 1 failure at run time, 2 bad input (see docs/cli.md).
#include <cstdio>
#include <exception>
#include <memory>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "costmodel/errors.h"
#include "costmodel/version.h"

int main(int argc, char** argv) {
  using hetplan::cli::CommandRunner;
  CLI::App app{
      "hetplan: calibrate a GPU cluster, fit a cost model, and search training and "
      "serving strategies"};
  app.require_subcommand(1);
  app.set_version_flag("--version", hetplan::version_line());
  std::vector<std::pair<CLI::App*, CommandRunner>> commands;
  for (const auto& spec : hetplan::cli::all_commands()) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.help);
    commands.emplace_back(sub, spec.declare(*sub));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  try {
    for (auto& [sub, run] : commands)
      if (sub->parsed()) return run();
    return 2;
  } catch (const hetplan::InputError& e) {
    fmt::print(stderr, "hetplan: error: {}\n", e.what());
    return 2;
  } catch (const hetplan::RuntimeFailure& e) {
    fmt::print(stderr, "hetplan: failed: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "hetplan: internal error: {}\n", e.what());
    return 1;
  }
}
