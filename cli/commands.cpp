#include "cli/command.h"

namespace hetplan::cli {

// One declaration and one table line per command (cli/cmd_<name>.cpp).
CommandRunner declare_models(CLI::App& app);
CommandRunner declare_clusters(CLI::App& app);
CommandRunner declare_predict(CLI::App& app);
CommandRunner declare_search(CLI::App& app);
CommandRunner declare_import(CLI::App& app);
CommandRunner declare_export(CLI::App& app);
CommandRunner declare_report(CLI::App& app);

const std::vector<CommandSpec>& all_commands() {
  static const std::vector<CommandSpec> kCommands = {
      {"models", "List the model presets", declare_models},
      {"clusters", "List the GPU, node and cluster presets", declare_clusters},
      {"predict", "Predict one strategy's iteration time, throughput, MFU and memory", declare_predict},
      {"search", "Search ranked training strategies for a model on a cluster", declare_search},
      {"import", "Import training logs (measurements) or other tools' profiles (calibration)",
       declare_import},
      {"export", "Write a strategy as Megatron-LM arguments, a DeepSpeed or a torchtitan config",
       declare_export},
      {"report", "Predicted against measured, as one self-contained HTML file", declare_report},
  };
  return kCommands;
}

}  // namespace hetplan::cli
