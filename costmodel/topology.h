// The devices of a cluster in a fixed order (node groups as listed, nodes, then local GPUs) and the
// shape of a communicator over some of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/hardware.h"

namespace hetplan {

struct Device {
  int64_t index = 0;  // global, in cluster order
  int64_t node = 0;   // global node index
  int64_t group = 0;  // index into ClusterSpec::groups (the node kind)
  int64_t local = 0;  // GPU index inside its node
};

// Every device of the cluster, in cluster order.
std::vector<Device> cluster_devices(const ClusterSpec& cluster);

// What a collective over some devices runs on.
struct CommGroup {
  int64_t size = 1;                   // ranks
  int64_t nodes = 1;                  // distinct nodes
  int64_t per_node = 1;               // ranks per node (the largest count on one node)
  Fabric fabric = Fabric::kNvswitch;  // slowest fabric inside the nodes
  double intra_GBps = 0;              // slowest per-GPU fabric bandwidth
  double intra_latency_s = 0;
  double inter_GBps = 0;  // slowest node-to-node network among the group's nodes (whole NIC)
  double inter_latency_s = 0;
  int64_t sharing = 1;       // groups that use each node's network at the same time
  std::string link() const;  // "nvswitch", "nvlink", "pcie" inside a node, "net" across nodes
};

// Describes a communicator over `devices` (global indices). `sharing`: how many such groups use a
// node's network concurrently (8 data-parallel groups of one GPU per node share its NIC 8 ways).
CommGroup make_comm_group(const ClusterSpec& cluster, const std::vector<Device>& all,
                          const std::vector<int64_t>& devices, int64_t sharing = 1);

// A group of `ranks` consecutive ranks of `g` (a2a+p2p's all-to-all groups inside the context
// group): on one of its nodes where they fit there, else across as few nodes as hold them.
CommGroup inner_group(const CommGroup& g, int64_t ranks);

// A point-to-point path between two devices.
struct Link {
  double GBps = 0;
  double latency_s = 0;
  bool same_node = true;
};
Link link_between(const ClusterSpec& cluster, const Device& a, const Device& b);

}  // namespace hetplan
