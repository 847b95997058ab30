#include "profiler/collectives/communicator.h"

#include <chrono>
#include <thread>

#include <fmt/format.h>

namespace hetplan::profiler::coll {
namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(double s) {
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(s * 1e6));
}

// Spins briefly (short waits are common and must not add a sleep), then sleeps.
void pause(int round) {
  if (round < 2000) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace

CommGroup::CommGroup(const ncclUniqueId& id, int nranks, const std::vector<LocalMember>& members,
                     double timeout_s)
    : nranks_(nranks), timeout_s_(timeout_s), members_(members) {
  if (members_.empty()) return;
  comms_.assign(members_.size(), nullptr);
  for (const auto& m : members_) {
    CUDA_CHECK(cudaSetDevice(m.device));
    streams_.emplace_back();
  }
  NCCL_CHECK(ncclGroupStart());
  ncclResult_t first_error = ncclSuccess;
  for (size_t i = 0; i < members_.size(); ++i) {
    CUDA_CHECK(cudaSetDevice(members_[i].device));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r =
        ncclCommInitRankConfig(&comms_[i], nranks, id, members_[i].rank, &config);
    if (r != ncclSuccess && r != ncclInProgress && first_error == ncclSuccess) first_error = r;
  }
  const ncclResult_t end = ncclGroupEnd();
  if (first_error != ncclSuccess || (end != ncclSuccess && end != ncclInProgress))
    fail(fmt::format("ncclCommInitRankConfig failed: {}",
                     ncclGetErrorString(first_error != ncclSuccess ? first_error : end)));
  wait_ready();
}

CommGroup::~CommGroup() {
  if (aborted_ || comms_.empty()) {
    abort();
    return;
  }
  // Orderly end: finalize (non-blocking, polled against the deadline), then destroy; abort when
  // finalizing does not finish, so that the destructor can never hang.
  bool finalized = true;
  for (ncclComm_t c : comms_) {
    const ncclResult_t r = ncclCommFinalize(c);
    finalized = finalized && (r == ncclSuccess || r == ncclInProgress);
  }
  const auto deadline = deadline_after(timeout_s_);
  for (int round = 0; finalized; ++round) {
    bool pending = false;
    for (ncclComm_t c : comms_) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(c, &state);
      if (state == ncclInProgress)
        pending = true;
      else if (state != ncclSuccess)
        finalized = false;
    }
    if (!pending) break;
    if (Clock::now() > deadline) finalized = false;
    pause(round);
  }
  if (!finalized) {
    abort();
    return;
  }
  for (ncclComm_t c : comms_) ncclCommDestroy(c);
  comms_.clear();
}

void CommGroup::abort() {
  if (!comms_.empty()) {
    for (ncclComm_t c : comms_)
      if (c) ncclCommAbort(c);
    comms_.clear();
  }
  aborted_ = true;
}

void CommGroup::fail(const std::string& what) {
  abort();
  throw NcclFault(fmt::format("{} (communicators of {} ranks aborted)", what, nranks_));
}

void CommGroup::wait_ready() {
  const auto deadline = deadline_after(timeout_s_);
  for (int round = 0;; ++round) {
    bool pending = false;
    for (ncclComm_t c : comms_) {
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(c, &state);
      if (r != ncclSuccess) fail(fmt::format("ncclCommGetAsyncError: {}", ncclGetErrorString(r)));
      if (state == ncclInProgress) {
        pending = true;
      } else if (state != ncclSuccess) {
        fail(fmt::format("NCCL error: {} ({})", ncclGetErrorString(state), ncclGetLastError(c)));
      }
    }
    if (!pending) return;
    if (Clock::now() > deadline)
      fail(fmt::format("NCCL communicators not ready after {:.0f} s (hang)", timeout_s_));
    pause(round);
  }
}

void CommGroup::wait_streams() {
  const auto deadline = deadline_after(timeout_s_);
  for (int round = 0;; ++round) {
    bool busy = false;
    for (size_t i = 0; i < comms_.size(); ++i) {
      const cudaError_t q = cudaStreamQuery(streams_[i].get());
      if (q == cudaErrorNotReady) {
        busy = true;
      } else if (q != cudaSuccess) {
        fail(fmt::format("CUDA error on GPU {}: {}", members_[i].device, cudaGetErrorString(q)));
      }
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comms_[i], &state);
      if (state != ncclSuccess && state != ncclInProgress)
        fail(fmt::format("NCCL error on GPU {}: {} ({})", members_[i].device,
                         ncclGetErrorString(state), ncclGetLastError(comms_[i])));
    }
    if (!busy) return;
    if (Clock::now() > deadline)
      fail(fmt::format("no progress within {:.0f} s (hang)", timeout_s_));
    pause(round);
  }
}

}  // namespace hetplan::profiler::coll
