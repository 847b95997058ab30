// Helpers for the serving tests: hand-built problems with chosen capacities, and Helix's data.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "costmodel/model.h"
#include "serve/capacity.h"
#include "serve/helix_import.h"
#include "serve/helix_solution.h"

namespace hetplan::serve::testing {

inline const std::filesystem::path kHelix = std::filesystem::path(HETPLAN_EXTERNAL_DATA) / "helix";

// Per-layer times that are linear: prompt a * tokens, decode c + d * batch (seconds).
class LinearTimes : public LayerTimeModel {
 public:
  LinearTimes(double a, double c, double d, double max_batch = 64)
      : a_(a), c_(c), d_(d), max_batch_(max_batch) {}
  double prompt_s(double tokens) const override { return a_ * tokens; }
  double decode_s(double batch) const override { return c_ + d_ * batch; }
  double max_decode_batch() const override { return max_batch_; }

 private:
  double a_, c_, d_, max_batch_;
};

// A model of `layers` layers where one token's activation is 16384 bytes and a token id 2 bytes.
inline ServingModel toy_model(int layers) {
  ServingModel m;
  m.name = "toy";
  m.num_layers = layers;
  m.layer_weight_bytes = 1e9;
  m.kv_bytes_per_token_layer = 1e5;
  m.activation_bytes_per_token = 16384;
  m.token_bytes = 2;
  return m;
}

// `capacities[i]` = machine i's capacity in tokens/s for every layer count 1..max_layers; all
// machines joined to each other and to the clients by links of `link_GBps`; NICs unlimited.
inline ServingProblem toy_problem(int layers, const std::vector<double>& capacities, int max_layers,
                                  double link_GBps = 1e6) {
  std::vector<Machine> machines;
  for (size_t i = 0; i < capacities.size(); ++i) {
    // Appended rather than "m" + to_string(i): g++ 12 at -O3 warns falsely (-Wrestrict) on that.
    std::string name = "m";
    name += std::to_string(i);
    machines.push_back({name, "toy", "toy", 1, 1e12, 0, 0});
  }
  ServingProblem p;
  p.cluster = ServingCluster("toy", machines);
  const int n = static_cast<int>(machines.size());
  for (int i = 0; i < n; ++i) {
    p.cluster.set_link(kSource, i, {link_GBps, 0.001});
    p.cluster.set_link(i, kSink, {link_GBps, 0.001});
    for (int j = 0; j < n; ++j)
      if (i != j) p.cluster.set_link(i, j, {link_GBps, 0.001});
  }
  p.model = toy_model(layers);
  for (int i = 0; i < n; ++i) {
    MachineCapacity cap;
    cap.max_layers = max_layers;
    cap.weight_max_layers = max_layers;
    cap.tokens_per_s.assign(max_layers + 1, capacities[i]);
    cap.tokens_per_s[0] = 0;
    cap.decode_batch.assign(max_layers + 1, 4);
    cap.kv_tokens_per_layer.assign(max_layers + 1, 1e6);
    p.capacity.push_back(cap);
    p.times.push_back(std::make_shared<LinearTimes>(1e-5, 0.01, 0.001));
  }
  return p;
}

inline Placement ranges(std::vector<LayerRange> r) { return Placement{std::move(r)}; }

// LLaMA-2 70B on one of Helix's clusters (path under examples/external/helix) with Helix's
// measured per-layer times, under the capacity model named (Helix's with its tables).
inline ServingProblem helix_problem(const std::string& cluster_file,
                                    CapacityModel model = CapacityModel::kHetplan) {
  const ModelSpec spec = load_model("llama2-70b");
  const ProfileDirectory times(kHelix / "profiles/llama2_70b");
  CapacityParams params;
  params.model = model;
  if (model == CapacityModel::kHelix)
    params.helix_tables = std::make_shared<HelixCapacityTables>(
        read_helix_capacity_tables(kHelix / "profiles/llama2_70b" / kHelixCapacityFile));
  return make_problem(read_helix_cluster(kHelix / cluster_file),
                      serving_model_from(spec, spec.dtype), times, {}, params);
}

}  // namespace hetplan::serve::testing
