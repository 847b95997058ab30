// The steps of Evaluator::predict, each a function with plain inputs and outputs
// (docs/costmodel.md, "A prediction, step by step"):
//
//   1 validate   the strategy against the model, the cluster and the framework (search/rules.h)
//   2 place      pipeline ranks on devices, given layer ranges read        (place.cpp)
//   3 ranks      per rank its slowest and smallest GPU, dtype, layer costs (ranks.cpp)
//   4 partition  layers into virtual stages under the memory limit         (partition.cpp)
//   5 stages     F, B, W and p2p per virtual stage: the pipeline problem   (stage_times.cpp,
//                each layer's cost under the framework: layer_costs.cpp)
//   6 schedule   the pipeline simulator or closed form                     (pipeline/schedule.h)
//   7 synchronise gradient reduction over dp, its overlap, optimizer       (synchronise.cpp)
//   8 memory     per rank                                                  (memory.cpp)
//   9 host floor kernels issued per iteration x host cost per kernel      (host_floor.cpp)
//  10 summarise  iteration time, throughput, MFU, the breakdown            (summarise.cpp)
//
// Internal to search/: callers use Evaluator (search/evaluate.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "search/evaluate.h"
#include "search/pipeline/schedule.h"

namespace hetplan::eval {

using LayerRange = std::pair<int64_t, int64_t>;  // first and last layer, inclusive

// Notes of one prediction, each kept once, in the order first given.
class Notes {
 public:
  void add(std::string text);
  std::vector<std::string> take() { return std::move(notes_); }

 private:
  std::vector<std::string> notes_;
};

// Step 2. Devices of each pipeline rank (dp x tp each, tp fastest), the layer range of each
// virtual stage when the strategy gives them (else empty), and the rank of each virtual stage.
struct Placement {
  std::vector<std::vector<int64_t>> groups;
  std::vector<LayerRange> ranges;
  std::vector<int64_t> rank_of_stage;
};
// Throws InputError for a malformed placement; returns the problem in `problem` when the cluster
// cannot hold it (not enough free GPUs of a type). `checked`: the stages' devices are known to be
// well formed (the search's placements), so stage_devices_problem is not run again.
Placement place(const Evaluator& ev, const Strategy& s, bool checked, std::string& problem);
// The layer range of every virtual stage the strategy gives (they must tile the model; InputError
// otherwise), or empty when it gives none.
std::vector<LayerRange> given_ranges(const Strategy& s, int64_t layers);

// Step 5, per layer (Evaluator::layer_costs caches it): a layer's passes, activation, transients
// and kernels on `gpu` with tensor-parallel group `tp`.
// After a host sync (LayerWork::host_syncs) the device has nothing queued: the layer's forward
// takes at least its host's time to issue the forward's kernels at `host_s_per_kernel` each; the
// excess over the device's own forward goes into t.pass_s[F] and t.host_sync_s.
void host_sync_stall(const LayerWork& w, const Recomputation& recompute, double host_s_per_kernel,
                     LayerTimes& t);
// The ops `layer` runs under the strategy and the framework on `gpu` (what cost_layer costs).
LayerWork layer_work_under(const LayerSpec& layer, const Strategy& s, const GpuSpec& gpu,
                           const CostModel& cost, Dtype dtype, const FrameworkSpec& framework);
// The host's time to issue one micro-batch's `kernels` of `layer`: each at the cost of the mode
// its part runs in (FrameworkSpec::mode_for; the loss's kernels, LayerWork::loss_launches, in the
// loss's mode).
double layer_host_s(const LayerSpec& layer, const LayerWork& w, double kernels,
                    const FrameworkSpec& framework, const HostCosts& host);
// The layer's host sync stall is at the host cost of its part's mode.
LayerCost cost_layer(const LayerSpec& layer, const Strategy& s, const GpuSpec& gpu,
                     const LayerGroups& groups, const CostModel& cost, Dtype dtype,
                     const FrameworkSpec& framework, const HostCosts& host);

// Step 3. One pipeline rank as the cost model sees it. A rank whose data-parallel replicas run on
// several node kinds takes, per layer and pass, the slowest kind's time (the replicas meet at
// every gradient synchronisation), and the smallest GPU's memory.
struct Rank {
  const GpuSpec* gpu = nullptr;      // the slowest kind (the only one when one)
  const GpuSpec* mem_gpu = nullptr;  // the kind with the least usable memory
  Dtype dtype = Dtype::kBf16;        // what `gpu` computes the model's dtype in
  std::string type;                  // its GPU types, joined by "+" in name order
  double limit_bytes = 0;            // usable memory of mem_gpu
  const std::vector<LayerCost>* shared_costs = nullptr;  // the evaluator's cache
  std::vector<LayerCost> mixed_costs;  // per layer, the slowest kind's, when the kinds differ
  const std::vector<LayerCost>& costs() const {
    return mixed_costs.empty() ? *shared_costs : mixed_costs;
  }
};
// What a device holds outside the allocator under the framework: the profile's measured CUDA
// context where it has one (else the framework's figure), and the framework's NCCL buffers for
// each communicator the strategy opens.
double reserve_bytes(const Evaluator& ev, const Strategy& s, const GpuSpec& gpu);
// What the allocator may hand out on `gpu`: its capacity less the reserve, less the caching
// allocator's fragmentation on top of what it allocates.
double usable_bytes(const Evaluator& ev, const Strategy& s, const GpuSpec& gpu);
std::vector<Rank> resolve_ranks(const Evaluator& ev, const Strategy& s, const Placement& p,
                                Notes& notes);

// Step 4. The layer ranges of the virtual stages: the fastest slowest stage (device, for chunked
// schedules) under the memory limits. `infeasible` is set, with the overflow, when no partition
// fits and the options ask to stop there.
struct PartitionOutcome {
  std::vector<LayerRange> ranges;
  std::optional<Prediction> infeasible;
};
PartitionOutcome partition(const Evaluator& ev, const Strategy& s, const Placement& p,
                           const std::vector<Rank>& ranks, const pipeline::PipelineProblem& base,
                           const PredictOptions& options);

// Step 5. Per virtual stage, one micro-batch's passes and the activation it sends on; per rank,
// the parameters it holds and its largest transient buffers. `problem` is what the schedule runs.
struct StageTimes {
  std::vector<StagePrediction> stages;
  pipeline::PipelineProblem problem;
  std::vector<double> params;         // per rank
  std::vector<double> expert_params;  // per rank, of `params` the routed experts'
  // Per rank, of `params` the frozen ones (LoRA's base weights), and of `expert_params` the
  // frozen ones.
  std::vector<double> frozen_params, expert_frozen_params;
  std::vector<double> transient;  // per rank, bytes
  // Per rank: a low-precision recipe's weight copies, and the bytes their quantisation moves once
  // per step.
  std::vector<double> low_precision_bytes, weight_quantize_bytes;
  std::vector<double> quantized_params;  // per rank, the parameters of those weights
  // Per rank, of the copies and their parameters the routed experts'.
  std::vector<double> expert_low_precision_bytes, expert_quantized_params;
};
// The parameters of rank `d` that train (their gradients are reduced and the optimizer steps
// them): the dense ones, and the routed experts'.
inline double trained_dense_params(const StageTimes& t, size_t d) {
  return (t.params[d] - t.expert_params[d]) - (t.frozen_params[d] - t.expert_frozen_params[d]);
}
inline double trained_expert_params(const StageTimes& t, size_t d) {
  return t.expert_params[d] - t.expert_frozen_params[d];
}
inline double trained(const StageTimes& t, size_t d) {
  return trained_dense_params(t, d) + trained_expert_params(t, d);
}
StageTimes stage_times(const Evaluator& ev, const Strategy& s, const Placement& p,
                       const std::vector<Rank>& ranks, const std::vector<LayerRange>& ranges,
                       const pipeline::PipelineProblem& base);

// The communicators of a pipeline rank's gradients, over its `devices` (dp x cp x tp, tp fastest,
// then cp): the dense parameters' dp x cp replicas (tp apart) and the routed experts' expert_dp
// replicas (ep x etp apart, Megatron-Core's expert layout), each from the rank's first device.
CommGroup grad_group(const Evaluator& ev, const Strategy& s, const std::vector<int64_t>& devices);
CommGroup expert_grad_group(const Evaluator& ev, const Strategy& s,
                            const std::vector<int64_t>& devices);

// What a rank (or one layer) holds: its parameters and a recipe's weight copies of them, each
// with the routed experts' share.
struct HeldParameters {
  double params = 0, expert_params = 0;
  double frozen_params = 0, expert_frozen_params = 0;  // of those, LoRA's frozen ones
  double low_precision_bytes = 0, expert_low_precision_bytes = 0;
  double quantized_params = 0, expert_quantized_params = 0;  // the parameters of those copies
};
HeldParameters held_by(const LayerCost& c);
HeldParameters held_by(const StageTimes& t, size_t rank);

// Whether the strategy's ZeRO-3 weights stay gathered through the step (a pipeline under a
// framework whose memory.gathered_with_pipeline says so).
inline bool weights_stay_gathered(const FrameworkSpec& f, const Strategy& s) {
  return s.zero >= 3 && s.pp > 1 && f.memory.gathered_with_pipeline;
}

// The parameter states of `held` under the strategy's sharding: MemoryInput's first part.
MemoryInput parameter_states(const Evaluator& ev, const Strategy& s, Dtype dtype,
                             const HeldParameters& held);

// The parameters rank d's optimizer steps on each of its devices (its ZeRO shard).
double optimizer_params(const Strategy& s, const StageTimes& t, size_t d);

// Step 7. Per rank: gradient synchronisation (all of it, and what the backward does not hide) and
// the optimizer step; the rank whose tail after the pipeline is longest.
struct Synchronisation {
  std::vector<double> sync_s, exposed_s, optimizer_s;
  int64_t tail_rank = 0;
  double tail_s = 0;
};
Synchronisation synchronise(const Evaluator& ev, const Strategy& s, const Placement& p,
                            const std::vector<Rank>& ranks, const StageTimes& t);

// Step 8. Memory of each rank's devices at the pipeline's peak; the first rank that does not fit
// makes the prediction infeasible (out.feasible, reason, kind kMemory).
// The memory of rank d's devices (`rank`) at the pipeline's peak, and why it does not fit its GPU
// ("" when it does).
MemoryBreakdown rank_memory_of(const Evaluator& ev, const Strategy& s, const Rank& rank,
                               const StageTimes& t, const pipeline::PipelineResult& pipe, size_t d,
                               std::string& overflow);
std::vector<MemoryBreakdown> rank_memory(const Evaluator& ev, const Strategy& s,
                                         const std::vector<Rank>& ranks, const StageTimes& t,
                                         const pipeline::PipelineResult& pipe, Prediction& out);

// Step 9. The most kernels one device's host issues per iteration, and the time it takes them.
struct HostFloor {
  double kernels = 0;
  double host_s = 0;
};
HostFloor host_floor(const Evaluator& ev, const Strategy& s, const Placement& p,
                     const std::vector<Rank>& ranks, const std::vector<LayerRange>& ranges,
                     const StageTimes& t);

// Step 10. Iteration time, throughput, MFU, bubble and the named breakdown, into `out`.
void summarise(const Evaluator& ev, const Strategy& s, const Placement& p, const StageTimes& t,
               const pipeline::PipelineResult& pipe, const Synchronisation& sync,
               const HostFloor& host, Prediction& out);

// All ten steps for a strategy whose stages hold replica groups (search/replicas.h, replicas.cpp):
// each pipeline through the steps above at its own widths, the step waiting for the slowest, the
// stages' gradients reduced over all their groups.
Prediction predict_replicas(const Evaluator& ev, const Strategy& s, const PredictOptions& options);

}  // namespace hetplan::eval
