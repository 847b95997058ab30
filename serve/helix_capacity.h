// Helix's capacity model (Mei et al., ASPLOS 2025; its artifact's model manager): a machine's
// tokens/s with k layers come from the measured batch-time tables at the batch its KV cache and
// its share of a request's round trip allow, with that share weighted by the relative speed of
// every machine type in the cluster. Formulas in docs/serving.md, "Helix's capacity model".
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "serve/layer_time.h"
#include "serve/serving_cluster.h"
#include "serve/serving_model.h"

namespace hetplan::serve {

struct MachineCapacity;
struct ServingWorkload;
struct CapacityParams;

// Helix's hand-set and measured tables for one machine type.
struct HelixTypeTable {
  int max_layers = 0;                 // Helix's layer limit for the type (about half the VRAM)
  std::vector<double> kv_blocks;      // vLLM KV-cache blocks with k layers loaded, index k - 1
  int typical_layers = 0;             // layers such a machine typically holds
  int typical_layers_when_short = 0;  // ... when the cluster holds few copies of the model
  double initial_layer_speed = 0;     // starting estimate of its per-layer speed (relative)
};

// The tables of one model (examples/external/helix/profiles/<model>/helix_capacity.yaml).
struct HelixCapacityTables {
  std::string origin;
  std::string model;                            // preset name the tables are for ("llama2-70b")
  double kv_block_tokens = 16;                  // tokens per vLLM KV block
  double short_below_model_copies = 1.2;        // typical layers x machines below this x L: "short"
  int speed_iterations = 10;                    // fixed-point iterations of the relative speeds
  std::map<std::string, HelixTypeTable> types;  // by machine type, as the cluster names it

  // The table of `machine_type` (matched without regard to case), or nullptr.
  const HelixTypeTable* find(const std::string& machine_type) const;
};

// Reads helix_capacity.yaml; throws InputError naming the file and key for bad input.
HelixCapacityTables read_helix_capacity_tables(const std::filesystem::path& path);

// The file's name inside a Helix profile folder.
inline constexpr const char* kHelixCapacityFile = "helix_capacity.yaml";

// Capacities of every machine of `cluster` under Helix's model. `fallback` gives, per machine,
// hetplan's capacity (its layer limit and KV cache), used for machine types the tables do not
// list (or when there are no tables): see docs/serving.md.
std::vector<MachineCapacity> helix_capacities(
    const ServingCluster& cluster, const ServingModel& model,
    const std::vector<std::shared_ptr<const LayerTimeModel>>& times,
    const ServingWorkload& workload, const CapacityParams& params,
    const std::vector<MachineCapacity>& fallback, const HelixCapacityTables* tables);

}  // namespace hetplan::serve
