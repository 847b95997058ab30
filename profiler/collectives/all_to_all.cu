// All-to-all: rank r sends chunk p of its array to rank p and receives chunk r of every rank's
// array, in rank order. Built from grouped send/recv (as nccl-tests alltoall.cu does, and as
// ncclAlltoAll does inside) so that it runs on NCCL versions without ncclAlltoAll.
// Bytes = the whole array per rank; busbw factor (n-1)/n.
#include "profiler/collectives/pattern.cuh"

namespace hetplan::profiler::coll {
namespace {

void counts(size_t count, int nranks, size_t* send, size_t* recv) {
  *send = *recv = (count / nranks) * nranks;
}

struct Expected {
  int rank;
  size_t chunk;
  __device__ float operator()(size_t i) const {
    const size_t from = i / chunk;  // received from rank `from`: its chunk `rank`
    return pattern_value(static_cast<int>(from), rank * chunk + i % chunk);
  }
};

void check(const RankBuffers& b, unsigned long long* errors, cudaStream_t stream) {
  check_buffer(b.recv, b.recv_count, b.dtype, Expected{b.rank, b.recv_count / b.nranks}, 0.f,
               errors, stream);
}

ncclResult_t run(const RankBuffers& b, ncclDataType_t type, ncclComm_t comm, cudaStream_t s) {
  const size_t chunk = b.send_count / b.nranks;
  const size_t chunk_bytes = chunk * b.elem_bytes;
  for (int p = 0; p < b.nranks; ++p) {
    ncclResult_t r =
        ncclSend(static_cast<const char*>(b.send) + p * chunk_bytes, chunk, type, p, comm, s);
    if (r != ncclSuccess && r != ncclInProgress) return r;
    r = ncclRecv(static_cast<char*>(b.recv) + p * chunk_bytes, chunk, type, p, comm, s);
    if (r != ncclSuccess && r != ncclInProgress) return r;
  }
  return ncclSuccess;
}

}  // namespace

extern const CollectiveOps kAllToAllOps = {counts, init_send, check, run};

}  // namespace hetplan::profiler::coll
