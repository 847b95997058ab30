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

// The preset `name` of `kind` (a folder name), or nullptr.
inline const EmbeddedPreset* find_preset(std::string_view kind, std::string_view name) {
  for (const auto& p : embedded_presets())
    if (p.kind == kind && p.name == name) return &p;
  return nullptr;
}

// Whether a value that may name a preset or a file names a file by its form: a path, or a .yaml,
// .yml or .json name.
inline bool looks_like_file_path(std::string_view s) {
  return s.find('/') != std::string_view::npos || s.ends_with(".yaml") || s.ends_with(".yml") ||
         s.ends_with(".json");
}

}  // namespace hetplan
