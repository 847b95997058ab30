// The collectives hetplan measures and models, by name as calibration files write them, with
// nccl-tests' bus-bandwidth factor of each.
#pragma once

#include <cstdint>
#include <string_view>

namespace hetplan {

enum class CollectiveKind {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kSendRecv
};

std::string_view to_string(CollectiveKind kind);
bool parse_collective(std::string_view text, CollectiveKind& out);
// nccl-tests bus-bandwidth factor: busbw = algbw * factor for a group of n ranks.
double bus_bandwidth_factor(CollectiveKind kind, int64_t n);

}  // namespace hetplan
