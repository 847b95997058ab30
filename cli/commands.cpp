#include "cli/command.h"

namespace hetplan::cli {

// One declaration and one table line per command (cli/cmd_<name>.cpp).
CommandRunner declare_merge(CLI::App& app);
CommandRunner declare_calibrate_collectives(CLI::App& app);
CommandRunner declare_fit_collectives(CLI::App& app);

const std::vector<CommandSpec>& all_commands() {
  static const std::vector<CommandSpec> kCommands = {
      {"merge", "merge calibration files (ranks, runs, node kinds, networks) into one",
       declare_merge},
      {"calibrate-collectives",
       "measure NCCL collectives, the p2p matrix and host-device copies (one node, or several "
       "processes under mpirun/srun)",
       declare_calibrate_collectives},
      {"fit-collectives",
       "fit latency and bandwidth (two regimes) per collective, group and link from calibrations",
       declare_fit_collectives},
  };
  return kCommands;
}

}  // namespace hetplan::cli
