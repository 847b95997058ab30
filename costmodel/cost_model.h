// Times of ops, layers and communication on a cluster's GPUs and links, from a fitted profile
// (datasheet priors where nothing was measured). Thread-safe after construction.
#pragma once

#include <concepts>
#include <map>
#include <string>

#include "costmodel/fit_collectives.h"
#include "costmodel/gemm_model.h"
#include "costmodel/hardware.h"
#include "costmodel/layer_correction.h"
#include "costmodel/layer_ops.h"
#include "costmodel/profile.h"
#include "costmodel/topology.h"

namespace hetplan {

// Fraction of a link's bandwidth that NCCL's bus bandwidth reaches, before calibration
// (docs/costmodel.md gives the basis of each).
struct CommPriors {
  double nvlink_efficiency = 0.8;
  double pcie_efficiency = 0.8;
  double network_efficiency = 0.85;
};

// The communicator of each scope a layer's collectives name (costmodel/layer_ops.h CommScope):
// tensor, context, expert and expert-tensor groups. Size-1 groups cost nothing.
struct LayerGroups {
  CommGroup tensor, context, expert, expert_tensor;

  LayerGroups() = default;
  // Only a tensor-parallel group (no context or expert parallelism).
  explicit LayerGroups(const CommGroup& tp) : tensor(tp) {}
  const CommGroup& of(CommScope scope) const;
};

// Per-pass times of one layer on one GPU type (its communication included).
struct LayerTimes {
  double pass_s[kNumPasses] = {0, 0, 0};     // F, B (with recomputation), W
  double tp_comm_s[kNumPasses] = {0, 0, 0};  // the tensor-parallel collectives in each
  // Every scope's collectives in each pass, as they add to it (ring attention's exchange only
  // where it outlasts the attention it hides behind); [kTensor] is tp_comm_s.
  double comm_s[kNumCommScopes][kNumPasses] = {};
  double recompute_s = 0;  // forward work re-run inside B
  // In F: the device waiting for its host after the layer's host syncs (LayerWork::host_syncs).
  double host_sync_s = 0;
  // The whole-layer timings that scaled the ops (nullptr: none matched this layer).
  const LayerCorrection* correction = nullptr;
};

// How routed tokens pick their experts: each token `top_k` of `experts` (spread evenly over the
// ranks of the group that exchanges them).
struct TokenRouting {
  int64_t experts = 0, top_k = 0;
};
// The expected number of `groups` equal groups of experts that a token's picks touch (drawn
// without replacement, as a router's top-k is): groups x (1 - C(E - E/groups, k) / C(E, k)).
double touched_groups(const TokenRouting& routing, int64_t groups);

// What an all-to-all moves over each resource: bytes each GPU sends over its links to the other
// GPUs of its node, and bytes each node sends over its network. All peers at once (NCCL's
// all-to-all posts every send together), so the busier resource bounds it. `dedup`: one copy of a
// token per destination node and GPU (DeepEP, HybridEP), else each rank's `bytes` spread evenly.
struct AllToAllTraffic {
  double gpu_link_bytes = 0, node_network_bytes = 0;
};
AllToAllTraffic all_to_all_traffic(double bytes, const CommGroup& g, const TokenRouting* dedup);

class CostModel {
 public:
  CostModel(Profile profile, const ClusterSpec& cluster, CommPriors priors = {});

  // The dtype a GPU computes `requested` in: bf16 becomes fp16 on GPUs without bf16 units
  // (T4, V100), as frameworks run them.
  Dtype compute_dtype(const GpuSpec& gpu, Dtype requested) const;

  double gemm_s(const GpuSpec& gpu, Dtype dtype, const GemmShape& shape) const;
  // A layer's GEMM (in its own dtype where quantised, else `dtype`): one kernel for its batch, or
  // per-expert GEMMs (GemmOp::streams) side by side on their streams.
  double gemm_op_s(const GpuSpec& gpu, Dtype dtype, const GemmOp& op) const;
  double memory_op_s(const GpuSpec& gpu, const std::string& kernel, double bytes) const;
  // A layer's memory-bound op: its kernel at its bytes, and an eager sequence of `launches`
  // kernels the launch gap of each after the first.
  double memory_op_s(const GpuSpec& gpu, const MemoryOp& op) const;
  double attention_s(const GpuSpec& gpu, Dtype dtype, const AttentionOp& op) const;
  // One layer's passes on `gpu` with its tensor-parallel group `tp`: the sum of its ops, corrected
  // per pass where the profile timed whole layers of this shape on this GPU type (a ratio, or a
  // fixed time plus a rate: costmodel/layer_correction.h; the communication is not scaled).
  // Each collective runs over the group of the scope it names (`groups`); the overloads taking one
  // CommGroup give it as the tensor group, with no context or expert groups. (The LayerGroups
  // overloads are templates only so that `{}`, which callers pass for "no group", still means a
  // CommGroup.)
  template <typename Groups>
  requires std::same_as<Groups, LayerGroups> LayerTimes layer_times(const GpuSpec& gpu,
                                                                    const LayerWork& work,
                                                                    const Recomputation& recompute,
                                                                    const Groups& groups,
                                                                    Dtype dtype)
  const { return grouped_layer_times(gpu, work, recompute, groups, dtype, /*correct=*/true); }
  LayerTimes layer_times(const GpuSpec& gpu, const LayerWork& work, const Recomputation& recompute,
                         const CommGroup& tp, Dtype dtype) const;
  // The sum of its ops alone (what the whole-layer timings are compared with).
  template <typename Groups>
  requires std::same_as<Groups, LayerGroups> LayerTimes
  layer_times_from_ops(const GpuSpec& gpu, const LayerWork& work, const Recomputation& recompute,
                       const Groups& groups, Dtype dtype)
  const { return grouped_layer_times(gpu, work, recompute, groups, dtype, /*correct=*/false); }
  LayerTimes layer_times_from_ops(const GpuSpec& gpu, const LayerWork& work,
                                  const Recomputation& recompute, const CommGroup& tp,
                                  Dtype dtype) const;
  // One of a layer's collectives over its group, `repeats` transfers included, before overlap.
  double comm_op_s(const CommOp& op, const LayerGroups& groups) const;
  // The correction for layers of `key` computed in `dtype` on `gpu`: its width's own, or at a
  // tensor width that was not timed the pooled fixed + rate line that covers it
  // (untimed_width_corrections); nullptr where none.
  const LayerCorrection* layer_correction(const GpuSpec& gpu, const LayerKey& key,
                                          Dtype dtype) const;
  // Every whole-layer timing of `gpu`'s type against the ops, and the corrections made of them.
  const std::vector<LayerTiming>& layer_timings(const GpuSpec& gpu) const;

  // A collective of `bytes` (nccl-tests convention) over `group`: measured where the profile has
  // the same collective, group size and link, else latency-bandwidth priors.
  double collective_s(CollectiveKind kind, double bytes, const CommGroup& group) const;
  double p2p_s(double bytes, const Link& link) const;
  // AdamW step over `params` parameters (fp32 master weights, moments and gradients).
  double optimizer_s(const GpuSpec& gpu, double params) const;

  const Profile& profile() const { return profile_; }
  const GpuFit& fit(const GpuSpec& gpu) const;
  const ClusterSpec& cluster() const { return cluster_; }

 private:
  struct GpuCost {
    GpuFit fit;
    std::map<Dtype, GemmModel> gemm;
    std::vector<LayerTiming> timings;
    std::map<std::pair<LayerKey, Dtype>, LayerCorrection> corrections;
  };
  const GpuCost& cost(const GpuSpec& gpu) const;
  // Fitted measurement for this collective and group (directly measured, or composed from
  // measured intra- and inter-node parts); nullopt when the profile has neither.
  std::optional<double> measured_collective_s(CollectiveKind kind, double bytes,
                                              const CommGroup& group) const;
  double link_efficiency(Fabric fabric) const;
  // The priors' all-to-all: the slower of the GPUs' links and the node's network.
  double flat_all_to_all_s(const AllToAllTraffic& traffic, const CommGroup& group) const;
  double deduplicated_all_to_all_s(double bytes, const CommGroup& group,
                                   const TokenRouting& routing) const;
  LayerTimes grouped_layer_times(const GpuSpec& gpu, const LayerWork& work,
                                 const Recomputation& recompute, const LayerGroups& groups,
                                 Dtype dtype, bool correct) const;
  LayerTimes scaled_layer_times(const GpuSpec& gpu, const LayerWork& work,
                                const Recomputation& recompute, const LayerGroups& groups,
                                Dtype dtype, const PassScale& scale) const;

  Profile profile_;
  ClusterSpec cluster_;
  CommPriors priors_;
  std::map<std::string, GpuCost> gpus_;
  CommunicationFit comm_;  // fitted from the profile's collective measurements
};

}  // namespace hetplan
