// GPU types, node types and clusters. GPU and node presets are data (presets/gpus, presets/nodes)
// with datasheet figures and their citations; clusters come from presets, files, or a list such as
// "p3.8xlarge:3,g4dn.12xlarge:1".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "costmodel/document.h"
#include "costmodel/dtype.h"
#include "costmodel/network.h"

namespace hetplan {

struct GpuSpec {
  std::string name;  // preset key, e.g. "a100-40gb"
  std::string description;
  std::map<Dtype, double> peak_tflops;  // dense tensor-core (or FP32 unit) peak per dtype
  double memory_bytes = 0;              // device memory
  double memory_GBps = 0;               // device memory bandwidth
  int64_t sm_count = 0;
  double l2_bytes = 0;
  // Who makes it: "nvidia" (the default) or "amd". hetplan's calibration kernels are CUDA, so
  // another vendor's GPU has datasheet priors only (calibration_data/datasheet).
  std::string vendor = "nvidia";
  // CUDA compute capability (9.0 for Hopper, 10.0 for B200); 0 where not given (another vendor's
  // GPU, a cluster file's own type that does not say). Frameworks pick kernels by it
  // (FrameworkSpec::attention_kernels).
  double compute_capability = 0;
  // The host's time to issue one kernel against an x86 server host's (the Xeon of a DGX H100),
  // where the GPU only comes with one kind of host: a Grace-Hopper or Grace-Blackwell superchip's
  // Arm CPU dispatches PyTorch ops more slowly. It scales a framework's per-kernel host cost (not
  // a calibration's measured one, taken on that host). 1: an x86 host.
  double host_cost_factor = 1;
  std::map<std::string, std::string> citations;

  // Whether hetplan's CUDA calibration kernels can run on it.
  bool calibratable() const { return vendor == "nvidia"; }
  // Peak for `dtype`; 0 when the GPU has no unit for it (bf16 on T4 and V100).
  double peak_flops(Dtype dtype) const;
  bool supports(Dtype dtype) const { return peak_flops(dtype) > 0; }
};

enum class Fabric { kPcie, kNvlink, kNvswitch };
std::string_view to_string(Fabric f);

struct NodeSpec {
  std::string name;  // preset key, e.g. "p4d.24xlarge"
  std::string description;
  GpuSpec gpu;
  int64_t gpus = 0;
  Fabric fabric = Fabric::kPcie;
  double intra_GBps = 0;  // per GPU and direction, to its peers inside the node
  double intra_latency_s = 0;
  double network_gbit = 0;  // the node's network bandwidth (all NICs)
  double network_latency_s = 0;
  double host_link_GBps = 0;  // per GPU, host <-> device
  double price_per_hour = 0;  // on-demand, for provisioning
  std::map<std::string, std::string> citations;
};

// `count` nodes of one kind, in one zone.
struct NodeGroup {
  NodeSpec node;
  int64_t count = 0;
  std::string zone;  // a zone of the cluster's network.zones; "" when the cluster names none
};

// Bandwidth and latency between two node kinds (per node pair), where it differs from the default
// (the slower of the two nodes' network speeds).
struct NetworkLink {
  std::string a, b;
  double gbit = 0;
  double latency_s = 0;
};

struct ClusterSpec {
  std::string name;
  std::string origin;
  std::vector<NodeGroup> groups;
  std::vector<NetworkLink> links;
  std::vector<std::string> calibration;      // calibration files the cluster points to
  std::map<std::string, GpuSpec> gpu_types;  // the GPU types the cluster file defines
  std::optional<CloudNetwork> cloud;         // the zone and region links, when nodes name zones
  std::map<std::string, std::string> zone_region;  // zone -> its region

  int64_t num_gpus() const;
  int64_t num_nodes() const;
  // Network between one node of kind `a` and one of kind `b`: bandwidth (GB/s) and latency.
  double network_GBps(const std::string& a, const std::string& b) const;
  double network_latency_s(const std::string& a, const std::string& b) const;
  // The zone or region link between a node of group `a` and one of group `b` (indices into
  // groups); nullptr when they are in one zone.
  const ZoneLink* zone_link(size_t a, size_t b) const;
  // Network between a node of group `a` and one of group `b`: the node kinds' figures above,
  // over a zone link its share of the bandwidth and the larger of the two latencies.
  double group_network_GBps(size_t a, size_t b) const;
  double group_network_latency_s(size_t a, size_t b) const;
  bool is_homogeneous() const { return groups.size() == 1; }
};

// Bounds past any machine built, so that a typo (a count of 2^31) is an error, not hours of work:
// a node (a GB200 NVL72 rack is 72) and a whole cluster (about a million GPUs).
inline constexpr int64_t kMaxGpusPerNode = 1024;
inline constexpr int64_t kMaxClusterGpus = int64_t{1} << 20;

// Loaders. Names are presets; paths are files; "a:n,b:m" lists node presets with counts.
GpuSpec load_gpu(const std::string& name_or_path);
NodeSpec load_node(const std::string& name_or_path);
ClusterSpec load_cluster(const std::string& spec);
GpuSpec parse_gpu(ObjectReader r, const std::string& name);
NodeSpec parse_node(ObjectReader r, const std::string& name,
                    const std::map<std::string, GpuSpec>& extra_gpus = {});
ClusterSpec parse_cluster(const Document& doc);
// Checks a cluster; throws InputError naming its origin.
void validate_cluster(const ClusterSpec& cluster);

struct HardwarePresetInfo {
  std::string kind;  // "gpu", "node", "cluster", "network"
  std::string name;
  std::string description;
};
std::vector<HardwarePresetInfo> hardware_presets();
// Whether `name` is a GPU preset (presets/gpus), i.e. hetplan knows its datasheet.
bool is_gpu_preset(const std::string& name);
// The preset names of `kind` ("gpus", "nodes", "clusters"), comma separated, for messages.
std::string hardware_preset_names(std::string_view kind);
// The datasheet of GPU type `name`: one of `defined` (a cluster file's gpu_types), else a preset;
// nullopt when neither has it.
std::optional<GpuSpec> find_gpu_spec(const std::string& name,
                                     const std::map<std::string, GpuSpec>& defined);

}  // namespace hetplan
