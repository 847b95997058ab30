// The versioned JSON documents `predict --json` (hetplan-prediction) and `search --json`
// (hetplan-search) write; report/predictions.h reads them back. docs/cli.md has their keys.
#pragma once

#include <cstdint>
#include <string>

#include "costmodel/document.h"
#include "costmodel/framework.h"
#include "costmodel/hardware.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"
#include "search/search.h"
#include "search/strategy.h"

namespace hetplan {

// The context block of a command's JSON output: {"hetplan_version", "hetplan_commit", "command",
// "date" (UTC, ISO 8601), "calibration": [the profile's origins], "gpu_sources": {GPU type: the
// source of its figures}}.
Json run_context(const std::string& command, const Profile& profile);

// What both documents record of a run besides its result.
struct RunDocumentInputs {
  Json context;                        // the run's context block (version, command, date, ...)
  std::string model_arg, cluster_arg;  // --model and --cluster as given (add_input_sources)
  const ModelSpec& model;
  const ClusterSpec& cluster;
  const FrameworkSpec& framework;
};

// {"format": "hetplan-prediction", "context", "model", "cluster", "cluster_gpus", "framework",
// "strategy", "predicted"}.
Json prediction_document(const RunDocumentInputs& in, const Strategy& strategy,
                         const Prediction& predicted);

// {"format": "hetplan-search", "context", "model", "cluster", "cluster_gpus", "global_batch",
// "framework", "strategies", "closest_infeasible", "why_none", "min_static_bytes" and
// "static_limit_bytes" (when nothing fits for memory), "stats"}.
Json search_document(const RunDocumentInputs& in, int64_t global_batch, const SearchResult& r);

}  // namespace hetplan
