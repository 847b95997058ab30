// Predicts one strategy's iteration time, throughput, MFU and memory per device on a cluster.
// Used by `hetplan predict` and by the search for every candidate.
#pragma once

#include <string>
#include <vector>

#include "costmodel/cost_model.h"
#include "costmodel/model.h"
#include "costmodel/topology.h"
#include "search/strategy.h"

namespace hetplan {

class Evaluator {
 public:
  Evaluator(const ModelSpec& model, const ClusterSpec& cluster, const CostModel& cost);

  // Never throws for an infeasible strategy: returns feasible = false with the reason.
  // Throws InputError for a strategy that is malformed (unknown schedule, devices out of range).
  Prediction predict(const Strategy& strategy) const;

  // Checks a strategy's fields against the model and cluster; "" when fine, else the reason.
  // Sets `code` to a short key ("batch", "devices", "tp", "pp", "zero", "placement").
  std::string structural_problem(const Strategy& s, std::string& code) const;

  const ModelSpec& model() const { return model_; }
  const ClusterSpec& cluster() const { return cluster_; }
  const std::vector<Device>& devices() const { return devices_; }

 private:
  // Fills in stages (devices and layer ranges) where the strategy leaves them out; returns the
  // problem when it cannot.
  std::string place(Strategy& s) const;
  const GpuSpec& gpu_of(const StageSpec& st) const;

  const ModelSpec& model_;
  const ClusterSpec& cluster_;
  const CostModel& cost_;
  std::vector<Device> devices_;
};

}  // namespace hetplan
