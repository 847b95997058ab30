// Reading hetplan's own prediction outputs back: `predict --json` ({"strategy", "predicted"}),
// `search --json` ({"strategies": [...]}, each with "predicted"), or a plain strategy file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "costmodel/document.h"
#include "search/strategy.h"

namespace hetplan {

struct PredictedStrategy {
  std::string model, cluster;  // "" when the file does not say
  Strategy strategy;  // stage layer ranges, devices and GPU types filled in from the prediction
  std::optional<Prediction> predicted;
  std::string origin;  // "file" or "file: strategies[3]"
};

// The prediction object of to_json(Prediction). These files are hetplan's own output, so keys
// that newer versions add are ignored; the keys read are checked.
Prediction prediction_from_json(ObjectReader r);

// Every strategy in a predictions file, in file order (search: best first).
std::vector<PredictedStrategy> load_predicted_strategies(const std::string& path);

}  // namespace hetplan
