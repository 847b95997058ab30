// A prediction of a strategy whose stages hold replica groups (search/replicas.h). Pipeline g
// (group g of every stage) runs the steps of a uniform strategy, each stage at its group's tensor
// width on its GPU type, over the group's micro-batches; the step waits for the slowest pipeline.
// Each stage's gradients are then all-reduced over every replica of all its groups, in slices of
// the stage's widest tensor width, as Sailor's runtime does (docs/costmodel.md, "Replica groups").
#include <algorithm>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "search/eval/steps.h"
#include "search/pipeline/schedule.h"
#include "search/replicas.h"

namespace hetplan::eval {
namespace {

// Pipeline g through steps 2-6 and 8-9.
struct GroupPipeline {
  std::vector<Strategy> at;  // per stage: group g as a uniform strategy (group_strategy)
  Placement placement;
  std::vector<Rank> ranks;
  StageTimes times;
  pipeline::PipelineResult result;
  HostFloor host;
};

// Step 2 for pipeline g: the groups' devices, in range and of the GPU type they name.
Placement place_group(const Evaluator& ev, const Strategy& s, size_t g) {
  Placement p;
  const auto& devices = ev.devices();
  for (size_t k = 0; k < s.stages.size(); ++k) {
    const ReplicaGroup& r = s.stages[k].replicas[g];
    for (int64_t d : r.devices) {
      if (d >= static_cast<int64_t>(devices.size()))
        throw InputError(
            fmt::format("stage {} group {} uses device {}; the cluster has {} "
                        "devices (0-{})",
                        k, g, d, devices.size(), devices.size() - 1));
      const std::string& type = ev.cluster().groups[devices[d].group].node.gpu.name;
      if (type != r.gpu_type)
        throw InputError(fmt::format("stage {} group {} says gpu_type {} but device {} is a {}", k,
                                     g, r.gpu_type, d, type));
    }
    p.groups.push_back(r.devices);
    p.rank_of_stage.push_back(static_cast<int64_t>(k));
  }
  p.ranges = given_ranges(s, static_cast<int64_t>(ev.model().layers.size()));
  return p;
}

// Steps 3 and 5 (each stage's rank resolved at its own group's width), 6 and 9 for pipeline g.
GroupPipeline run_pipeline(const Evaluator& ev, const Strategy& s, size_t g, Notes& notes) {
  GroupPipeline out;
  out.placement = place_group(ev, s, g);
  for (size_t k = 0; k < s.stages.size(); ++k) {
    out.at.push_back(group_strategy(s, k, g));
    Placement one;
    one.groups = {out.placement.groups[k]};
    out.ranks.push_back(std::move(resolve_ranks(ev, out.at[k], one, notes).front()));
  }
  pipeline::PipelineProblem base;
  base.devices = static_cast<int>(s.pp);
  base.microbatches = static_cast<int>(out.at[0].microbatches());
  base.chunks = 1;
  base.record_timeline = false;
  out.times = stage_times(ev, out.at[0], out.placement, out.ranks, out.placement.ranges, base);
  out.result = pipeline::estimate(s.schedule, out.times.problem);
  out.host = host_floor(ev, out.at[0], out.placement, out.ranks, out.placement.ranges, out.times);
  return out;
}

// One stage's gradient synchronisation over its groups, as Sailor's runtime runs it.
struct StageSync {
  int64_t slices = 1;  // the stage's widest tp T: its gradients reduced in T slices
  int64_t rounds = 1;  // slice all-reduces a device of the narrowest group runs in turn: T / w
  double round_s = 0;  // one round: w slices at once, each over every replica of the stage
  double total_s = 0;  // rounds x round_s
};

double grad_bytes_per_param(const Strategy& s, const Rank& r) {
  return s.fp32_grad_reduce ? 4.0 : dtype_bytes(r.dtype);
}

// Sailor's DeepSpeed (deepspeed/engine.py at eth-easl/sailor cf2c8e3, allreduce_gradients and
// _broadcast_model) cuts every gradient of a stage at the stage's widest tensor width T and builds
// one data-parallel group per slice, holding the device of every replica whose shard contains it.
// A device at width t holds T / t slices and all-reduces them one after another (blocking
// all-reduces, in 500M-element buckets); the slices' rings need every replica, so the stage runs
// T / w rounds (w: its narrowest width), each of w slice rings at once over all its replicas.
// Each ring moves a widest-group device's gradients: its shard of every split tensor and the whole
// of every replicated one (layer norms, biases: the runtime reduces them in every slice's group,
// `dim_param == -1`). The w rings of a round share a node's network (the w
// devices of a narrow replica, w of a wide one's T). make_comm_group takes the slowest network
// between the ring's nodes, so a ring crossing from A100 to V100 nodes runs at the slower link.
StageSync stage_sync(const Evaluator& ev, const Strategy& s, const std::vector<GroupPipeline>& pl,
                     size_t k) {
  StageSync out;
  int64_t narrowest = pl[0].at[k].tp;
  size_t widest = 0;
  std::vector<int64_t> ring;  // slice 0's ring: the first device of every replica
  for (size_t g = 0; g < pl.size(); ++g) {
    const Strategy& v = pl[g].at[k];
    narrowest = std::min(narrowest, v.tp);
    if (v.tp > pl[widest].at[k].tp) widest = g;
    const std::vector<int64_t>& devices = pl[g].placement.groups[k];
    for (size_t d = 0; d < devices.size(); d += static_cast<size_t>(v.tp))
      ring.push_back(devices[d]);
  }
  out.slices = pl[widest].at[k].tp;
  out.rounds = out.slices / narrowest;
  // What one device of the widest group holds.
  const double slice_bytes =
      trained(pl[widest].times, k) * grad_bytes_per_param(s, pl[widest].ranks[k]);
  out.round_s =
      ev.cost().collective_s(CollectiveKind::kAllReduce, slice_bytes,
                             make_comm_group(ev.cluster(), ev.devices(), ring, narrowest));
  out.total_s = static_cast<double>(out.rounds) * out.round_s;
  return out;
}

// Tied embeddings on the first and last stage: pipeline g's two ends sum their gradients (the
// slowest pipeline's sum counts), at the narrower end's shard.
double tied_sum_s(const Evaluator& ev, const std::vector<GroupPipeline>& pl) {
  const LayerSpec& last = ev.model().layers.back();
  if (!(last.head() && last.head()->tied) || pl[0].at.size() < 2) return 0;
  double slowest = 0;
  for (const GroupPipeline& p : pl) {
    const int64_t tp = std::min(p.at.front().tp, p.at.back().tp);
    const double bytes = static_cast<double>(last.head()->vocab) * last.hidden / tp * 4;
    const CommGroup ends =
        make_comm_group(ev.cluster(), ev.devices(),
                        {p.placement.groups.front().front(), p.placement.groups.back().front()});
    slowest = std::max(slowest, ev.cost().collective_s(CollectiveKind::kAllReduce, bytes, ends));
  }
  return slowest;
}

// Step 7 over all pipelines: per stage its synchronisation, what of it the slowest pipeline's last
// backward hides, and the optimizer step of its slowest group; the same for every pipeline.
Synchronisation synchronise_stages(const Evaluator& ev, const Strategy& s,
                                   const std::vector<GroupPipeline>& pl, size_t slowest,
                                   std::vector<StageSync>& stages) {
  const size_t P = s.stages.size();
  const double tied = tied_sum_s(ev, pl);
  Synchronisation out;
  out.sync_s.assign(P, 0);
  out.exposed_s.assign(P, 0);
  out.optimizer_s.assign(P, 0);
  for (size_t k = 0; k < P; ++k) {
    stages.push_back(stage_sync(ev, s, pl, k));
    const StagePrediction& last = pl[slowest].times.stages[k];
    const double reduce = stages.back().total_s;
    const double ends = k == 0 || k + 1 == P ? tied : 0.0;
    out.sync_s[k] = reduce + ends;
    out.exposed_s[k] = (s.overlap_grad_reduce
                            ? std::max(0.0, reduce - last.backward_input_s - last.backward_weight_s)
                            : reduce) +
                       ends;
    for (const GroupPipeline& p : pl)
      out.optimizer_s[k] =
          std::max(out.optimizer_s[k], ev.cost().optimizer_s(*p.ranks[k].gpu, trained(p.times, k)));
    if (out.exposed_s[k] + out.optimizer_s[k] > out.tail_s) {
      out.tail_s = out.exposed_s[k] + out.optimizer_s[k];
      out.tail_rank = static_cast<int64_t>(k);
    }
  }
  return out;
}

// Per stage and group: its figures and memory (step 8, at its own width and micro-batch, with the
// stage's data-parallel communicator); the first group over its GPU's memory makes `out`
// infeasible.
void group_figures(const Evaluator& ev, const Strategy& s, const std::vector<GroupPipeline>& pl,
                   const std::vector<StageSync>& sync, Prediction& out) {
  out.peak_memory_bytes.assign(s.stages.size(), 0);
  std::string overflow;
  for (size_t k = 0; k < s.stages.size(); ++k)
    for (size_t g = 0; g < pl.size(); ++g) {
      const GroupPipeline& p = pl[g];
      Strategy mem = p.at[k];
      mem.dp = s.dp;  // the stage's replicas share one data-parallel communicator
      GroupPrediction gp;
      gp.stage = static_cast<int64_t>(k);
      gp.group = static_cast<int64_t>(g);
      gp.spec = s.stages[k].replicas[g];
      gp.microbatches = p.at[k].microbatches();
      const StagePrediction& st = p.times.stages[k];
      gp.forward_s = st.forward_s;
      gp.backward_input_s = st.backward_input_s;
      gp.backward_weight_s = st.backward_weight_s;
      gp.p2p_s = st.p2p_s;
      gp.pipeline_s = p.result.makespan_s;
      gp.sync_slices = sync[k].slices;
      gp.sync_rounds = sync[k].slices / p.at[k].tp;
      gp.sync_s = sync[k].total_s;
      gp.optimizer_s = ev.cost().optimizer_s(*p.ranks[k].gpu, trained(p.times, k));
      gp.in_flight = p.result.peak_activation.empty() ? 0 : p.result.peak_activation[k];
      gp.memory = rank_memory_of(ev, mem, p.ranks[k], p.times, p.result, k, overflow);
      out.peak_memory_bytes[k] = std::max(out.peak_memory_bytes[k], gp.memory.total());
      if (out.feasible && !overflow.empty()) {
        out.feasible = false;
        out.kind = Infeasible::kMemory;
        out.reason = fmt::format("stage {} group {}: {}", k, g, overflow);
      }
      out.groups.push_back(std::move(gp));
    }
}

// Peak FLOP/s of every device of every group.
double peak_flops_all(const Evaluator& ev, const std::vector<GroupPipeline>& pl) {
  double peak = 0;
  for (const GroupPipeline& p : pl)
    for (const auto& devices : p.placement.groups)
      for (int64_t d : devices) {
        const GpuSpec& gpu = ev.cluster().groups[ev.devices()[d].group].node.gpu;
        peak += gpu.peak_flops(ev.cost().compute_dtype(gpu, ev.model().dtype));
      }
  return peak;
}

}  // namespace

Prediction predict_replicas(const Evaluator& ev, const Strategy& s, const PredictOptions&) {
  if (const auto problem = replicas_problem(s))
    throw InputError(fmt::format("stage {} group {}: {}: {}", problem->stage, problem->group,
                                 problem->key, problem->reason));
  Notes notes;
  std::vector<GroupPipeline> pl;
  for (size_t g = 0; g < replica_pipelines(s); ++g) {
    pl.push_back(run_pipeline(ev, s, g, notes));
    if (!pl.back().result.feasible)
      return infeasible(Infeasible::kSchedule,
                        fmt::format("pipeline {}: {}", g, pl.back().result.reason));
  }
  size_t slowest = 0;
  for (size_t g = 1; g < pl.size(); ++g)
    if (pl[g].result.makespan_s > pl[slowest].result.makespan_s) slowest = g;
  std::vector<StageSync> stage_syncs;
  const Synchronisation sync = synchronise_stages(ev, s, pl, slowest, stage_syncs);
  // Step 10 per pipeline (its breakdown sums to its own step); the slowest one's is the step's.
  Prediction out;
  size_t last = 0;
  std::vector<Prediction> each(pl.size());
  for (size_t g = 0; g < pl.size(); ++g) {
    summarise(ev, pl[g].at[0], pl[g].placement, pl[g].times, pl[g].result, sync, pl[g].host,
              each[g]);
    if (each[g].iteration_s > each[last].iteration_s) last = g;
  }
  out.iteration_s = each[last].iteration_s;
  out.breakdown = each[last].breakdown;
  out.bubble_rate = each[last].bubble_rate;
  out.kernels_per_iteration = each[last].kernels_per_iteration;
  out.host_s = each[last].host_s;
  out.samples_per_s = static_cast<double>(s.global_batch) / out.iteration_s;
  out.tokens_per_s = out.samples_per_s * static_cast<double>(ev.model().seq_len);
  out.mfu = model_flops_per_sample(ev.model(), s.lora) * static_cast<double>(s.global_batch) /
            (out.iteration_s * peak_flops_all(ev, pl));
  group_figures(ev, s, pl, stage_syncs, out);
  // Per stage: the slowest pipeline's passes, with every group's devices and GPU types.
  out.stages = pl[last].times.stages;
  for (size_t k = 0; k < out.stages.size(); ++k) {
    StagePrediction& st = out.stages[k];
    st.stage = s.stages[k];
    st.stage.devices.clear();
    std::vector<std::string> types;
    for (const ReplicaGroup& r : s.stages[k].replicas) {
      st.stage.devices.insert(st.stage.devices.end(), r.devices.begin(), r.devices.end());
      if (std::find(types.begin(), types.end(), r.gpu_type) == types.end())
        types.push_back(r.gpu_type);
    }
    std::sort(types.begin(), types.end());
    for (const auto& t : types) st.stage.gpu_type += (st.stage.gpu_type.empty() ? "" : "+") + t;
    st.dp_sync_s = sync.sync_s[k];
    st.optimizer_s = sync.optimizer_s[k];
    st.in_flight = pl[last].result.peak_activation[k];
    for (const GroupPrediction& gp : out.groups)  // the fullest group's memory
      if (gp.stage == static_cast<int64_t>(k) && gp.memory.total() >= st.memory.total())
        st.memory = gp.memory;
  }
  notes.add(fmt::format(
      "replica groups: {} pipelines, the step waits for pipeline {}; each stage's gradients are "
      "all-reduced over all its replicas in slices of its widest tp, as Sailor's runtime does",
      pl.size(), last));
  out.notes = notes.take();
  return out;
}

}  // namespace hetplan::eval
