// What `serve --cluster` accepts besides Helix's INI files and hetplan's serving cluster file:
// everything predict and search accept (cluster presets, "NODE:COUNT,..." lists, training cluster
// files), converted into a ServingCluster with one machine per node.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "costmodel/document.h"
#include "costmodel/hardware.h"
#include "serve/serving_cluster.h"

namespace hetplan::serve {

// One machine per node, named as the serving cluster file names them ("<node kind>-<i>", or the
// kind alone for a single node). machine_type = the node kind's name, gpu_type and gpus = the
// node's, VRAM = gpus x the GPU's memory; NICs (in and out) = the node's network bandwidth. Every
// pair of machines is linked both ways with the training cluster's bandwidth and latency between
// their kinds (ClusterSpec::network_GBps / network_latency_s); the clients (source and sink) reach
// each machine over that machine's own network (its bandwidth and latency); client NICs unlimited.
// Throws InputError naming the cluster's origin for more than kMaxServingMachines nodes.
ServingCluster serving_cluster_from(const ClusterSpec& cluster);

enum class ClusterFileKind { kServing, kTraining };

// Which of hetplan's cluster files a YAML/JSON document is, by its top-level keys: a serving
// cluster has machine_types/machines/links/client_nic_GBps, a training cluster nodes/node_types/
// gpu_types/network/calibration. Throws InputError naming the file for a document with keys of
// both, or of neither.
ClusterFileKind cluster_file_kind(const Document& doc);

// `serve --cluster`, resolved: the serving cluster, and the training cluster it came from (for the
// cost model's node types and the cluster file's calibration) when it came from one.
struct ServeCluster {
  ServingCluster serving;
  std::optional<ClusterSpec> training;
};

// Reads a cluster file for serving: a Helix INI file (.ini), or a serving or training cluster file
// (YAML/JSON, told apart by cluster_file_kind()).
ServeCluster read_serve_cluster_file(const std::filesystem::path& path);

// Reads `spec`: a Helix INI file (.ini), a serving or training cluster file (YAML/JSON), a cluster
// preset or a NODE:COUNT,... list. Throws InputError naming `spec` and what was expected.
ServeCluster load_serve_cluster(const std::string& spec);

}  // namespace hetplan::serve
