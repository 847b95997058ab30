// Per-layer prompt and decode times derived from hetplan's cost model: the GEMMs, attention and
// memory-bound kernels of one transformer block at serving shapes, on the calibrated (or
// datasheet-prior) GPU profile. The alternative to Helix's measured bs2time tables when a machine
// type was never profiled.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "costmodel/hardware.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"
#include "serve/layer_time.h"

namespace hetplan::serve {

// Machine types are named as Helix names them: a GPU ("A100", "V100", "L4", "T4", "H100", or a
// hetplan GPU preset) with an optional "xN" suffix for N GPUs of one machine serving each layer
// tensor-parallel ("T4x2").
class CostModelLayerTimes : public LayerTimeSource {
 public:
  // `prompt_tokens`: the average prompt length (attention in a prompt pass grows with it);
  // `context_tokens`: the average context a decode step attends to (KV cache read per request).
  // `nodes`: machine types that are node kinds of a training cluster (serve --cluster with a
  // preset or training cluster file), timed on that node's GPU, all its GPUs and its fabric.
  CostModelLayerTimes(const ModelSpec& model, Profile profile, double prompt_tokens,
                      double context_tokens, std::map<std::string, NodeSpec> nodes = {});
  std::shared_ptr<const LayerTimeModel> for_machine_type(
      const std::string& machine_type) const override;

 private:
  const ModelSpec& model_;
  Profile profile_;
  double prompt_tokens_, context_tokens_;
  std::map<std::string, NodeSpec> nodes_;
  mutable std::map<std::string, std::shared_ptr<const LayerTimeModel>> cache_;
};

// The GPU preset and GPU count of a Helix-style machine type; throws InputError when unknown.
std::pair<std::string, int64_t> gpu_of_machine_type(const std::string& machine_type);

}  // namespace hetplan::serve
