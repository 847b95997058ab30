// Reduce-scatter (sum): rank r ends with chunk r of the element-wise sum of all ranks' arrays.
// Bytes = the whole (input) array; busbw factor (n-1)/n.
#include "profiler/collectives/pattern.cuh"

namespace hetplan::profiler::coll {
namespace {

void counts(size_t count, int nranks, size_t* send, size_t* recv) {
  *recv = count / nranks;
  *send = *recv * nranks;
}

struct Expected {
  int nranks;
  size_t offset;  // this rank's chunk in the whole array
  __device__ float operator()(size_t j) const {
    float sum = 0;
    for (int r = 0; r < nranks; ++r) sum += pattern_value(r, offset + j);
    return sum;
  }
};

void check(const RankBuffers& b, unsigned long long* errors, cudaStream_t stream) {
  check_buffer(b.recv, b.recv_count, b.dtype, Expected{b.nranks, b.rank * b.recv_count},
               check_tolerance(b.dtype, b.nranks), errors, stream);
}

ncclResult_t run(const RankBuffers& b, ncclDataType_t type, ncclComm_t comm, cudaStream_t s) {
  return ncclReduceScatter(b.send, b.recv, b.recv_count, type, ncclSum, comm, s);
}

}  // namespace

extern const CollectiveOps kReduceScatterOps = {counts, init_send, check, run};

}  // namespace hetplan::profiler::coll
