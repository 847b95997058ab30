// The machines and network a model is served on: each machine serves as one pipeline node (all
// its GPUs together, as Helix's "T4x2" machines do), and directed links join machines to each other
// and to the clients (the source that sends prompts and the sink that receives tokens).
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/document.h"

namespace hetplan::serve {

// One machine: a node of the serving pipeline.
struct Machine {
  std::string name;          // unique within the cluster
  std::string machine_type;  // selects the per-layer time profile ("A100", "T4x2")
  std::string gpu_type;      // "A100", "T4"
  int gpus = 1;
  double vram_bytes = 0;   // all GPUs of the machine together
  double nic_in_GBps = 0;  // 1e9 bytes/s; <= 0: unlimited
  double nic_out_GBps = 0;
};

// A directed network link.
struct Link {
  double bandwidth_GBps = 0;  // 1e9 bytes/s
  double latency_s = 0;
};

// Tokens/s a NIC or link of `GBps` (1e9 bytes/s) carries at `bytes` per token; <= 0 means
// unlimited (infinity).
inline double per_token(double GBps, double bytes) {
  return GBps > 0 ? GBps * 1e9 / bytes : std::numeric_limits<double>::infinity();
}

// The most machines a serving cluster may have. The flow graph of a fully linked cluster has an
// edge per pair of machines: 4.2 million at 2048 machines, about 0.3 GB and 0.2 s per max-flow
// evaluation on one core, and the search makes thousands; Helix's clusters have 24 and 42.
inline constexpr int kMaxServingMachines = 2048;

// Endpoints of links besides machine indices.
inline constexpr int kSource = -1;
inline constexpr int kSink = -2;

class ServingCluster {
 public:
  ServingCluster() = default;
  // Throws InputError naming `origin` for more than kMaxServingMachines machines.
  ServingCluster(std::string origin, std::vector<Machine> machines);

  const std::string& origin() const { return origin_; }
  const std::vector<Machine>& machines() const { return machines_; }
  int size() const { return static_cast<int>(machines_.size()); }
  // Index of the machine called `name`, or -1.
  int find(const std::string& name) const;

  // Sets the link from -> to (machine indices, kSource or kSink).
  void set_link(int from, int to, Link link);
  // The link from -> to, if there is one.
  std::optional<Link> link(int from, int to) const;
  // Client (coordinator) NIC limits in GBps; <= 0: unlimited.
  double source_nic_GBps = 0;
  double sink_nic_GBps = 0;

 private:
  int slot(int endpoint) const;

  std::string origin_;
  std::vector<Machine> machines_;
  // (n + 2) x (n + 2) matrix of indices into distinct_ (0: no link; slots 0..n-1 machines, n
  // source, n + 1 sink): 4 bytes per pair, as clusters repeat a few kinds of link.
  std::vector<uint32_t> links_;
  std::vector<Link> distinct_;
  std::map<std::pair<double, double>, uint32_t> index_of_;  // (bandwidth, latency) -> index
};

// Reads a serving cluster: a Helix INI file (cluster*.ini or pruned_cluster.ini with
// machine_profiles.ini next to it, or a simulator_cluster.ini), a hetplan serving cluster file
// or a training cluster file, converted (YAML or JSON, see docs/serving.md).
ServingCluster load_serving_cluster(const std::filesystem::path& path);

// "N machines: hetplan serve takes at most kMaxServingMachines (why)".
std::string too_many_machines(int64_t machines);

// Reads hetplan's own serving cluster file (YAML or JSON).
ServingCluster read_cluster_file(const std::filesystem::path& path);
ServingCluster read_cluster_document(const Document& doc);

}  // namespace hetplan::serve
