// The collectives the sweep knows: one line each (the tables are in <collective>.cu).
#include <fmt/format.h>

#include "costmodel/errors.h"
#include "profiler/collectives/registry.h"

namespace hetplan::profiler::coll {

extern const CollectiveOps kAllReduceOps, kAllGatherOps, kReduceScatterOps, kAllToAllOps,
    kBroadcastOps, kSendRecvOps;

const CollectiveOps& collective_ops(CollectiveKind kind) {
  static const std::pair<CollectiveKind, const CollectiveOps*> kTable[] = {
      {CollectiveKind::kAllReduce, &kAllReduceOps},
      {CollectiveKind::kAllGather, &kAllGatherOps},
      {CollectiveKind::kReduceScatter, &kReduceScatterOps},
      {CollectiveKind::kAllToAll, &kAllToAllOps},
      {CollectiveKind::kBroadcast, &kBroadcastOps},
      {CollectiveKind::kSendRecv, &kSendRecvOps},
  };
  for (const auto& [k, ops] : kTable)
    if (k == kind) return *ops;
  throw RuntimeFailure(fmt::format("no collective table for {}", to_string(kind)));
}

ncclDataType_t nccl_type(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFp32:
      return ncclFloat32;
    case Dtype::kBf16:
      return ncclBfloat16;
    case Dtype::kFp16:
      return ncclFloat16;
    default:
      throw InputError(
          fmt::format("collectives are measured in fp32, bf16 or fp16, not {}", to_string(dtype)));
  }
}

size_t element_bytes(Dtype dtype) { return dtype == Dtype::kFp32 ? 4 : 2; }

}  // namespace hetplan::profiler::coll
