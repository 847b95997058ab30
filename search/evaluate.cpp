#include "search/evaluate.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "search/partition.h"
#include "search/pipeline_timing.h"

namespace hetplan {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

LayerShape layer_shape(const Strategy& s, Dtype dtype) {
  LayerShape shape;
  shape.micro_batch = s.micro_batch;
  shape.tp = s.tp;
  shape.sequence_parallel = s.sequence_parallel && s.tp > 1;
  shape.flash_attention = s.flash_attention;
  shape.dtype = dtype;
  return shape;
}

LayerCost cost_layer(const LayerSpec& layer, const Strategy& s, const GpuSpec& gpu,
                     const CommGroup& tp, const CostModel& cost, Dtype dtype) {
  const LayerWork w = layer_work(layer, layer_shape(s, dtype));
  LayerCost c;
  c.times = cost.layer_times(gpu, w, s.recompute, tp, dtype);
  c.activation = w.activation(s.recompute);
  c.params = static_cast<double>(w.params);
  c.output_bytes = w.output_bytes;
  // Recomputed activations live while the layer's backward runs; gradients of the layer's input
  // and output are in flight (one rank's share under sequence parallelism).
  const double shard = s.sequence_parallel && s.tp > 1 ? static_cast<double>(s.tp) : 1.0;
  c.transient = w.activation(Recompute::kNone) - c.activation + 2 * w.output_bytes / shard;
  if (const auto* head = layer.head()) {
    // bf16 logits and their gradient exist next to the kept fp32 softmax.
    const double logits = static_cast<double>(s.micro_batch) * layer.seq_len * head->vocab / s.tp;
    c.transient += 2 * logits * dtype_bytes(dtype);
  }
  if (s.zero >= 3) c.transient += 2 * c.params * dtype_bytes(dtype);  // gathered weights
  return c;
}

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

bool same_layer(const LayerSpec& a, const LayerSpec& b) {
  if (a.hidden != b.hidden || a.seq_len != b.seq_len || a.op.index() != b.op.index()) return false;
  if (const auto* x = a.block()) {
    const auto* y = b.block();
    return x->heads == y->heads && x->kv_heads == y->kv_heads && x->head_dim == y->head_dim &&
           x->ffn_hidden == y->ffn_hidden && x->activation == y->activation &&
           x->norm == y->norm && x->bias == y->bias && x->rotary == y->rotary &&
           x->causal == y->causal && x->dropout == y->dropout && x->experts == y->experts &&
           x->top_k == y->top_k;
  }
  return false;  // embedding and head are one of a kind
}

}  // namespace

Evaluator::Evaluator(const ModelSpec& model, const ClusterSpec& cluster, const CostModel& cost)
    : model_(model), cluster_(cluster), cost_(cost), devices_(cluster_devices(cluster)) {
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    int64_t canonical = static_cast<int64_t>(i);
    for (size_t j = 0; j < i; ++j)
      if (canonical_layer_[j] == static_cast<int64_t>(j) && same_layer(model_.layers[j], model_.layers[i])) {
        canonical = static_cast<int64_t>(j);
        break;
      }
    canonical_layer_.push_back(canonical);
  }
}

const std::vector<LayerCost>& Evaluator::layer_costs(int64_t group, int64_t tp_nodes,
                                                     const Strategy& s) const {
  const CacheKey key{group, tp_nodes, s.micro_batch, s.tp, s.sequence_parallel && s.tp > 1,
                     static_cast<int>(s.recompute), s.flash_attention, s.zero >= 3};
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
  }
  // Computed outside the lock; a second thread computing the same entry wastes a little time but
  // inserts an identical value, and the first insert wins.
  const NodeGroup& ng = cluster_.groups[group];
  const GpuSpec& gpu = ng.node.gpu;
  const Dtype dtype = cost_.compute_dtype(gpu, model_.dtype);
  // A representative tensor-parallel group on this node kind: tp devices over tp_nodes nodes.
  int64_t first = 0;
  for (int64_t g = 0; g < group; ++g) first += cluster_.groups[g].count * cluster_.groups[g].node.gpus;
  std::vector<int64_t> tp_devices;
  const int64_t per_node = (s.tp + tp_nodes - 1) / tp_nodes;
  for (int64_t i = 0; i < s.tp; ++i)
    tp_devices.push_back(first + (i / per_node) * ng.node.gpus + i % per_node);
  const CommGroup tp = make_comm_group(cluster_, devices_, tp_devices);
  auto costs = std::make_unique<std::vector<LayerCost>>(model_.layers.size());
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    const size_t c = static_cast<size_t>(canonical_layer_[i]);
    (*costs)[i] = c < i ? (*costs)[c] : cost_layer(model_.layers[i], s, gpu, tp, cost_, dtype);
  }
  std::lock_guard<std::mutex> lock(cache_mutex_);
  auto [it, inserted] = cache_.emplace(key, std::move(costs));
  return *it->second;
}

const GpuSpec& Evaluator::gpu_of(const StageSpec& st) const {
  return cluster_.groups[devices_[st.devices.front()].group].node.gpu;
}

std::string Evaluator::structural_problem(const Strategy& s, std::string& code) const {
  const int64_t layers = static_cast<int64_t>(model_.layers.size());
  if (s.microbatches() == 0) {
    code = "batch";
    return fmt::format("global batch {} is not a multiple of dp x micro_batch = {} x {}",
                       s.global_batch, s.dp, s.micro_batch);
  }
  if (s.devices() > static_cast<int64_t>(devices_.size())) {
    code = "devices";
    return fmt::format("dp x tp x pp = {} GPUs, the cluster has {}", s.devices(), devices_.size());
  }
  if (std::string p = tensor_parallel_problem(model_, s.tp); !p.empty()) {
    code = "tp";
    return p;
  }
  if (s.pp > layers) {
    code = "pp";
    return fmt::format("pp {} exceeds the model's {} layers", s.pp, layers);
  }
  if (s.zero >= 2 && s.pp > 1) {
    code = "zero";
    return fmt::format("ZeRO-{} with pipeline parallelism is supported by neither Megatron-LM "
                       "nor DeepSpeed (ZeRO-1 is)", s.zero);
  }
  if (!is_pipeline_schedule(s.schedule))
    throw InputError(fmt::format("unknown schedule \"{}\"", s.schedule));
  return "";
}

std::string Evaluator::place(Strategy& s) const {
  const int64_t per_stage = s.dp * s.tp;
  const int64_t L = static_cast<int64_t>(model_.layers.size());
  if (s.stages.empty()) {
    s.stages.resize(s.pp);
    for (int64_t st = 0; st < s.pp; ++st)
      for (int64_t i = 0; i < per_stage; ++i) s.stages[st].devices.push_back(st * per_stage + i);
  }
  std::set<int64_t> used;
  for (size_t st = 0; st < s.stages.size(); ++st) {
    StageSpec& stage = s.stages[st];
    if (stage.devices.empty()) {
      // Take free devices of the stage's GPU type, in cluster order.
      for (const Device& d : devices_) {
        if (static_cast<int64_t>(stage.devices.size()) == per_stage) break;
        const auto& type = cluster_.groups[d.group].node.gpu.name;
        if (!used.count(d.index) && (stage.gpu_type.empty() || type == stage.gpu_type))
          stage.devices.push_back(d.index);
      }
      if (static_cast<int64_t>(stage.devices.size()) != per_stage)
        return fmt::format("stage {} needs {} free {} GPUs, the cluster has fewer", st, per_stage,
                           stage.gpu_type.empty() ? "" : stage.gpu_type);
    }
    if (static_cast<int64_t>(stage.devices.size()) != per_stage)
      throw InputError(fmt::format("stage {} lists {} devices; dp x tp = {}", st,
                                   stage.devices.size(), per_stage));
    std::set<std::string> types;
    for (int64_t d : stage.devices) {
      if (d >= static_cast<int64_t>(devices_.size()))
        throw InputError(fmt::format("stage {} uses device {}; the cluster has {} devices (0-{})", st,
                                     d, devices_.size(), devices_.size() - 1));
      if (!used.insert(d).second)
        throw InputError(fmt::format("device {} is used by two stages or twice in one", d));
      types.insert(cluster_.groups[devices_[d].group].node.gpu.name);
    }
    if (types.size() > 1)
      return fmt::format("stage {} spans GPU types {} and {}: each stage must run on one type", st,
                         *types.begin(), *types.rbegin());
    if (!stage.gpu_type.empty() && stage.gpu_type != *types.begin())
      throw InputError(fmt::format("stage {} says gpu_type {} but its devices are {}", st,
                                   stage.gpu_type, *types.begin()));
    stage.gpu_type = *types.begin();
  }
  // Layer ranges: given ones must tile the model; else the partition fills them in later.
  const auto has_layers = [](const StageSpec& st) { return st.first_layer >= 0; };
  const bool given = std::any_of(s.stages.begin(), s.stages.end(), has_layers);
  if (given && !std::all_of(s.stages.begin(), s.stages.end(), has_layers))
    throw InputError("give layers for every stage or for none (then the partition chooses them)");
  if (given) {
    int64_t next = 0;
    for (size_t st = 0; st < s.stages.size(); ++st) {
      if (s.stages[st].first_layer != next)
        throw InputError(fmt::format("stage {} starts at layer {}; expected {} (stages must hold "
                                     "contiguous layers in order)", st, s.stages[st].first_layer,
                                     next));
      next = s.stages[st].last_layer + 1;
    }
    if (next != L)
      throw InputError(fmt::format("the stages end at layer {}; the model has layers 0-{}",
                                   next - 1, L - 1));
  }
  return "";
}

Prediction Evaluator::predict(const Strategy& input) const {
  std::string code;
  if (std::string problem = structural_problem(input, code); !problem.empty())
    return infeasible(code, problem);
  Strategy s = input;
  if (std::string problem = place(s); !problem.empty()) return infeasible("placement", problem);
  const int64_t P = s.pp, m = s.microbatches();
  Prediction out;

  // Per stage: its GPU, node kind and every layer's cost there.
  std::vector<const GpuSpec*> gpu(P);
  std::vector<Dtype> dtype(P);
  std::vector<const std::vector<LayerCost>*> stage_costs(P);
  for (int64_t st = 0; st < P; ++st) {
    const Device& lead = devices_[s.stages[st].devices.front()];
    gpu[st] = &cluster_.groups[lead.group].node.gpu;
    dtype[st] = cost_.compute_dtype(*gpu[st], model_.dtype);
    if (dtype[st] != model_.dtype) {
      const std::string note = fmt::format("{} runs as {} on {}", to_string(model_.dtype),
                                           to_string(dtype[st]), gpu[st]->name);
      if (std::find(out.notes.begin(), out.notes.end(), note) == out.notes.end())
        out.notes.push_back(note);
    }
    std::vector<int64_t> tp_devices(s.stages[st].devices.begin(),
                                    s.stages[st].devices.begin() + s.tp);
    const CommGroup tp = make_comm_group(cluster_, devices_, tp_devices);
    stage_costs[st] = &layer_costs(lead.group, tp.nodes, s);
  }

  // Layer partition when the strategy leaves it open: fastest slowest stage under memory limits.
  const PipelineTiming probe = pipeline_timing(s.schedule, m, s.chunks,
                                               StageTimes{std::vector<double>(P, 1),
                                                          std::vector<double>(P, 1),
                                                          std::vector<double>(P, 0),
                                                          std::vector<double>(P - 1, 0)});
  if (s.stages.back().last_layer < 0) {
    PartitionInput in;
    for (int64_t st = 0; st < P; ++st) {
      std::vector<double> t, stat, act, tr;
      for (const auto& c : *stage_costs[st]) {
        t.push_back(c.total_s());
        stat.push_back(device_memory({c.params, s.dp, s.zero, dtype[st], 0, 0, 0}).total());
        act.push_back(c.activation);
        tr.push_back(c.transient);
      }
      in.time_s.push_back(t);
      in.static_bytes.push_back(stat);
      in.activation_bytes.push_back(act);
      in.transient_bytes.push_back(tr);
      in.in_flight.push_back(probe.in_flight[st]);
      const double reserve = cost_.fit(*gpu[st]).context_reserve_bytes > 0
                                 ? cost_.fit(*gpu[st]).context_reserve_bytes
                                 : kDefaultReserveBytes;
      in.limit_bytes.push_back(gpu[st]->memory_bytes - reserve);
    }
    PartitionResult part = partition_layers(in);
    if (!part.feasible) {  // nothing fits: balance time alone and report the memory below
      std::fill(in.limit_bytes.begin(), in.limit_bytes.end(), 1e300);
      part = partition_layers(in);
    }
    for (int64_t st = 0; st < P; ++st) {
      s.stages[st].first_layer = part.ranges[st].first;
      s.stages[st].last_layer = part.ranges[st].second;
    }
  }

  // Stage sums for one micro-batch.
  StageTimes times;
  std::vector<StagePrediction> stages(P);
  std::vector<double> activation(P), transient(P), params(P);
  for (int64_t st = 0; st < P; ++st) {
    StagePrediction& sp = stages[st];
    sp.stage = s.stages[st];
    const auto& costs = *stage_costs[st];
    for (int64_t i = sp.stage.first_layer; i <= sp.stage.last_layer; ++i) {
      const LayerCost& c = costs[i];
      sp.forward_s += c.times.pass_s[0];
      sp.backward_input_s += c.times.pass_s[1];
      sp.backward_weight_s += c.times.pass_s[2];
      sp.tp_comm_s += c.times.tp_comm_s[0] + c.times.tp_comm_s[1] + c.times.tp_comm_s[2];
      sp.recompute_s += c.times.recompute_s;
      activation[st] += c.activation;
      transient[st] = std::max(transient[st], c.transient);
      params[st] += c.params;
    }
    if (st + 1 < P) {
      const double bytes = costs[sp.stage.last_layer].output_bytes;
      sp.p2p_s = cost_.p2p_s(bytes, link_between(cluster_, devices_[sp.stage.devices.front()],
                                                 devices_[s.stages[st + 1].devices.front()]));
      times.p2p_s.push_back(sp.p2p_s);
      transient[st] += 2 * bytes;  // send and receive buffers
    }
    // ZeRO-3 gathers the stage's weights before every forward and backward.
    if (s.zero >= 3 && s.dp > 1) {
      std::vector<int64_t> dp_devices;
      for (int64_t r = 0; r < s.dp; ++r) dp_devices.push_back(sp.stage.devices[r * s.tp]);
      const CommGroup g = make_comm_group(cluster_, devices_, dp_devices, s.tp);
      const double gather = cost_.collective_s(CollectiveKind::kAllGather,
                                               params[st] * dtype_bytes(dtype[st]), g);
      sp.forward_s += gather;
      sp.backward_input_s += gather;
    }
    times.forward_s.push_back(sp.forward_s);
    times.backward_input_s.push_back(sp.backward_input_s);
    times.backward_weight_s.push_back(sp.backward_weight_s);
  }

  const PipelineTiming pipe = pipeline_timing(s.schedule, m, s.chunks, times);
  if (!pipe.feasible) return infeasible("schedule", pipe.reason);

  // Tied embeddings across stages: their gradients are summed between the first and last stage.
  double tied_sync = 0;
  const LayerSpec& head_layer = model_.layers.back();
  if (P > 1 && head_layer.head() && head_layer.head()->tied) {
    const double bytes = static_cast<double>(head_layer.head()->vocab) * head_layer.hidden / s.tp * 4;
    tied_sync = cost_.collective_s(
        CollectiveKind::kAllReduce, bytes,
        make_comm_group(cluster_, devices_,
                        {s.stages.front().devices.front(), s.stages.back().devices.front()}));
  }

  // Data-parallel gradient synchronisation and the optimizer step, after the pipeline drains.
  double tail = 0;
  int64_t tail_stage = 0;
  std::vector<double> exposed(P);
  for (int64_t st = 0; st < P; ++st) {
    StagePrediction& sp = stages[st];
    double reduce = 0, gather = 0;
    if (s.dp > 1) {
      std::vector<int64_t> dp_devices;
      for (int64_t r = 0; r < s.dp; ++r) dp_devices.push_back(sp.stage.devices[r * s.tp]);
      const CommGroup g = make_comm_group(cluster_, devices_, dp_devices, s.tp);
      const double grad_bytes = params[st] * 4;  // fp32 main gradients
      if (s.zero == 0) {
        reduce = cost_.collective_s(CollectiveKind::kAllReduce, grad_bytes, g);
      } else {
        reduce = cost_.collective_s(CollectiveKind::kReduceScatter, grad_bytes, g);
        if (s.zero < 3)
          gather = cost_.collective_s(CollectiveKind::kAllGather,
                                      params[st] * dtype_bytes(dtype[st]), g);
      }
    }
    if (st == 0 || st == P - 1) reduce += tied_sync;
    sp.dp_sync_s = reduce + gather;
    // Gradient buckets are reduced while the last micro-batch's backward still runs (Megatron-LM
    // --overlap-grad-reduce, PyTorch DDP); the parameter gather after the step is not hidden.
    exposed[st] = std::max(0.0, reduce - (sp.backward_input_s + sp.backward_weight_s)) + gather;
    sp.optimizer_s = cost_.optimizer_s(*gpu[st], params[st] / (s.zero >= 1 ? s.dp : 1));
    sp.in_flight = static_cast<int64_t>(pipe.in_flight[st]);
    if (exposed[st] + sp.optimizer_s > tail) {
      tail = exposed[st] + sp.optimizer_s;
      tail_stage = st;
    }
  }

  // Memory per device of each stage.
  for (int64_t st = 0; st < P; ++st) {
    StagePrediction& sp = stages[st];
    MemoryInput mem;
    mem.params = params[st];
    mem.dp = s.dp;
    mem.zero = s.zero;
    mem.dtype = dtype[st];
    mem.activations = pipe.in_flight[st] * activation[st];
    mem.transient = transient[st];
    const double reserve = cost_.fit(*gpu[st]).context_reserve_bytes;
    mem.reserve = reserve > 0 ? reserve : kDefaultReserveBytes;
    sp.memory = device_memory(mem);
    out.peak_memory_bytes.push_back(sp.memory.total());
    if (out.feasible && sp.memory.total() > gpu[st]->memory_bytes) {
      out.feasible = false;
      out.reason_code = "memory";
      out.reason = fmt::format("stage {} ({}) needs {:.1f} GiB per GPU, {} has {:.1f} GiB "
                               "(weights+grads+optimizer {:.1f}, activations {:.1f} for {} "
                               "micro-batches, transient {:.1f}, reserve {:.1f})",
                               st, s.stages[st].gpu_type, sp.memory.total() / kGiB, gpu[st]->name,
                               gpu[st]->memory_bytes / kGiB,
                               (sp.memory.weights + sp.memory.gradients + sp.memory.optimizer) / kGiB,
                               sp.memory.activations / kGiB, sp.in_flight,
                               sp.memory.transient / kGiB, sp.memory.reserve / kGiB);
    }
  }

  // Totals and the breakdown (named parts that sum to the iteration time).
  out.iteration_s = pipe.makespan_s + tail;
  out.samples_per_s = static_cast<double>(s.global_batch) / out.iteration_s;
  out.tokens_per_s = out.samples_per_s * static_cast<double>(model_.seq_len);
  double peak = 0;
  for (int64_t st = 0; st < P; ++st) peak += gpu[st]->peak_flops(dtype[st]) * s.dp * s.tp;
  out.mfu = model_flops_per_sample(model_) * static_cast<double>(s.global_batch) /
            (out.iteration_s * peak);
  out.bubble_rate = pipe.bubble_rate;
  int64_t crit = 0;
  for (int64_t st = 1; st < P; ++st)
    if (times.forward_s[st] + times.backward_input_s[st] + times.backward_weight_s[st] >
        times.forward_s[crit] + times.backward_input_s[crit] + times.backward_weight_s[crit])
      crit = st;
  const double cycle = times.forward_s[crit] + times.backward_input_s[crit] +
                       times.backward_weight_s[crit];
  const double p2p_fill = 2 * sum(times.p2p_s);
  out.breakdown = {
      {"compute", static_cast<double>(m) * (cycle - stages[crit].tp_comm_s)},
      {"tp_comm", static_cast<double>(m) * stages[crit].tp_comm_s},
      {"pp_p2p", p2p_fill},
      {"pp_bubble", pipe.makespan_s - static_cast<double>(m) * cycle - p2p_fill},
      {"dp_sync", exposed[tail_stage]},
      {"optimizer", stages[tail_stage].optimizer_s},
  };
  out.stages = std::move(stages);
  return out;
}

}  // namespace hetplan
