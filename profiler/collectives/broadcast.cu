// Broadcast from rank 0: every rank ends with rank 0's array. Bytes = the array; busbw factor 1.
#include "profiler/collectives/pattern.cuh"

namespace hetplan::profiler::coll {
namespace {

void counts(size_t count, int, size_t* send, size_t* recv) { *send = *recv = count; }

struct Expected {
  __device__ float operator()(size_t i) const { return pattern_value(0, i); }
};

void check(const RankBuffers& b, unsigned long long* errors, cudaStream_t stream) {
  check_buffer(b.recv, b.recv_count, b.dtype, Expected{}, 0.f, errors, stream);
}

ncclResult_t run(const RankBuffers& b, ncclDataType_t type, ncclComm_t comm, cudaStream_t s) {
  return ncclBroadcast(b.send, b.recv, b.send_count, type, /*root=*/0, comm, s);
}

}  // namespace

extern const CollectiveOps kBroadcastOps = {counts, init_send, check, run};

}  // namespace hetplan::profiler::coll
