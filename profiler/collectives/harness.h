// The measurement harness, written once for every collective table (collective.h) and for the p2p
// pairs: initialise the inputs, run once and check every rank's output, warm up, agree with the
// other processes on an iteration count, then time batches of back-to-back operations with CUDA
// events on every local GPU. A batch's sample is its slowest GPU's time per operation.
#pragma once

#include <functional>
#include <vector>

#include "profiler/collectives/communicator.h"
#include "profiler/collectives/registry.h"
#include "profiler/common/collective_plan.h"

namespace hetplan::profiler::coll {

struct TimingPlan {
  int warmup = 5;
  int batches = 10;
  double target_batch_s = 5e-3;  // iterations per batch: enough to fill this, within limits
  int max_iterations = 100;
};
TimingPlan timing_plan(bool quick);

// Takes this process's value and returns the agreed one (the maximum over processes; a negative
// value from any process means it failed before timing).
using AgreeFn = std::function<double(double)>;

// Send and receive buffers (and an error counter) on each local GPU of a group.
class Workspace {
 public:
  Workspace(const CommGroup& group, size_t buffer_bytes);
  size_t buffer_bytes() const { return buffer_bytes_; }
  void* send(size_t i) const { return send_[i].get(); }
  void* recv(size_t i) const { return recv_[i].get(); }
  unsigned long long* errors(size_t i) const {
    return static_cast<unsigned long long*>(errors_[i].get());
  }

 private:
  size_t buffer_bytes_;
  std::vector<DeviceBuffer> send_, recv_, errors_;
};

// Largest buffer this process can give each of its GPUs (two buffers per GPU, leaving room for
// NCCL and the driver), at most `wanted`.
size_t local_buffer_capacity(const std::vector<LocalMember>& members, size_t wanted);

// One collective at one size. Every process calls it (processes without a GPU in the group too,
// so that the agreement stays in step). NcclFault and check failures become failed records; the
// group is aborted on a fault.
RankRecord measure_collective(CommGroup& group, Workspace& ws, const CollectiveOps& ops,
                              Dtype dtype, double bytes, const TimingPlan& plan,
                              const AgreeFn& agree);
// One p2p transfer from NCCL rank `src` to `dst` of the group (src == dst: to itself).
RankRecord measure_p2p(CommGroup& group, Workspace& ws, int src, int dst, double bytes,
                       const TimingPlan& plan, const AgreeFn& agree);

}  // namespace hetplan::profiler::coll
