// The serving problem (cluster, model, per-layer times, workload) and the capacity of each machine
// in tokens/s as a function of how many layers it holds. Formulas in docs/serving.md.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "serve/helix_capacity.h"
#include "serve/layer_time.h"
#include "serve/placement.h"
#include "serve/serving_cluster.h"
#include "serve/serving_model.h"

namespace hetplan::serve {

// The request mix the capacities are computed for. Defaults: Helix's workload (Azure
// conversation trace as used in the Helix paper): 750 prompt and 240 output tokens on average.
struct ServingWorkload {
  double avg_prompt_tokens = 750;
  double avg_output_tokens = 240;
};

// How a machine's tokens/s follow from the layers it holds (docs/serving.md).
enum class CapacityModel {
  kHetplan,  // the decode batch from the machine's share k / L of the model's layers
  kHelix,    // Helix's: the share from the relative speeds of the cluster's machine types
};

// "hetplan", "helix".
const char* capacity_model_name(CapacityModel model);

// Memory and batching assumptions of the capacity model.
struct CapacityParams {
  CapacityModel model = CapacityModel::kHelix;  // the default: docs/serving.md says why
  // Helix's tables for the model (helix_capacity.yaml); without them, or for a machine type they
  // do not list, Helix's model takes hetplan's layer limit and KV cache (docs/serving.md).
  std::shared_ptr<const HelixCapacityTables> helix_tables;
  // Share of a machine's KV cache its scheduler fills on average (Helix's KV_CACHE_HWM = 0.3).
  double kv_high_water = 0.3;
  // Share of VRAM for weights and KV cache together: vLLM's default 0.9 utilisation less about 0.1
  // of workspace; within -17% to +29% of the KV block counts Helix measured with vLLM
  // (docs/serving.md).
  double usable_fraction = 0.8;
  // Share of VRAM that weights must leave free for KV cache and workspace. 0.48 reproduces Helix's
  // hand-set layer limits for LLaMA-2 70B (T4 4, V100 4, L4 7, A100 12, L4x2 14, T4x2 9).
  double kv_reserve_fraction = 0.48;
};

// Capacity of one machine by the number of layers k it holds (index k; k = 0 unused).
struct MachineCapacity {
  int max_layers = 0;         // most layers it may hold: weights fit, KV cache holds a request
  int weight_max_layers = 0;  // most layers whose weights fit (the VRAM rule alone)
  std::vector<double> tokens_per_s;         // compute capacity, tokens (prompt + output) per second
  std::vector<double> decode_batch;         // typical decode batch (requests per step)
  std::vector<double> kv_tokens_per_layer;  // KV cache capacity, tokens per layer held
};

// Everything the planner evaluates placements against.
struct ServingProblem {
  ServingCluster cluster;
  ServingModel model;
  ServingWorkload workload;
  CapacityParams params;
  // Helix's rule for partial inference: machine i may feed j when start_j <= end_i < end_j (j runs
  // the layers from end_i on). false: only when start_j == end_i.
  bool partial_inference = true;
  std::vector<std::shared_ptr<const LayerTimeModel>> times;  // per machine
  std::vector<MachineCapacity> capacity;                     // per machine

  int num_layers() const { return model.num_layers; }
  int machines() const { return cluster.size(); }
};

// KV cache of a machine holding k layers, in tokens per layer held: C(k) in docs/serving.md.
double kv_tokens_per_layer(const Machine& machine, const ServingModel& model,
                           const CapacityParams& params, int k);

// Capacity of one machine (see docs/serving.md for the formulas).
MachineCapacity machine_capacity(const Machine& machine, const ServingModel& model,
                                 const LayerTimeModel& times, const ServingWorkload& workload,
                                 const CapacityParams& params);

// Builds the problem: looks up every machine type in `times` and computes the capacities.
ServingProblem make_problem(ServingCluster cluster, ServingModel model,
                            const LayerTimeSource& times, ServingWorkload workload = {},
                            CapacityParams params = {});

// Why `placement` is not valid for `problem` (ranges outside the model, more layers than VRAM
// allows or than leave KV cache for one request, layers no machine holds), one line per problem;
// empty when valid.
std::vector<std::string> placement_errors(const ServingProblem& problem,
                                          const Placement& placement);

// Helix's flow upper bound: sum over machines of max_k k * capacity(k), divided by the layers.
double flow_upper_bound(const ServingProblem& problem);

}  // namespace hetplan::serve
