// What links a process's GPUs: NVLink where peer access has native atomics (PCIe peer access has
// none), PCIe otherwise. Names match the calibration format's `link` values.
#pragma once

#include <string>
#include <vector>

namespace hetplan::profiler::coll {

// "self", "nvlink" or "pcie" for two CUDA devices of this process.
std::string pair_link(int a, int b);
// One name for a node's GPUs: "self" (one GPU), "nvswitch" (8 or more GPUs, every pair NVLink:
// only a switch connects that many), "nvlink", "pcie", or "mixed" (some pairs each).
std::string node_link(const std::vector<int>& devices);

}  // namespace hetplan::profiler::coll
