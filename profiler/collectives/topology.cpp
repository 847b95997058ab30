#include "profiler/collectives/topology.h"

#include <cuda_runtime_api.h>

#include "profiler/collectives/cuda_util.h"

namespace hetplan::profiler::coll {

std::string pair_link(int a, int b) {
  if (a == b) return "self";
  int can = 0, atomics = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
  if (!can) return "pcie";  // staged through host memory
  CUDA_CHECK(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, a, b));
  return atomics ? "nvlink" : "pcie";
}

std::string node_link(const std::vector<int>& devices) {
  if (devices.size() < 2) return "self";
  int nvlink = 0, pcie = 0;
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = i + 1; j < devices.size(); ++j)
      (pair_link(devices[i], devices[j]) == "nvlink" ? nvlink : pcie)++;
  if (pcie == 0) return devices.size() >= 8 ? "nvswitch" : "nvlink";
  return nvlink == 0 ? "pcie" : "mixed";
}

}  // namespace hetplan::profiler::coll
