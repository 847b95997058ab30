// All-reduce (sum): every rank ends with the element-wise sum of all ranks' arrays.
// nccl-tests all_reduce.cu conventions: bytes = the whole array, busbw factor 2(n-1)/n.
#include "profiler/collectives/pattern.cuh"

namespace hetplan::profiler::coll {
namespace {

void counts(size_t count, int, size_t* send, size_t* recv) { *send = *recv = count; }

struct Expected {
  int nranks;
  __device__ float operator()(size_t i) const {
    float sum = 0;
    for (int r = 0; r < nranks; ++r) sum += pattern_value(r, i);
    return sum;
  }
};

void check(const RankBuffers& b, unsigned long long* errors, cudaStream_t stream) {
  check_buffer(b.recv, b.recv_count, b.dtype, Expected{b.nranks},
               check_tolerance(b.dtype, b.nranks), errors, stream);
}

ncclResult_t run(const RankBuffers& b, ncclDataType_t type, ncclComm_t comm, cudaStream_t s) {
  return ncclAllReduce(b.send, b.recv, b.send_count, type, ncclSum, comm, s);
}

}  // namespace

extern const CollectiveOps kAllReduceOps = {counts, init_send, check, run};

}  // namespace hetplan::profiler::coll
