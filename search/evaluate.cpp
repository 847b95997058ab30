#include "search/evaluate.h"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/errors.h"
#include "search/eval/steps.h"
#include "search/pipeline/schedule.h"

namespace hetplan {
namespace {

// Layers whose every field is the same cost the same (a block's fields include its window, its
// MoE and MTP settings: costmodel/model.h).
bool same_layer(const LayerSpec& a, const LayerSpec& b) {
  if (a.hidden != b.hidden || a.seq_len != b.seq_len || a.op.index() != b.op.index()) return false;
  if (const auto* x = a.block()) return *x == *b.block();
  return false;  // embedding and head are one of a kind
}

}  // namespace

Evaluator::Evaluator(const ModelSpec& model, const ClusterSpec& cluster, const CostModel& cost,
                     FrameworkSpec framework)
    : model_(model),
      cluster_(cluster),
      cost_(cost),
      framework_(std::move(framework)),
      devices_(cluster_devices(cluster)) {
  if (std::string problem = framework_problem(framework_); !problem.empty())
    throw InputError(framework_.origin, "", problem);
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    int64_t canonical = static_cast<int64_t>(i);
    for (size_t j = 0; j < i; ++j)
      if (canonical_layer_[j] == static_cast<int64_t>(j) &&
          same_layer(model_.layers[j], model_.layers[i])) {
        canonical = static_cast<int64_t>(j);
        break;
      }
    canonical_layer_.push_back(canonical);
  }
}

namespace {

// The share of each block that recomputes under full recomputation of the first N blocks of every
// (virtual) stage: N of the blocks an even split gives a stage (1: every block).
double recompute_share(const ModelSpec& model, const Strategy& s) {
  if (s.recompute != Recompute::kFull || s.recompute_num_layers <= 0) return 1;
  const int64_t stages = s.pp * s.chunks_per_device();
  const int64_t per_stage = (model.num_blocks() + stages - 1) / std::max<int64_t>(stages, 1);
  return std::min(1.0, static_cast<double>(s.recompute_num_layers) /
                           static_cast<double>(std::max<int64_t>(per_stage, 1)));
}

// A block of which `share` recomputes in full and the rest keeps its activations: the stage's sum
// over identical blocks is N recomputed ones and the rest plain, what Megatron-Core's block method
// runs (exactly where the blocks are alike and the split is even).
LayerCost blended(const LayerCost& full, const LayerCost& none, double share) {
  const auto mix = [share](double a, double b) { return share * a + (1 - share) * b; };
  LayerCost c = full;
  for (int p = 0; p < kNumPasses; ++p) {
    c.times.pass_s[p] = mix(full.times.pass_s[p], none.times.pass_s[p]);
    c.times.tp_comm_s[p] = mix(full.times.tp_comm_s[p], none.times.tp_comm_s[p]);
    for (int k = 0; k < kNumCommScopes; ++k)
      c.times.comm_s[k][p] = mix(full.times.comm_s[k][p], none.times.comm_s[k][p]);
  }
  c.times.recompute_s = mix(full.times.recompute_s, none.times.recompute_s);
  c.times.host_sync_s = mix(full.times.host_sync_s, none.times.host_sync_s);
  c.activation_bytes = mix(full.activation_bytes, none.activation_bytes);
  c.transient_bytes = std::max(full.transient_bytes, none.transient_bytes);
  c.kernel_launches = mix(full.kernel_launches, none.kernel_launches);
  c.host_s = mix(full.host_s, none.host_s);
  return c;
}

}  // namespace

const std::vector<LayerCost>& Evaluator::layer_costs(int64_t group, int64_t tp_nodes,
                                                     const Strategy& s) const {
  const double share = recompute_share(model_, s);
  if (share >= 1 && s.recompute_num_layers > 0) {  // every block of a stage: plain full
    Strategy all = s;
    all.recompute_num_layers = 0;
    return layer_costs(group, tp_nodes, all);
  }
  const bool moe = model_.is_moe();
  const CacheKey key{group,
                     tp_nodes,
                     s.micro_batch,
                     s.tp,
                     s.cp,
                     moe ? s.ep : 1,
                     moe ? s.expert_tp() : s.tp,
                     s.cp_comm == CpComm::kA2aP2p ? s.cp_a2a : 0,
                     s.sequence_parallel && s.tp > 1,
                     static_cast<int>(s.recompute),
                     static_cast<uint32_t>(s.recomputation().modules),
                     s.flash_attention,
                     s.zero >= 3,
                     s.grad_accumulation_fusion,
                     s.tp_comm_overlap,
                     moe && s.ep_comm_overlap,
                     static_cast<int>(s.host_mode),
                     s.cp > 1 ? static_cast<int>(s.cp_comm) : 0,
                     moe ? static_cast<int>(s.moe_dispatcher) : 0,
                     static_cast<int>(s.precision),
                     moe ? s.moe_imbalance : 1.0,
                     framework_.param_precision == ParamPrecision::kAutocast ? s.microbatches() : 0,
                     share,
                     s.lora.rank,
                     s.lora.enabled() ? s.lora.targets : 0};
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  }
  if (share < 1) {
    Strategy full = s, none = s;
    full.recompute_num_layers = 0;
    none.recompute_num_layers = 0;
    none.recompute = Recompute::kNone;
    const std::vector<LayerCost>& f = layer_costs(group, tp_nodes, full);
    const std::vector<LayerCost>& n = layer_costs(group, tp_nodes, none);
    auto costs = std::make_unique<std::vector<LayerCost>>(f);
    for (size_t i = 0; i < costs->size(); ++i)
      if (model_.layers[i].block()) (*costs)[i] = blended(f[i], n[i], share);
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto [it, inserted] = cache_.emplace(key, std::move(costs));
    return *it->second;
  }
  // Computed outside the lock; a second thread computing the same entry wastes a little time but
  // inserts an identical value, and the first insert wins.
  const NodeGroup& ng = cluster_.groups[group];
  const GpuSpec& gpu = ng.node.gpu;
  const Dtype dtype = cost_.compute_dtype(gpu, model_.dtype);
  const LayerGroups groups = representative_groups(group, tp_nodes, s);
  auto costs = std::make_unique<std::vector<LayerCost>>(model_.layers.size());
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    const size_t c = static_cast<size_t>(canonical_layer_[i]);
    (*costs)[i] = c < i ? (*costs)[c]
                        : eval::cost_layer(model_.layers[i], s, gpu, groups, cost_, dtype,
                                           framework_, host_costs(gpu, s.host_mode));
    // Coefficients read in range give finite times; this names the files if some did not.
    for (int p = 0; p < kNumPasses; ++p)
      if (const double t = (*costs)[i].times.pass_s[p]; !(std::isfinite(t) && t >= 0)) {
        // A profile read from a file is named with its key; a fit made in this run, by the
        // calibration files it was made from.
        const GpuFit& fit = cost_.fit(gpu);
        const std::string origin = !fit.read_from.empty() ? fit.read_from
                                   : fit.origins.empty()
                                       ? std::string("the calibration")
                                       : fmt::format("{}", fmt::join(fit.origins, ", "));
        throw InputError(
            origin, fit.read_from.empty() ? "" : fit.read_key,
            fmt::format("layer {} ({}) takes {} s in its {} pass on {} by these coefficients: "
                        "expected a finite time >= 0 (a coefficient out of range?)",
                        i, model_.layers[i].name, t, to_string(static_cast<Pass>(p)), gpu.name));
      }
  }
  std::lock_guard<std::mutex> lock(cache_mutex_);
  auto [it, inserted] = cache_.emplace(key, std::move(costs));
  return *it->second;
}

std::vector<LayerOps> Evaluator::layer_ops(int64_t group, const Strategy& s) const {
  const NodeGroup& ng = cluster_.groups.at(static_cast<size_t>(group));
  const GpuSpec& gpu = ng.node.gpu;
  const Dtype dtype = cost_.compute_dtype(gpu, model_.dtype);
  const int64_t tp_nodes = (s.tp + ng.node.gpus - 1) / ng.node.gpus;
  const LayerGroups groups = representative_groups(group, tp_nodes, s);
  const std::vector<LayerCost>& costs = layer_costs(group, tp_nodes, s);
  std::vector<LayerOps> out;
  std::map<int64_t, size_t> index;  // canonical layer -> its entry
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    const int64_t c = canonical_layer_[i];
    if (auto it = index.find(c); it != index.end()) {
      ++out[it->second].count;
      continue;
    }
    index.emplace(c, out.size());
    const LayerWork w = eval::layer_work_under(model_.layers[i], s, gpu, cost_, dtype, framework_);
    out.push_back({static_cast<int64_t>(i), 1,
                   op_times(cost_, gpu, w, groups, dtype, s.recomputation()), costs[i]});
  }
  return out;
}

LayerGroups Evaluator::representative_groups(int64_t group, int64_t tp_nodes,
                                             const Strategy& s) const {
  const NodeGroup& ng = cluster_.groups[group];
  int64_t first = 0;
  for (int64_t g = 0; g < group; ++g)
    first += cluster_.groups[g].count * cluster_.groups[g].node.gpus;
  // The tensor-parallel group: tp devices over tp_nodes nodes.
  std::vector<int64_t> tp_devices;
  const int64_t per_node = (s.tp + tp_nodes - 1) / tp_nodes;
  if (tp_nodes > ng.count || per_node > ng.node.gpus)
    throw std::logic_error(fmt::format("layer_costs: tp {} over {} nodes does not fit {} x {}",
                                       s.tp, tp_nodes, ng.count, ng.node.name));
  for (int64_t i = 0; i < s.tp; ++i)
    tp_devices.push_back(first + (i / per_node) * ng.node.gpus + i % per_node);
  LayerGroups groups(make_comm_group(cluster_, devices_, tp_devices));
  // The others over a pipeline rank's devices laid out in a row on this node kind (tp fastest,
  // then cp; for the experts etp fastest, then ep): `ranks` of them `stride` apart.
  const int64_t kind_gpus = ng.count * ng.node.gpus;
  const auto row = [&](int64_t ranks, int64_t stride) {
    return strided_group(first, ranks, stride, 1, kind_gpus);
  };
  if (s.cp > 1) groups.context = row(s.cp, s.tp);
  if (s.ep > 1) groups.expert = row(s.ep, s.expert_tp());
  groups.expert_tensor = s.expert_tp() == s.tp ? groups.tensor : row(s.expert_tp(), 1);
  return groups;
}

CommGroup Evaluator::strided_group(int64_t first, int64_t ranks, int64_t stride, int64_t sharing,
                                   int64_t span) const {
  const auto key = std::make_tuple(first, ranks, stride, sharing, span);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = strided_groups_.find(key); it != strided_groups_.end()) return it->second;
  }
  std::vector<int64_t> members;
  for (int64_t k = 0; k < ranks; ++k)
    members.push_back(first + (span > 0 ? (k * stride) % span : k * stride));
  const CommGroup g = make_comm_group(cluster_, devices_, members, sharing);
  std::lock_guard<std::mutex> lock(cache_mutex_);
  return strided_groups_.emplace(key, g).first->second;
}

std::optional<RuleViolation> Evaluator::broken_rule(const Strategy& s) const {
  return first_broken_rule({model_, framework_, static_cast<int64_t>(devices_.size()), &cluster_},
                           s);
}

double Evaluator::host_s_per_kernel(const GpuSpec& gpu, HostMode mode) const {
  if (mode == HostMode::kEager)
    if (const double measured = cost_.fit(gpu).host_s_per_kernel; measured > 0) return measured;
  const auto it = framework_.host_s_per_kernel.find(mode);
  // The framework's figure is an x86 host's; a GPU that comes with another host scales it.
  return it == framework_.host_s_per_kernel.end() ? 0.0 : it->second * gpu.host_cost_factor;
}

std::vector<double> Evaluator::stage_peaks(const Strategy& s) const {
  const int64_t P = s.pp, v = s.chunks_per_device(), S = P * v, m = s.microbatches();
  const auto key = std::make_tuple(s.schedule, P, m, v);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = peaks_.find(key); it != peaks_.end()) return it->second;
  }
  pipeline::PipelineProblem probe;
  probe.devices = static_cast<int>(P);
  probe.microbatches = static_cast<int>(m);
  probe.chunks = static_cast<int>(v);
  probe.interleaved = interleaved_order();
  probe.record_timeline = false;
  probe.forward_s = probe.backward_input_s = {1.0};
  probe.backward_weight_s = {pipeline::schedule_info(s.schedule).splits_backward ? 1.0 : 0.0};
  probe.p2p_s = {0.0};
  // One chunk's stages at a time carry one byte per activation: the peak bytes are then that
  // chunk's peak count. Their sum bounds the device's peak, which may fall at another moment.
  std::vector<double> peaks(S, 0);
  for (int64_t chunk = 0; chunk < v; ++chunk) {
    probe.activation_bytes.assign(S, 0);
    for (int64_t j = chunk * P; j < (chunk + 1) * P; ++j) probe.activation_bytes[j] = 1;
    const pipeline::PipelineResult r = pipeline::estimate(s.schedule, probe);
    for (int64_t j = chunk * P; j < (chunk + 1) * P; ++j)
      peaks[j] = r.peak_activation_bytes[s.rank_of_virtual_stage(j)];
  }
  std::lock_guard<std::mutex> lock(cache_mutex_);
  return peaks_.emplace(key, std::move(peaks)).first->second;
}

// A pipeline of the steps of search/eval/steps.h: each takes what the ones before produced.
Prediction Evaluator::predict(const Strategy& input, const PredictOptions& options) const {
  if (const auto broken = broken_rule(input))
    return infeasible(Infeasible::kRule, broken->reason, broken->code);
  if (input.has_replicas()) return eval::predict_replicas(*this, input, options);
  const Strategy& s = input;
  std::string problem;
  const eval::Placement placement = eval::place(*this, s, options.placement_checked, problem);
  if (!problem.empty()) return infeasible(Infeasible::kPlacement, problem);
  eval::Notes notes;
  const std::vector<eval::Rank> ranks = eval::resolve_ranks(*this, s, placement, notes);

  pipeline::PipelineProblem base;
  base.devices = static_cast<int>(s.pp);
  base.microbatches = static_cast<int>(s.microbatches());
  base.chunks = static_cast<int>(s.chunks_per_device());
  base.interleaved = interleaved_order();
  base.record_timeline = false;
  eval::PartitionOutcome part = eval::partition(*this, s, placement, ranks, base, options);
  if (part.infeasible) return std::move(*part.infeasible);

  const eval::StageTimes times = eval::stage_times(*this, s, placement, ranks, part.ranges, base);
  const pipeline::PipelineResult pipe = pipeline::estimate(s.schedule, times.problem);
  if (!pipe.feasible) return infeasible(Infeasible::kSchedule, pipe.reason);

  Prediction out;
  out.notes = notes.take();
  const eval::Synchronisation sync = eval::synchronise(*this, s, placement, ranks, times);
  const std::vector<MemoryBreakdown> memory = eval::rank_memory(*this, s, ranks, times, pipe, out);
  const eval::HostFloor host = eval::host_floor(*this, s, placement, ranks, part.ranges, times);
  eval::summarise(*this, s, placement, times, pipe, sync, host, out);
  out.stages = times.stages;
  for (size_t j = 0; j < out.stages.size(); ++j) {
    const int64_t d = placement.rank_of_stage[j];
    out.stages[j].dp_sync_s = sync.sync_s[d];
    out.stages[j].optimizer_s = sync.optimizer_s[d];
    out.stages[j].in_flight = pipe.peak_activation[d];
    out.stages[j].memory = memory[d];
  }
  return out;
}

}  // namespace hetplan
