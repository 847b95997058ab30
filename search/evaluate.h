// Predicts one strategy's iteration time, throughput, MFU and memory per device on a cluster.
// Used by `hetplan predict` and by the search for every candidate.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "costmodel/cost_model.h"
#include "costmodel/model.h"
#include "costmodel/topology.h"
#include "search/strategy.h"

namespace hetplan {

// One layer on one node kind for one micro-batch, as the pipeline and the memory model need it.
struct LayerCost {
  LayerTimes times;
  double activation = 0;  // kept for backward under the strategy's recomputation
  double transient = 0;   // working bytes while this layer runs
  double params = 0;      // held on one rank
  double output_bytes = 0;
  double kernels = 0;  // launched per micro-batch, recomputation included (costmodel/layer_ops.h)
  double total_s() const { return times.pass_s[0] + times.pass_s[1] + times.pass_s[2]; }
};

struct PredictOptions {
  // Return at once (infeasible "memory", with memory_overflow set) when no layer partition fits,
  // instead of predicting a time-balanced partition that does not fit (the search's fast path).
  bool skip_unfit = false;
};

// What makes a strategy impossible for the model whatever the cluster (tp not dividing the
// heads, more stages than layers, ...): a message, with `code` set to the strategy key at fault
// ("tp", "chunks", "pp", "zero"); empty when none.
std::string strategy_model_problem(const ModelSpec& model, const Strategy& s, std::string& code);

class Evaluator {
 public:
  Evaluator(const ModelSpec& model, const ClusterSpec& cluster, const CostModel& cost);

  // Never throws for an infeasible strategy: returns feasible = false with the reason.
  // Throws InputError for a strategy that is malformed (unknown schedule, devices out of range).
  Prediction predict(const Strategy& strategy, const PredictOptions& options = {}) const;

  // Checks a strategy's fields against the model and cluster; "" when fine, else the reason.
  // Sets `code` to a short key ("batch", "devices", "tp", "pp", "zero", "placement").
  std::string structural_problem(const Strategy& s, std::string& code) const;

  // Every layer's cost on node kind `group` (an index into the cluster's groups) under the
  // strategy's micro-batch, tensor width, recomputation and options; `tp_nodes` is how many nodes
  // a tensor-parallel group spans. Cached: safe to call from several threads.
  const std::vector<LayerCost>& layer_costs(int64_t group, int64_t tp_nodes,
                                            const Strategy& s) const;

  const ModelSpec& model() const { return model_; }
  const CostModel& cost() const { return cost_; }
  const ClusterSpec& cluster() const { return cluster_; }
  const std::vector<Device>& devices() const { return devices_; }

 private:
  // The device group of every pipeline rank and, when the strategy gives them, the layer range of
  // every virtual stage; returns the problem when the placement cannot work.
  std::string place(const Strategy& s, std::vector<std::vector<int64_t>>& groups,
                    std::vector<std::pair<int64_t, int64_t>>& ranges) const;

  const ModelSpec& model_;
  const ClusterSpec& cluster_;
  const CostModel& cost_;
  std::vector<Device> devices_;
  // Layer costs by (group, tp nodes, micro-batch, tp, sequence parallel, recompute, flash, ZeRO-3,
  // gradient-accumulation fusion).
  using CacheKey = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, int, bool, bool, bool>;
  mutable std::mutex cache_mutex_;
  mutable std::map<CacheKey, std::unique_ptr<std::vector<LayerCost>>> cache_;
  std::vector<int64_t> canonical_layer_;  // index of the first layer identical to each layer

  // Per virtual stage: the most micro-batch activations of that stage the schedule holds at once
  // (from its pass order, which the times do not change). Cached by schedule, pp, micro-batches
  // and chunks.
  std::vector<double> stage_peaks(const Strategy& s) const;
  mutable std::map<std::tuple<std::string, int64_t, int64_t, int64_t>, std::vector<double>> peaks_;
};

}  // namespace hetplan
