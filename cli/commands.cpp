#include "cli/command.h"

namespace hetplan::cli {

// One declaration and one table line per command (cli/cmd_<name>.cpp).
CommandRunner declare_simulate(CLI::App& app);

const std::vector<CommandSpec>& all_commands() {
  static const std::vector<CommandSpec> kCommands = {
      {"simulate", "time one pipeline schedule with the event-driven simulator", declare_simulate},
  };
  return kCommands;
}

}  // namespace hetplan::cli
