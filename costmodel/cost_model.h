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
  // The whole-layer timings that scaled the ops (nullptr: none matched this layer).
  const LayerCorrection* correction = nullptr;
};

class CostModel {
 public:
  CostModel(Profile profile, const ClusterSpec& cluster, CommPriors priors = {});

  // The dtype a GPU computes `requested` in: bf16 becomes fp16 on GPUs without bf16 units
  // (T4, V100), as frameworks run them.
  Dtype compute_dtype(const GpuSpec& gpu, Dtype requested) const;

  double gemm_s(const GpuSpec& gpu, Dtype dtype, const GemmShape& shape) const;
  double memory_op_s(const GpuSpec& gpu, const std::string& kernel, double bytes) const;
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
                                                                    Recompute recompute,
                                                                    const Groups& groups,
                                                                    Dtype dtype)
  const { return grouped_layer_times(gpu, work, recompute, groups, dtype, /*correct=*/true); }
  LayerTimes layer_times(const GpuSpec& gpu, const LayerWork& work, Recompute recompute,
                         const CommGroup& tp, Dtype dtype) const;
  // The sum of its ops alone (what the whole-layer timings are compared with).
  template <typename Groups>
  requires std::same_as<Groups, LayerGroups> LayerTimes layer_times_from_ops(const GpuSpec& gpu,
                                                                             const LayerWork& work,
                                                                             Recompute recompute,
                                                                             const Groups& groups,
                                                                             Dtype dtype)
  const { return grouped_layer_times(gpu, work, recompute, groups, dtype, /*correct=*/false); }
  LayerTimes layer_times_from_ops(const GpuSpec& gpu, const LayerWork& work, Recompute recompute,
                                  const CommGroup& tp, Dtype dtype) const;
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
  LayerTimes grouped_layer_times(const GpuSpec& gpu, const LayerWork& work, Recompute recompute,
                                 const LayerGroups& groups, Dtype dtype, bool correct) const;
  LayerTimes scaled_layer_times(const GpuSpec& gpu, const LayerWork& work, Recompute recompute,
                                const LayerGroups& groups, Dtype dtype,
                                const PassScale& scale) const;

  Profile profile_;
  ClusterSpec cluster_;
  CommPriors priors_;
  std::map<std::string, GpuCost> gpus_;
  CommunicationFit comm_;  // fitted from the profile's collective measurements
};

}  // namespace hetplan
