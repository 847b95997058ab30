// All-gather: rank r contributes chunk r; every rank ends with all chunks in rank order.
// Bytes = the whole (gathered) array; busbw factor (n-1)/n.
#include "profiler/collectives/pattern.cuh"

namespace hetplan::profiler::coll {
namespace {

void counts(size_t count, int nranks, size_t* send, size_t* recv) {
  *send = count / nranks;
  *recv = *send * nranks;
}

struct Expected {
  size_t chunk;
  __device__ float operator()(size_t i) const {
    return pattern_value(static_cast<int>(i / chunk), i % chunk);
  }
};

void check(const RankBuffers& b, unsigned long long* errors, cudaStream_t stream) {
  check_buffer(b.recv, b.recv_count, b.dtype, Expected{b.send_count}, 0.f, errors, stream);
}

ncclResult_t run(const RankBuffers& b, ncclDataType_t type, ncclComm_t comm, cudaStream_t s) {
  return ncclAllGather(b.send, b.recv, b.send_count, type, comm, s);
}

}  // namespace

extern const CollectiveOps kAllGatherOps = {counts, init_send, check, run};

}  // namespace hetplan::profiler::coll
