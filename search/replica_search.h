// The opt-in search over replica groups (`search --mixed-replicas`, issue 38). For every pipeline
// depth and every subset of the cluster's GPU types it builds one pipeline per type (group g of
// every stage on type g, the layer ranges shared and balanced by layer time), chooses each type's
// tensor width and micro-batch from a small set by that type's own predicted speed, splits the
// global batch between the types in proportion to those speeds in whole micro-batches
// (split_samples), and costs the strategy with replicas. Up to depth 4 it also tries chains:
// pipelines whose first stages run on one type and the rest on another, each at its own width
// (Sailor's V100 stage feeding A100s), beside the devices they leave as their types' own
// pipelines.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "search/evaluate.h"
#include "search/search.h"

namespace hetplan {

struct ReplicaSearchOptions {
  int64_t global_batch = 0;
  std::vector<int64_t> pipeline_depths = {1, 2, 4, 8, 16, 32, 64};  // those <= layers
  std::vector<int64_t> tensor_widths = {1, 2, 4, 8};  // those within one node of the type
  std::vector<int64_t> micro_batches = {1, 2, 4, 8};
  // Schedule, recomputation and switches every candidate takes (the framework's defaults).
  Strategy base;
  // Every replica takes the same samples at one micro-batch, as Sailor's framework runs them
  // (its DeepSpeed fork writes one train_micro_batch_size_per_gpu and gradient_accumulation_steps
  // for every replica: report/export/sailor_export.cpp): the types' speeds choose their tensor
  // widths, not their shares. false: shares in proportion to speed, each type its micro-batch.
  bool even_shares = false;
  bool chains = true;  // also pipelines that change GPU type from stage to stage
};

struct ReplicaSearchResult {
  std::optional<RankedStrategy> best;  // the fastest feasible strategy with replicas
  int64_t evaluated = 0;               // predictions made (per-type speeds and mixed plans)
  int64_t feasible = 0;                // mixed plans that fit
  double elapsed_s = 0;
};

ReplicaSearchResult search_replicas(const Evaluator& ev, const ReplicaSearchOptions& options);

// What replica groups run of the search's best uniform plan: its switches on one chunk, plain data
// parallelism (no ZeRO, context or expert parallelism, sequence parallelism or its overlap).
Strategy replica_base(const Strategy& best);

// `search --mixed-replicas`: the best plan with replica groups next to the search's best uniform
// one, as the search document's "mixed_replicas": {"evaluated", "feasible", "elapsed_s",
// "best_uniform_iteration_s", "even_shares", and where one fits "strategy" (with its
// "predicted") and "gain_over_uniform"}; {} when the search found no uniform plan.
Json mixed_replicas_json(const Evaluator& ev, int64_t global_batch, const SearchResult& r,
                         bool even_shares = false);

}  // namespace hetplan
