// Predicts one strategy's iteration time, throughput, MFU and memory per device on a cluster.
// Used by `hetplan predict` and by the search for every candidate.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "costmodel/cost_model.h"
#include "costmodel/framework.h"
#include "costmodel/model.h"
#include "costmodel/op_times.h"
#include "costmodel/topology.h"
#include "search/pipeline/schedule.h"
#include "search/rules.h"
#include "search/strategy.h"

namespace hetplan {

// One layer on one node kind for one micro-batch, as the pipeline and the memory model need it.
struct LayerCost {
  LayerTimes times;
  double activation_bytes = 0;    // kept for backward under the strategy's recomputation
  double transient_bytes = 0;     // working bytes while this layer runs
  double param_count = 0;         // parameters held on one rank
  double expert_param_count = 0;  // of those, the routed experts' (reduced over their replicas)
  // Of those, the frozen ones (LoRA's base weights: no gradient or optimizer state), and of the
  // routed experts' the frozen ones.
  double frozen_param_count = 0, expert_frozen_param_count = 0;
  // fp8 / fp4 copies of the weights a low-precision recipe keeps, and the bytes its per-step
  // quantisation of them moves (costmodel/layer_ops.h).
  double low_precision_weight_bytes = 0, weight_quantize_bytes = 0;
  double quantized_param_count = 0;  // the parameters of those weights
  // Of the copies and their parameters, the routed experts'.
  double expert_low_precision_weight_bytes = 0, expert_quantized_param_count = 0;
  double output_bytes = 0;
  // Kernels launched per micro-batch, recomputation included (costmodel/layer_ops.h), and the
  // host's time to issue them, each at the cost of the mode its part of the model runs in
  // (FrameworkSpec::mode_for: torch.compile may cover the blocks and not the head).
  double kernel_launches = 0;
  double host_s = 0;
  double total_s() const { return times.pass_s[0] + times.pass_s[1] + times.pass_s[2]; }
};

// One distinct layer of a model on one node kind under a strategy: its ops' times (before
// corrections and overlaps) and its cost (after them).
struct LayerOps {
  int64_t first_layer = 0, count = 0;  // the first layer of its kind, and how many are alike
  std::vector<OpTime> ops;
  LayerCost cost;
};

// What the host takes to issue one kernel, in the strategy's host mode and in eager mode (what the
// parts of the model outside torch.compile run in: FrameworkSpec::mode_for).
struct HostCosts {
  HostMode mode = HostMode::kEager;  // the strategy's
  double mode_s = 0, eager_s = 0;
  double in(HostMode m) const { return m == mode ? mode_s : eager_s; }
};

struct PredictOptions {
  // Return at once (infeasible kNoPartition, with its overflow) when no layer partition fits,
  // instead of predicting a time-balanced partition that does not fit (the search's fast path).
  bool skip_unfit = false;
  // The strategy's stages list well-formed device groups (the search's placements, built by
  // place_stages): they are not checked again, which costs O(devices log devices) a prediction.
  bool placement_checked = false;
};

class Evaluator {
 public:
  // Throws InputError naming the framework's file where it asks for what hetplan does not know.
  Evaluator(const ModelSpec& model, const ClusterSpec& cluster, const CostModel& cost,
            FrameworkSpec framework);

  // Never throws for an infeasible strategy: returns feasible = false with the reason.
  // Throws InputError for a strategy that is malformed (unknown schedule, devices out of range).
  Prediction predict(const Strategy& strategy, const PredictOptions& options = {}) const;

  // The first rule of search/rules.h the strategy breaks on this model, cluster and framework.
  std::optional<RuleViolation> broken_rule(const Strategy& s) const;

  // Every layer's cost on node kind `group` (an index into the cluster's groups) under the
  // strategy's micro-batch, tensor width, recomputation and options; `tp_nodes` is how many nodes
  // a tensor-parallel group spans. Cached: safe to call from several threads.
  const std::vector<LayerCost>& layer_costs(int64_t group, int64_t tp_nodes,
                                            const Strategy& s) const;

  // Every distinct layer's ops and cost on node kind `group`, a tensor-parallel group spanning
  // as few nodes as it can (what `hetplan predict --layer-ops` prints).
  std::vector<LayerOps> layer_ops(int64_t group, const Strategy& s) const;

  // The communicators a layer of node kind `group` uses: the tensor group over `tp_nodes` nodes,
  // and the context, expert and expert-tensor groups of a pipeline rank laid out in a row there.
  LayerGroups representative_groups(int64_t group, int64_t tp_nodes, const Strategy& s) const;

  // The communicator of `ranks` devices `stride` apart from device `first` (a rank's gradient
  // replicas in the default placement), `sharing` such groups to a node's network; with `span` >
  // 0 the offsets wrap around within the `span` devices from `first` (a row laid out on one node
  // kind). Cached: the search predicts many candidates on the same placement.
  CommGroup strided_group(int64_t first, int64_t ranks, int64_t stride, int64_t sharing,
                          int64_t span = 0) const;

  // Per virtual stage: the most micro-batch activations of that stage the schedule holds at once
  // (from its pass order, which the times do not change). Cached by schedule, pp, micro-batches
  // and chunks.
  std::vector<double> stage_peaks(const Strategy& s) const;

  // The host's seconds per launched kernel under `mode`: a profile's measured figure for eager
  // mode on `gpu`'s machines where it has one, else the framework's.
  double host_s_per_kernel(const GpuSpec& gpu, HostMode mode) const;
  HostCosts host_costs(const GpuSpec& gpu, HostMode mode) const {
    return {mode, host_s_per_kernel(gpu, mode), host_s_per_kernel(gpu, HostMode::kEager)};
  }

  const ModelSpec& model() const { return model_; }
  const CostModel& cost() const { return cost_; }
  const ClusterSpec& cluster() const { return cluster_; }
  const FrameworkSpec& framework() const { return framework_; }
  const std::vector<Device>& devices() const { return devices_; }
  // How the framework runs interleaved 1F1B (FrameworkSpec::can_run.pipeline_runtime).
  pipeline::InterleavedOrder interleaved_order() const {
    return framework_.can_run.pipeline_runtime == "pytorch" ? pipeline::InterleavedOrder::kPyTorch
                                                            : pipeline::InterleavedOrder::kMegatron;
  }

 private:
  const ModelSpec& model_;
  const ClusterSpec& cluster_;
  const CostModel& cost_;
  const FrameworkSpec framework_;
  std::vector<Device> devices_;
  // Layer costs by node kind, tp nodes and every strategy field a layer's cost depends on (under
  // autocast the micro-batches too: the first one's gradients are not added).
  struct CacheKey {
    int64_t group, tp_nodes, micro_batch, tp, cp, ep, etp, cp_a2a;
    bool sequence_parallel;
    int recompute;
    uint32_t recompute_modules;
    bool flash_attention, zero3, grad_accumulation_fusion, tp_comm_overlap, ep_comm_overlap;
    int host_mode, cp_comm, dispatcher, precision;
    double moe_imbalance;
    int64_t autocast_microbatches;
    double recompute_share;  // of each block, under full recomputation of N blocks a stage
    int64_t lora_rank;
    uint32_t lora_targets;
    auto operator<=>(const CacheKey&) const = default;
  };
  mutable std::mutex cache_mutex_;
  mutable std::map<CacheKey, std::unique_ptr<std::vector<LayerCost>>> cache_;
  std::vector<int64_t> canonical_layer_;  // index of the first layer identical to each layer
  mutable std::map<std::tuple<std::string, int64_t, int64_t, int64_t>, std::vector<double>> peaks_;
  mutable std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>, CommGroup>
      strided_groups_;
};

}  // namespace hetplan
