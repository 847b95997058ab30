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
  // The model and cluster files the prediction was made from (context "model_source" and
  // "cluster_source", absolute paths; "" for presets and older files) and its sequence length
  // (context "seq_len", 0 when not recorded).
  std::string model_source, cluster_source;
  int64_t seq_len = 0;
  Strategy strategy;  // stage layer ranges, devices and GPU types filled in from the prediction
  std::optional<Prediction> predicted;
  std::string origin;  // "file" or "file: strategies[3]"
};

// The prediction object of to_json(Prediction). These files are hetplan's own output, so keys
// that newer versions add are ignored; the keys read are checked.
Prediction prediction_from_json(ObjectReader r);

// Every strategy in a predictions file, in file order (search: best first).
std::vector<PredictedStrategy> load_predicted_strategies(const std::string& path);

// Records in a predict or search output's context what export needs to rebuild the model and
// cluster: "model_source" and "cluster_source" (absolute paths, only for files, not presets) and
// "seq_len". `model_arg` and `cluster_arg` are the --model and --cluster values.
void add_input_sources(Json& context, const std::string& model_arg, const std::string& cluster_arg,
                       int64_t seq_len);

}  // namespace hetplan
