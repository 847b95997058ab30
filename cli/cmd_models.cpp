// hetplan models: the model presets.
#include <fmt/format.h>

#include "cli/command.h"
#include "costmodel/model.h"

namespace hetplan::cli {

CommandRunner declare_models(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "Print JSON instead of a table");
  return [json]() {
    Json out = Json::array();
    if (!*json)
      fmt::print("{:<15} {:>9} {:>6} {:>6} {:>6} {:>6}  {}\n", "name", "params", "layers", "hidden",
                 "heads", "seq", "description");
    for (const auto& info : model_presets()) {
      const ModelSpec m = load_model(info.name);
      const LayerSpec& block = m.layers[1];
      if (*json) {
        out.push_back({{"name", m.name},
                       {"parameters", m.parameters()},
                       {"blocks", m.num_blocks()},
                       {"seq_len", m.seq_len},
                       {"hidden", block.hidden},
                       {"heads", block.block() ? block.block()->heads : 0},
                       {"description", m.description},
                       {"source", m.source}});
        continue;
      }
      fmt::print("{:<15} {:>8.2f}B {:>6} {:>6} {:>6} {:>6}  {}\n", m.name, m.parameters() / 1e9,
                 m.num_blocks(), block.hidden, block.block() ? block.block()->heads : 0, m.seq_len,
                 m.description);
    }
    if (*json) fmt::print("{}\n", out.dump(2));
    return 0;
  };
}

}  // namespace hetplan::cli
