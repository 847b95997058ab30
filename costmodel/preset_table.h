// Preset files embedded at build time from presets/<kind>/<name>.yaml (cmake/Presets.cmake).
#pragma once

#include <string_view>
#include <vector>

namespace hetplan {

struct EmbeddedPreset {
  std::string_view kind;  // the folder: "models", "gpus", "nodes", "clusters"
  std::string_view name;  // file name without extension
  std::string_view path;  // "presets/models/gpt2-medium.yaml", for error messages
  std::string_view text;
};

// All embedded presets, sorted by path.
const std::vector<EmbeddedPreset>& embedded_presets();

}  // namespace hetplan
