// This process's NCCL communicators in one group, created non-blocking (config.blocking = 0) so
// that no NCCL call can hang the calibration: every wait polls ncclCommGetAsyncError and the
// streams against a deadline, and a fault (an NCCL error, or no progress before the deadline)
// aborts the communicators with ncclCommAbort. The sweep then records the failure and goes on
// with new communicators.
#pragma once

#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "costmodel/errors.h"
#include "profiler/collectives/cuda_util.h"

namespace hetplan::profiler::coll {

// An NCCL error or hang on this process's communicators (they are aborted when it is thrown).
class NcclFault : public RuntimeFailure {
 public:
  using RuntimeFailure::RuntimeFailure;
};

// One of this process's GPUs in the group.
struct LocalMember {
  int device = 0;
  int rank = 0;  // NCCL rank in the group
};

class CommGroup {
 public:
  // Creates the members' communicators (none when `members` is empty). Throws NcclFault.
  CommGroup(const ncclUniqueId& id, int nranks, const std::vector<LocalMember>& members,
            double timeout_s);
  ~CommGroup();
  CommGroup(const CommGroup&) = delete;
  CommGroup& operator=(const CommGroup&) = delete;

  size_t local_count() const { return members_.size(); }
  int nranks() const { return nranks_; }
  const LocalMember& member(size_t i) const { return members_[i]; }
  ncclComm_t comm(size_t i) const { return comms_[i]; }
  cudaStream_t stream(size_t i) const { return streams_[i].get(); }
  double timeout_s() const { return timeout_s_; }

  // After a call that returned ncclInProgress: waits until every communicator is ready.
  void wait_ready();
  // Waits until every local stream is idle, polling for NCCL errors. Throws NcclFault (after
  // aborting) on an error or when the deadline passes.
  void wait_streams();
  // Aborts every communicator (idempotent); the group is unusable afterwards.
  void abort();
  bool aborted() const { return aborted_; }

 private:
  [[noreturn]] void fail(const std::string& what);

  int nranks_ = 0;
  double timeout_s_ = 0;
  std::vector<LocalMember> members_;
  std::vector<ncclComm_t> comms_;
  std::vector<CudaStream> streams_;
  bool aborted_ = false;
};

// Runs `enqueue` between ncclGroupStart and ncclGroupEnd and waits for the communicators when the
// group end is still in progress. `enqueue` returns the first failing ncclResult_t, or ncclSuccess.
template <typename F>
void grouped(CommGroup& g, F&& enqueue) {
  NCCL_CHECK(ncclGroupStart());
  const ncclResult_t r = enqueue();
  const ncclResult_t end = ncclGroupEnd();
  if ((r != ncclSuccess && r != ncclInProgress) || (end != ncclSuccess && end != ncclInProgress)) {
    const ncclResult_t bad = r != ncclSuccess && r != ncclInProgress ? r : end;
    g.abort();
    throw NcclFault(std::string("NCCL error while enqueuing: ") + ncclGetErrorString(bad));
  }
  if (end == ncclInProgress) g.wait_ready();
}

}  // namespace hetplan::profiler::coll
