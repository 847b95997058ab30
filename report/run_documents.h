// The versioned JSON documents `predict --json` (hetplan-prediction) and `search --json`
// (hetplan-search) write; report/predictions.h reads them back. docs/cli.md has their keys.
#pragma once

#include <cstdint>
#include <string>

#include "costmodel/document.h"
#include "costmodel/framework.h"
#include "costmodel/hardware.h"
#include "costmodel/model.h"
#include "search/search.h"
#include "search/strategy.h"

namespace hetplan {

// What both documents record of a run besides its result.
struct RunDocumentInputs {
  Json context;                        // the run's context block (version, command, date, ...)
  std::string model_arg, cluster_arg;  // --model and --cluster as given (add_input_sources)
  const ModelSpec& model;
  const ClusterSpec& cluster;
  const FrameworkSpec& framework;
};

// {"format": "hetplan-prediction", "context", "model", "cluster", "framework", "strategy",
// "predicted"}.
Json prediction_document(const RunDocumentInputs& in, const Strategy& strategy,
                         const Prediction& predicted);

// {"format": "hetplan-search", "context", "model", "cluster", "global_batch", "framework",
// "strategies", "closest_infeasible", "why_none" (when nothing fits for memory), "stats"}.
Json search_document(const RunDocumentInputs& in, int64_t global_batch, const SearchResult& r);

}  // namespace hetplan
