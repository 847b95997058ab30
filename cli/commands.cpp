#include "cli/command.h"

namespace hetplan::cli {

// One declaration and one table line per command (cli/cmd_<name>.cpp).

const std::vector<CommandSpec>& all_commands() {
  static const std::vector<CommandSpec> kCommands = {
  };
  return kCommands;
}

}  // namespace hetplan::cli
