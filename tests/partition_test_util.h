// Layer-partition problems for the partition tests.
#pragma once

#include <vector>

#include "search/partition.h"

namespace hetplan::testing {

// `stages` stages that all run a layer alike: per layer its time and static bytes; no
// activations or transient bytes, one micro-batch in flight, 1e9 bytes of memory per stage.
inline PartitionInput same_on_every_stage(const std::vector<double>& time_s,
                                          const std::vector<double>& static_bytes, int stages) {
  PartitionInput in;
  const size_t L = time_s.size();
  for (int s = 0; s < stages; ++s) {
    in.time_s.push_back(time_s);
    in.static_bytes.push_back(static_bytes);
    in.activation_bytes.push_back(std::vector<double>(L, 0));
    in.transient_bytes.push_back(std::vector<double>(L, 0));
    in.in_flight.push_back(1);
    in.limit_bytes.push_back(1e9);
  }
  return in;
}

}  // namespace hetplan::testing
