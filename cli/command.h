// The command table of the `hetplan` executable. Each command lives in its own cli/cmd_*.cpp and
// adds itself with one line in cli/commands.cpp; `hetplan --help` comes from the same table.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace hetplan::cli {

// Runs a parsed command; returns the process exit status (0 success). Library errors propagate as
// exceptions and are mapped to exit statuses in main().
using CommandRunner = std::function<int()>;

struct CommandSpec {
  const char* name;
  const char* help;
  // Declares the command's options on `app` and returns the function that runs it.
  CommandRunner (*declare)(CLI::App& app);
};

const std::vector<CommandSpec>& all_commands();

}  // namespace hetplan::cli
