#include "cli/command.h"

namespace hetplan::cli {

// One declaration and one table line per command (cli/cmd_<name>.cpp).
CommandRunner declare_calibrate(CLI::App& app);

const std::vector<CommandSpec>& all_commands() {
  static const std::vector<CommandSpec> kCommands = {
      {"calibrate", "Measure this GPU (GEMMs, kernels, layers, collectives) into a calibration file",
       declare_calibrate},
  };
  return kCommands;
}

}  // namespace hetplan::cli
