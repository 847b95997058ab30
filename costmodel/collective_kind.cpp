#include "costmodel/collective_kind.h"

namespace hetplan {

std::string_view to_string(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return "all_reduce";
    case CollectiveKind::kAllGather:
      return "all_gather";
    case CollectiveKind::kReduceScatter:
      return "reduce_scatter";
    case CollectiveKind::kAllToAll:
      return "all_to_all";
    case CollectiveKind::kBroadcast:
      return "broadcast";
    case CollectiveKind::kSendRecv:
      return "send_recv";
  }
  return "?";
}

bool parse_collective(std::string_view text, CollectiveKind& out) {
  for (CollectiveKind k :
       {CollectiveKind::kAllReduce, CollectiveKind::kAllGather, CollectiveKind::kReduceScatter,
        CollectiveKind::kAllToAll, CollectiveKind::kBroadcast, CollectiveKind::kSendRecv}) {
    if (text == to_string(k)) {
      out = k;
      return true;
    }
  }
  return false;
}

double bus_bandwidth_factor(CollectiveKind kind, int64_t n) {
  // nccl-tests, doc/PERFORMANCE.md: all-reduce 2(n-1)/n; all-gather, reduce-scatter and
  // all-to-all (n-1)/n; broadcast, reduce and send/recv 1.
  if (n <= 1)
    return kind == CollectiveKind::kBroadcast || kind == CollectiveKind::kSendRecv ? 1 : 0;
  const double nd = static_cast<double>(n);
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return 2.0 * (nd - 1) / nd;
    case CollectiveKind::kAllGather:
    case CollectiveKind::kReduceScatter:
    case CollectiveKind::kAllToAll:
      return (nd - 1) / nd;
    case CollectiveKind::kBroadcast:
    case CollectiveKind::kSendRecv:
      return 1.0;
  }
  return 1.0;
}

}  // namespace hetplan
