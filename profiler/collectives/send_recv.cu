// Send/recv ring shift (nccl-tests sendrecv.cu): rank r sends its array to r+1 and receives from
// r-1, all at once; with one rank it sends to itself. Bytes = the array; busbw factor 1.
#include "profiler/collectives/pattern.cuh"

namespace hetplan::profiler::coll {
namespace {

void counts(size_t count, int, size_t* send, size_t* recv) { *send = *recv = count; }

struct Expected {
  int from;
  __device__ float operator()(size_t i) const { return pattern_value(from, i); }
};

void check(const RankBuffers& b, unsigned long long* errors, cudaStream_t stream) {
  check_buffer(b.recv, b.recv_count, b.dtype, Expected{(b.rank + b.nranks - 1) % b.nranks}, 0.f,
               errors, stream);
}

ncclResult_t run(const RankBuffers& b, ncclDataType_t type, ncclComm_t comm, cudaStream_t s) {
  const ncclResult_t r = ncclSend(b.send, b.send_count, type, (b.rank + 1) % b.nranks, comm, s);
  if (r != ncclSuccess && r != ncclInProgress) return r;
  return ncclRecv(b.recv, b.recv_count, type, (b.rank + b.nranks - 1) % b.nranks, comm, s);
}

}  // namespace

extern const CollectiveOps kSendRecvOps = {counts, init_send, check, run};

}  // namespace hetplan::profiler::coll
