#include "search/evaluate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/errors.h"
#include "search/partition.h"
#include "search/pipeline/schedule.h"

namespace hetplan {
namespace {

// The refinement's simulation budget per split, in stages x micro-batches (one simulation costs
// about that many pass triples): 96 simulations for AMP's GPT-2 V-ZB plan (8 stages, 8
// micro-batches), a few for 64 stages and 16 micro-batches, none where one simulation is long.
constexpr int64_t kRefineBudget = 6144;
// What a better split could still gain, as a share of the makespan, below which it is not sought.
constexpr double kRefineMinGain = 0.005;

// The exact V split is used up to this many pipeline ranks x layers^2 (8 ranks of 100 layers);
// its sweeps grow with both. Beyond, with few layers per stage, the local search of
// balance_device_loads and the refinement do. On the dev VM the 1024-GPU GPT-3 search took 26.2 s
// of CPU with no exact split, 28.2 s up to 4 x 100^2, 33.1 s up to this, 55 s with no limit.
constexpr double kExactSplitSize = 8 * 100 * 100;

// Whether stage j runs on device j before the turn and 2P-1-j after it (the V schedules).
bool v_placement(const std::vector<int64_t>& dev) {
  const int64_t S = static_cast<int64_t>(dev.size());
  const int64_t P = *std::max_element(dev.begin(), dev.end()) + 1;
  bool nested = S == 2 * P;
  for (int64_t j = 0; j < S && nested; ++j) nested = dev[j] == (j < P ? j : S - 1 - j);
  return nested;
}

// Several stages per device (interleaved, V family): the busiest device, not the slowest stage,
// bounds the iteration. Of the device-balanced split (exact for the V placement, a local search
// from the stage-balanced one otherwise) and the stage-balanced one, the one the schedule runs
// faster, with its makespan.
std::pair<PartitionResult, double> chunked_start(const PartitionInput& in,
                                                 const std::vector<int64_t>& dev,
                                                 const std::vector<double>& limit,
                                                 const PartitionResult& by_stage,
                                                 const SplitMakespan& makespan) {
  const double size = static_cast<double>(dev.size()) / 2 * std::pow(in.time_s[0].size(), 2);
  PartitionResult by_device = v_placement(dev) && size <= kExactSplitSize
                                  ? partition_v_devices(in, limit, by_stage.ranges)
                                  : PartitionResult{};
  if (!by_device.feasible) by_device = balance_device_loads(in, dev, limit, by_stage);
  const double device_s = makespan(by_device.ranges);
  if (by_device.ranges == by_stage.ranges) return {by_device, device_s};
  const double stage_s = makespan(by_stage.ranges);
  return stage_s < device_s ? std::make_pair(by_stage, stage_s)
                            : std::make_pair(by_device, device_s);
}

// The most a device's weights, gradients, optimizer state and one micro-batch of activations
// take of its memory: above 1 the split cannot fit.
double chunked_split_fits(const PartitionInput& in, const std::vector<int64_t>& dev,
                          const std::vector<double>& limit,
                          const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  std::vector<double> need(limit.size(), 0);
  for (size_t j = 0; j < ranges.size(); ++j)
    for (int64_t i = ranges[j].first; i <= ranges[j].second; ++i)
      need[dev[j]] += in.static_bytes[j][i] + in.activation_bytes[j][i];
  double worst = 0;
  for (size_t d = 0; d < limit.size(); ++d) worst = std::max(worst, need[d] / limit[d]);
  return worst;
}

// Refines a chunked split by simulation, unless even a perfect one (the micro-batches times the
// average device's work) would gain little.
PartitionResult refine_chunked(const PartitionInput& in, const std::vector<int64_t>& dev,
                               const std::vector<double>& limit,
                               const std::pair<PartitionResult, double>& start,
                               const SplitMakespan& makespan, int64_t microbatches) {
  const int64_t S = static_cast<int64_t>(dev.size());
  const int64_t P = *std::max_element(dev.begin(), dev.end()) + 1;
  double average_s = 0;
  for (size_t i = 0; i < in.time_s[0].size(); ++i) {
    double cheapest = in.time_s[0][i];
    for (const auto& row : in.time_s) cheapest = std::min(cheapest, row[i]);
    average_s += cheapest / static_cast<double>(P);
  }
  const double gain_s = start.second - static_cast<double>(microbatches) * average_s;
  if (gain_s < kRefineMinGain * start.second) return start.first;
  return refine_by_makespan(in, dev, limit, start.first, makespan,
                            kRefineBudget / (S * microbatches));
}

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

LayerShape layer_shape(const Strategy& s, Dtype dtype) {
  LayerShape shape;
  shape.micro_batch = s.micro_batch;
  shape.tp = s.tp;
  shape.sequence_parallel = s.sequence_parallel && s.tp > 1;
  shape.flash_attention = s.flash_attention;
  shape.grad_accumulation_fusion = s.grad_accumulation_fusion;
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
  c.kernels = static_cast<double>(layer_kernels(w, s.recompute).total());
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

// Kernels of the optimizer step over one device's `params` (the reference harness's, as Megatron-LM
// runs it): fused AdamW over one flat fp32 buffer is launched in chunks of 65536 elements, at most
// 320 chunks per launch (kChunkSize and depth_to_max_blocks of PyTorch's
// aten/src/ATen/native/cuda/MultiTensorApply.cuh; where the large kernel-argument path applies,
// CUDA 12.1 and later on Volta and newer, up to 4044 chunks at depth 4, so fewer launches: a few
// kernels out of the thousands a step issues), plus its step count, the copy to the bf16 weights
// and the zeroing of the main gradients.
double optimizer_kernels(double params) {
  constexpr double kElementsPerLaunch = 65536.0 * 320.0;
  return std::ceil(params / kElementsPerLaunch) + 3;
}

bool same_layer(const LayerSpec& a, const LayerSpec& b) {
  if (a.hidden != b.hidden || a.seq_len != b.seq_len || a.op.index() != b.op.index()) return false;
  if (const auto* x = a.block()) {
    const auto* y = b.block();
    return x->heads == y->heads && x->kv_heads == y->kv_heads && x->head_dim == y->head_dim &&
           x->ffn_hidden == y->ffn_hidden && x->activation == y->activation && x->norm == y->norm &&
           x->bias == y->bias && x->rotary == y->rotary && x->causal == y->causal &&
           x->dropout == y->dropout && x->experts == y->experts && x->top_k == y->top_k;
  }
  return false;  // embedding and head are one of a kind
}

}  // namespace

Evaluator::Evaluator(const ModelSpec& model, const ClusterSpec& cluster, const CostModel& cost)
    : model_(model), cluster_(cluster), cost_(cost), devices_(cluster_devices(cluster)) {
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

const std::vector<LayerCost>& Evaluator::layer_costs(int64_t group, int64_t tp_nodes,
                                                     const Strategy& s) const {
  const CacheKey key{group,
                     tp_nodes,
                     s.micro_batch,
                     s.tp,
                     s.sequence_parallel && s.tp > 1,
                     static_cast<int>(s.recompute),
                     s.flash_attention,
                     s.zero >= 3,
                     s.grad_accumulation_fusion};
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
  for (int64_t g = 0; g < group; ++g)
    first += cluster_.groups[g].count * cluster_.groups[g].node.gpus;
  std::vector<int64_t> tp_devices;
  const int64_t per_node = (s.tp + tp_nodes - 1) / tp_nodes;
  if (tp_nodes > ng.count || per_node > ng.node.gpus)
    throw std::logic_error(fmt::format("layer_costs: tp {} over {} nodes does not fit {} x {}",
                                       s.tp, tp_nodes, ng.count, ng.node.name));
  for (int64_t i = 0; i < s.tp; ++i)
    tp_devices.push_back(first + (i / per_node) * ng.node.gpus + i % per_node);
  const CommGroup tp = make_comm_group(cluster_, devices_, tp_devices);
  auto costs = std::make_unique<std::vector<LayerCost>>(model_.layers.size());
  for (size_t i = 0; i < model_.layers.size(); ++i) {
    const size_t c = static_cast<size_t>(canonical_layer_[i]);
    (*costs)[i] = c < i ? (*costs)[c] : cost_layer(model_.layers[i], s, gpu, tp, cost_, dtype);
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

std::string strategy_model_problem(const ModelSpec& model, const Strategy& s, std::string& code) {
  const int64_t layers = static_cast<int64_t>(model.layers.size());
  if (std::string p = tensor_parallel_problem(model, s.tp); !p.empty()) {
    code = "tp";
    return p;
  }
  const int64_t v = s.chunks_per_device();
  if (s.schedule.rfind("v-", 0) == 0 && v != 2) {
    code = "chunks";
    return fmt::format("the V schedules place exactly 2 chunks per device, not {}", v);
  }
  if (s.pp * v > layers) {
    code = "pp";
    return fmt::format("pp {} x {} chunks exceeds the model's {} layers", s.pp, v, layers);
  }
  if (s.zero >= 2 && s.pp > 1) {
    code = "zero";
    return fmt::format(
        "ZeRO-{} with pipeline parallelism is supported by neither Megatron-LM "
        "nor DeepSpeed (ZeRO-1 is)",
        s.zero);
  }
  return "";
}

std::string Evaluator::structural_problem(const Strategy& s, std::string& code) const {
  pipeline::schedule_info(s.schedule);  // throws InputError naming the known schedules
  if (s.microbatches() == 0) {
    code = "batch";
    return fmt::format("global batch {} is not a multiple of dp x micro_batch = {} x {}",
                       s.global_batch, s.dp, s.micro_batch);
  }
  if (s.devices() > static_cast<int64_t>(devices_.size())) {
    code = "devices";
    return fmt::format("dp x tp x pp = {} GPUs, the cluster has {}", s.devices(), devices_.size());
  }
  return strategy_model_problem(model_, s, code);
}

std::string Evaluator::place(const Strategy& s, std::vector<std::vector<int64_t>>& groups,
                             std::vector<std::pair<int64_t, int64_t>>& ranges) const {
  const int64_t P = s.pp, v = s.chunks_per_device(), S = P * v;
  const int64_t per_stage = s.dp * s.tp;
  const int64_t L = static_cast<int64_t>(model_.layers.size());
  groups.assign(P, {});
  ranges.clear();
  const size_t given = s.stages.size();
  if (given != 0 && given != static_cast<size_t>(P) && given != static_cast<size_t>(S))
    throw InputError(fmt::format("expected {} stages (one per pipeline rank){}, found {}", P,
                                 v > 1 ? fmt::format(" or {} (one per virtual stage)", S) : "",
                                 given));
  // Device groups: given per pipeline rank, or per virtual stage (then the same for the chunks of
  // one rank), dp x tp each, no device in two: what the strategy alone says is checked as a
  // strategy file is read, and again here for strategies built in code.
  size_t stage = 0;
  if (std::string problem = stage_devices_problem(s, stage); !problem.empty())
    throw InputError(fmt::format("stage {}: {}", stage, problem));
  std::vector<std::string> want_type(P);
  for (size_t i = 0; i < given; ++i) {
    const int64_t d = s.rank_of_stage(i);
    const StageSpec& st = s.stages[i];
    if (!st.gpu_type.empty()) want_type[d] = st.gpu_type;
    if (!st.devices.empty()) groups[d] = st.devices;
  }
  if (given == 0)
    for (int64_t d = 0; d < P; ++d)
      for (int64_t i = 0; i < per_stage; ++i) groups[d].push_back(d * per_stage + i);
  std::set<int64_t> used;
  for (const auto& g : groups) used.insert(g.begin(), g.end());
  for (int64_t d = 0; d < P; ++d) {
    auto& g = groups[d];
    if (g.empty()) {  // free devices of the wanted GPU type, in cluster order
      for (const Device& dev : devices_) {
        if (static_cast<int64_t>(g.size()) == per_stage) break;
        const auto& type = cluster_.groups[dev.group].node.gpu.name;
        if (!used.count(dev.index) && (want_type[d].empty() || type == want_type[d])) {
          g.push_back(dev.index);
          used.insert(dev.index);
        }
      }
      if (static_cast<int64_t>(g.size()) != per_stage)
        return fmt::format("pipeline rank {} needs {} free {}GPUs, the cluster has fewer", d,
                           per_stage, want_type[d].empty() ? "" : want_type[d] + " ");
    }
  }
  // Every group now holds dp x tp devices and none is in two (the given ones were checked above;
  // the others took free devices): what is left to check needs the cluster.
  for (int64_t d = 0; d < P; ++d) {
    const auto& g = groups[d];
    std::set<std::string> types;
    for (int64_t dev : g) {
      if (dev < 0 || dev >= static_cast<int64_t>(devices_.size()))
        throw InputError(
            fmt::format("pipeline rank {} uses device {}; the cluster has {} devices "
                        "(0-{})",
                        d, dev, devices_.size(), devices_.size() - 1));
      types.insert(cluster_.groups[devices_[dev].group].node.gpu.name);
    }
    // A rank may span GPU types (data-parallel replicas on different GPUs): its gpu_type names
    // them all, joined by "+" in name order.
    std::string joined;
    for (const auto& t : types) joined += (joined.empty() ? "" : "+") + t;
    if (!want_type[d].empty() && want_type[d] != joined)
      throw InputError(fmt::format("pipeline rank {} says gpu_type {} but its devices are {}", d,
                                   want_type[d], joined));
  }
  // Layer ranges: given ones (one per virtual stage) must tile the model.
  const auto has_layers = [](const StageSpec& st) { return st.first_layer >= 0; };
  const bool any = std::any_of(s.stages.begin(), s.stages.end(), has_layers);
  if (!any) return "";
  if (!std::all_of(s.stages.begin(), s.stages.end(), has_layers))
    throw InputError("give layers for every stage or for none (then the partition chooses them)");
  if (given != static_cast<size_t>(S))
    throw InputError(
        fmt::format("layer ranges need one stage per virtual stage: {} x {} chunks "
                    "= {}, found {}",
                    P, v, S, given));
  int64_t next = 0;
  for (size_t st = 0; st < given; ++st) {
    if (s.stages[st].first_layer != next)
      throw InputError(
          fmt::format("stage {} starts at layer {}; expected {} (stages must hold "
                      "contiguous layers in order)",
                      st, s.stages[st].first_layer, next));
    ranges.emplace_back(s.stages[st].first_layer, s.stages[st].last_layer);
    next = s.stages[st].last_layer + 1;
  }
  if (next != L)
    throw InputError(
        fmt::format("the stages end at layer {}; the model has layers 0-{}", next - 1, L - 1));
  return "";
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

Prediction Evaluator::predict(const Strategy& input, const PredictOptions& options) const {
  std::string code;
  if (std::string problem = structural_problem(input, code); !problem.empty())
    return infeasible(code, problem);
  Strategy s = input;
  std::vector<std::vector<int64_t>> groups;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  if (std::string problem = place(s, groups, ranges); !problem.empty())
    return infeasible("placement", problem);
  const int64_t P = s.pp, v = s.chunks_per_device(), S = P * v, m = s.microbatches();
  const int64_t L = static_cast<int64_t>(model_.layers.size());
  Prediction out;

  auto note = [&out](std::string text) {
    if (std::find(out.notes.begin(), out.notes.end(), text) == out.notes.end())
      out.notes.push_back(std::move(text));
  };
  auto usable_bytes = [this](const GpuSpec& g) {
    const double reserve = cost_.fit(g).context_reserve_bytes;
    return g.memory_bytes - (reserve > 0 ? reserve : kDefaultReserveBytes);
  };
  // Per pipeline rank: its GPU, compute dtype and every layer's cost there. A rank whose
  // data-parallel replicas run on several node kinds takes, per layer and pass, the slowest kind's
  // time (the replicas meet at every gradient synchronisation), and the smallest GPU's memory.
  std::vector<const GpuSpec*> gpu(P);      // the slowest kind (all of them when one)
  std::vector<const GpuSpec*> mem_gpu(P);  // the kind with the least usable memory
  std::vector<Dtype> dtype(P);
  std::vector<const std::vector<LayerCost>*> rank_costs(P);
  std::vector<std::vector<LayerCost>> mixed_costs(P);
  std::vector<std::string> rank_type(P);  // its GPU types, joined by "+" in name order
  std::vector<double> limit(P);
  for (int64_t d = 0; d < P; ++d) {
    // Each node kind on this rank, with a tensor-parallel group of it (tp devices in a row).
    std::vector<std::pair<int64_t, const std::vector<LayerCost>*>> kinds;
    for (size_t first = 0; first < groups[d].size(); first += static_cast<size_t>(s.tp)) {
      const int64_t kind = devices_[groups[d][first]].group;
      if (std::any_of(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == kind; }))
        continue;
      const std::vector<int64_t> tp_devices(groups[d].begin() + first,
                                            groups[d].begin() + first + s.tp);
      const CommGroup tp = make_comm_group(cluster_, devices_, tp_devices);
      kinds.emplace_back(kind, &layer_costs(kind, tp.nodes, s));
    }
    auto total = [](const std::vector<LayerCost>& costs) {
      double t = 0;
      for (const auto& c : costs) t += c.total_s();
      return t;
    };
    size_t slowest = 0, smallest = 0;
    for (size_t k = 1; k < kinds.size(); ++k) {
      if (total(*kinds[k].second) > total(*kinds[slowest].second)) slowest = k;
      if (usable_bytes(cluster_.groups[kinds[k].first].node.gpu) <
          usable_bytes(cluster_.groups[kinds[smallest].first].node.gpu))
        smallest = k;
    }
    gpu[d] = &cluster_.groups[kinds[slowest].first].node.gpu;
    mem_gpu[d] = &cluster_.groups[kinds[smallest].first].node.gpu;
    rank_costs[d] = kinds[slowest].second;
    rank_type[d] = gpu[d]->name;
    if (kinds.size() > 1) {
      std::set<std::string> types;
      for (const auto& [kind, costs] : kinds) types.insert(cluster_.groups[kind].node.gpu.name);
      rank_type[d].clear();
      for (const auto& t : types) rank_type[d] += (rank_type[d].empty() ? "" : "+") + t;
      mixed_costs[d] = *kinds[slowest].second;
      for (const auto& [kind, costs] : kinds)
        for (size_t i = 0; i < costs->size(); ++i) {
          LayerTimes& t = mixed_costs[d][i].times;
          const LayerTimes& o = (*costs)[i].times;
          for (int p = 0; p < kNumPasses; ++p) {
            t.pass_s[p] = std::max(t.pass_s[p], o.pass_s[p]);
            t.tp_comm_s[p] = std::max(t.tp_comm_s[p], o.tp_comm_s[p]);
          }
          t.recompute_s = std::max(t.recompute_s, o.recompute_s);
        }
      rank_costs[d] = &mixed_costs[d];
      std::string names;
      for (const auto& [kind, costs] : kinds)
        names += (names.empty() ? "" : " and ") + cluster_.groups[kind].node.gpu.name;
      note(
          fmt::format("pipeline rank {} runs on {}: each layer takes the slowest one's time, "
                      "memory the smallest one's",
                      d, names));
    }
    dtype[d] = cost_.compute_dtype(*gpu[d], model_.dtype);
    for (const auto& [kind, costs] : kinds) {
      const GpuSpec& g = cluster_.groups[kind].node.gpu;
      const Dtype computed = cost_.compute_dtype(g, model_.dtype);
      if (computed != model_.dtype)
        note(fmt::format("{} runs as {} on {}", to_string(model_.dtype), to_string(computed),
                         g.name));
      // One note per correction, formatted once (this runs for every candidate of a search).
      std::vector<const LayerCorrection*> used;
      for (const LayerCost& c : *costs) {
        const LayerCorrection* k = c.times.correction;
        if (k && std::find(used.begin(), used.end(), k) == used.end()) used.push_back(k);
      }
      for (const LayerCorrection* k : used)
        note(fmt::format("{} on {}: whole-layer timings ({}) correct its ops, {}", describe(k->key),
                         g.name, k->source, k->model_summary()));
    }
    limit[d] = usable_bytes(*mem_gpu[d]);
  }
  std::vector<int64_t> dev(S);
  for (int64_t j = 0; j < S; ++j) dev[j] = s.rank_of_virtual_stage(j);

  pipeline::PipelineProblem problem;
  problem.devices = static_cast<int>(P);
  problem.microbatches = static_cast<int>(m);
  problem.chunks = static_cast<int>(v);
  problem.record_timeline = false;

  // Layer partition when the strategy leaves it open: the fastest slowest virtual stage, with
  // memory limits where one chunk per device makes them exact (in-flight micro-batches from the
  // schedule's own peak).
  if (ranges.empty()) {
    PartitionInput in;
    const std::vector<double> in_flight = stage_peaks(s);
    for (int64_t j = 0; j < S; ++j) {
      const int64_t d = dev[j];
      std::vector<double> t, stat, act, tr;
      for (const auto& c : *rank_costs[d]) {
        t.push_back(c.total_s());
        stat.push_back(device_memory({c.params, s.dp, s.zero, dtype[d], 0, 0, 0}).total());
        act.push_back(c.activation);
        tr.push_back(c.transient);
      }
      in.time_s.push_back(std::move(t));
      in.static_bytes.push_back(std::move(stat));
      in.activation_bytes.push_back(std::move(act));
      in.transient_bytes.push_back(std::move(tr));
      in.in_flight.push_back(in_flight[j]);
      in.limit_bytes.push_back(v == 1 ? limit[d] : std::numeric_limits<double>::max());
    }
    PartitionResult part = partition_layers_greedy(in);
    if (!part.feasible) {
      // No partition fits: how far off is the average device?
      double need = 0, have = 0;
      for (int64_t j = 0; j < S; ++j) {
        for (int64_t i = 0; i < L; ++i)
          need += (in.static_bytes[j][i] + in.in_flight[j] * in.activation_bytes[j][i]) / double(S);
        have += limit[dev[j]] / double(S);
      }
      if (options.skip_unfit) {
        Prediction p = infeasible("memory", "no layer partition fits in device memory");
        p.memory_overflow = need / have;
        return p;
      }
      std::fill(in.limit_bytes.begin(), in.limit_bytes.end(), std::numeric_limits<double>::max());
      part = partition_layers_greedy(in);
    }
    if (v > 1) {
      // Virtual stage j's devices send its output to stage j + 1's (free on the V's turn).
      std::vector<Link> link(S);
      for (int64_t j = 0; j + 1 < S; ++j)
        if (dev[j + 1] != dev[j])
          link[j] = link_between(cluster_, devices_[groups[dev[j]].front()],
                                 devices_[groups[dev[j + 1]].front()]);
      // The schedule on a split: one micro-batch's passes per stage and the activations sent
      // between them; the rest of the iteration does not depend on where the cuts fall.
      const SplitMakespan makespan = [&](const std::vector<std::pair<int64_t, int64_t>>& split) {
        pipeline::PipelineProblem q = problem;
        q.forward_s.assign(S, 0);
        q.backward_input_s.assign(S, 0);
        q.backward_weight_s.assign(S, 0);
        q.p2p_s.assign(std::max<int64_t>(1, S - 1), 0);
        for (int64_t j = 0; j < S; ++j) {
          const auto& costs = *rank_costs[dev[j]];
          for (int64_t i = split[j].first; i <= split[j].second; ++i) {
            const LayerTimes& t = costs[i].times;
            q.forward_s[j] += t.pass_s[0];
            q.backward_input_s[j] += t.pass_s[1];
            q.backward_weight_s[j] += t.pass_s[2];
          }
          if (j + 1 < S && dev[j + 1] != dev[j])
            q.p2p_s[j] = cost_.p2p_s(costs[split[j].second].output_bytes, link[j]);
        }
        const pipeline::PipelineResult r = pipeline::estimate(s.schedule, q);
        return r.feasible ? r.makespan_s : std::numeric_limits<double>::infinity();
      };
      const auto start = chunked_start(in, dev, limit, part, makespan);
      part = start.first;
      if (!options.skip_unfit || chunked_split_fits(in, dev, limit, part.ranges) <= 1)
        part = refine_chunked(in, dev, limit, start, makespan, m);
    }
    ranges = part.ranges;
    // Chunked schedules were partitioned by time alone: a device whose weights, gradients,
    // optimizer state and one micro-batch of activations already overflow cannot fit.
    if (v > 1 && options.skip_unfit) {
      const double worst = chunked_split_fits(in, dev, limit, ranges);
      if (worst > 1) {
        Prediction p = infeasible("memory", "no layer partition fits in device memory");
        p.memory_overflow = worst;
        return p;
      }
    }
  }

  // Virtual-stage sums for one micro-batch.
  std::vector<StagePrediction> stages(S);
  std::vector<double> stage_activation(S), params(P, 0), transient(P, 0);
  problem.forward_s.assign(S, 0);
  problem.backward_input_s.assign(S, 0);
  problem.backward_weight_s.assign(S, 0);
  problem.p2p_s.assign(std::max<int64_t>(1, S - 1), 0);
  problem.activation_bytes.assign(S, 0);
  for (int64_t j = 0; j < S; ++j) {
    const int64_t d = dev[j];
    StagePrediction& sp = stages[j];
    sp.stage.first_layer = ranges[j].first;
    sp.stage.last_layer = ranges[j].second;
    sp.stage.devices = groups[d];
    sp.stage.gpu_type = rank_type[d];
    const auto& costs = *rank_costs[d];
    for (int64_t i = sp.stage.first_layer; i <= sp.stage.last_layer; ++i) {
      const LayerCost& c = costs[i];
      sp.forward_s += c.times.pass_s[0];
      sp.backward_input_s += c.times.pass_s[1];
      sp.backward_weight_s += c.times.pass_s[2];
      sp.tp_comm_s += c.times.tp_comm_s[0] + c.times.tp_comm_s[1] + c.times.tp_comm_s[2];
      sp.recompute_s += c.times.recompute_s;
      stage_activation[j] += c.activation;
      transient[d] = std::max(transient[d], c.transient);
      params[d] += c.params;
    }
    if (j + 1 < S) {
      const double bytes = costs[sp.stage.last_layer].output_bytes;
      if (dev[j + 1] != d) {
        sp.p2p_s = cost_.p2p_s(bytes, link_between(cluster_, devices_[groups[d].front()],
                                                   devices_[groups[dev[j + 1]].front()]));
        transient[d] += 2 * bytes;  // send and receive buffers
      }
      problem.p2p_s[j] = sp.p2p_s;
    }
    problem.forward_s[j] = sp.forward_s;
    problem.backward_input_s[j] = sp.backward_input_s;
    problem.backward_weight_s[j] = sp.backward_weight_s;
    problem.activation_bytes[j] = stage_activation[j];
  }
  // A tied head on the embedding's own device shares its table: held once, not twice.
  const LayerSpec& last = model_.layers.back();
  if (last.head() && last.head()->tied && dev.front() == dev.back()) {
    const int64_t d = dev.front();
    const double table = static_cast<double>(last.head()->vocab) * last.hidden / s.tp;
    params[d] -= table;
    if (!s.grad_accumulation_fusion) {
      // Its two uses' gradients meet in one parameter's gradient (autograd adds the second to the
      // first: read 2, write 1 activation-sized element) before the one add into the fp32 main
      // gradient, which the embedding layer already counts; the head's own add into the main
      // gradient (layer_work's grad_accumulate) does not happen.
      const double act = dtype_bytes(dtype[d]);
      const double saved = cost_.memory_op_s(*gpu[d], "grad_accumulate", table * (act + 8)) -
                           cost_.memory_op_s(*gpu[d], "grad_accumulate", table * 3 * act);
      stages[S - 1].backward_weight_s -= saved;
      problem.backward_weight_s[S - 1] -= saved;
    }
  }
  // ZeRO-3 gathers a device's weights before every forward and backward.
  if (s.zero >= 3 && s.dp > 1) {
    for (int64_t j = 0; j < S; ++j) {
      const int64_t d = dev[j];
      std::vector<int64_t> dp_devices;
      for (int64_t r = 0; r < s.dp; ++r) dp_devices.push_back(groups[d][r * s.tp]);
      const CommGroup g = make_comm_group(cluster_, devices_, dp_devices, s.tp);
      double stage_params = 0;
      for (int64_t i = ranges[j].first; i <= ranges[j].second; ++i)
        stage_params += (*rank_costs[d])[i].params;
      const double gather =
          cost_.collective_s(CollectiveKind::kAllGather, stage_params * dtype_bytes(dtype[d]), g);
      stages[j].forward_s += gather;
      stages[j].backward_input_s += gather;
      problem.forward_s[j] += gather;
      problem.backward_input_s[j] += gather;
    }
  }
  if (S == 1) problem.p2p_s = {0.0};

  const pipeline::PipelineResult pipe = pipeline::estimate(s.schedule, problem);
  if (!pipe.feasible) return infeasible("schedule", pipe.reason);

  // Tied embeddings on two devices: their gradients are summed between them.
  double tied_sync = 0;
  if (last.head() && last.head()->tied && dev.front() != dev.back()) {
    const double bytes = static_cast<double>(last.head()->vocab) * last.hidden / s.tp * 4;
    tied_sync = cost_.collective_s(
        CollectiveKind::kAllReduce, bytes,
        make_comm_group(cluster_, devices_, {groups[dev.front()][0], groups[dev.back()][0]}));
  }

  // Per device: data-parallel gradient synchronisation, optimizer step and memory.
  double tail = 0;
  int64_t tail_rank = 0;
  std::vector<double> exposed(P), sync(P), optimizer(P), backward(P, 0);
  std::vector<MemoryBreakdown> memory(P);
  for (int64_t j = 0; j < S; ++j)
    backward[dev[j]] += stages[j].backward_input_s + stages[j].backward_weight_s;
  for (int64_t d = 0; d < P; ++d) {
    double reduce = 0, gather = 0;
    if (s.dp > 1) {
      std::vector<int64_t> dp_devices;
      for (int64_t r = 0; r < s.dp; ++r) dp_devices.push_back(groups[d][r * s.tp]);
      const CommGroup g = make_comm_group(cluster_, devices_, dp_devices, s.tp);
      const double grad_bytes = params[d] * 4;  // fp32 main gradients
      if (s.zero == 0) {
        reduce = cost_.collective_s(CollectiveKind::kAllReduce, grad_bytes, g);
      } else {
        reduce = cost_.collective_s(CollectiveKind::kReduceScatter, grad_bytes, g);
        if (s.zero < 3)
          gather =
              cost_.collective_s(CollectiveKind::kAllGather, params[d] * dtype_bytes(dtype[d]), g);
      }
    }
    // Gradient buckets are reduced while the last micro-batch's backward still runs (PyTorch DDP,
    // Megatron-LM --overlap-grad-reduce), or after it (overlap_grad_reduce false). The tied
    // embeddings' sum follows the data-parallel reduction in every framework (Megatron-LM's
    // finalize_model_grads, DeepSpeed's tied-module reduction after the pipeline flush), and the
    // parameter gather after the step is not hidden either.
    const double tied = d == dev.front() || d == dev.back() ? tied_sync : 0.0;
    sync[d] = reduce + tied + gather;
    exposed[d] =
        (s.overlap_grad_reduce ? std::max(0.0, reduce - backward[d]) : reduce) + tied + gather;
    optimizer[d] = cost_.optimizer_s(*gpu[d], params[d] / (s.zero >= 1 ? s.dp : 1));
    if (exposed[d] + optimizer[d] > tail) {
      tail = exposed[d] + optimizer[d];
      tail_rank = d;
    }
    MemoryInput mem;
    mem.params = params[d];
    mem.dp = s.dp;
    mem.zero = s.zero;
    mem.dtype = dtype[d];
    mem.activations = pipe.peak_activation_bytes.empty() ? 0 : pipe.peak_activation_bytes[d];
    mem.transient = transient[d];
    const double reserve = cost_.fit(*mem_gpu[d]).context_reserve_bytes;
    mem.reserve = reserve > 0 ? reserve : kDefaultReserveBytes;
    memory[d] = device_memory(mem);
    out.peak_memory_bytes.push_back(memory[d].total());
    if (out.feasible && memory[d].total() > mem_gpu[d]->memory_bytes) {
      out.feasible = false;
      out.reason_code = "memory";
      out.reason = fmt::format(
          "pipeline rank {} ({}) needs {:.1f} GiB per GPU, it has {:.1f} GiB (weights+grads+"
          "optimizer {:.1f}, activations {:.1f} for a peak of {} chunk activations, transient "
          "{:.1f}, reserve {:.1f})",
          d, mem_gpu[d]->name, memory[d].total() / kGiB, mem_gpu[d]->memory_bytes / kGiB,
          (memory[d].weights + memory[d].gradients + memory[d].optimizer) / kGiB,
          memory[d].activations / kGiB, pipe.peak_activation[d], memory[d].transient / kGiB,
          memory[d].reserve / kGiB);
    }
  }
  for (int64_t j = 0; j < S; ++j) {
    const int64_t d = dev[j];
    stages[j].dp_sync_s = sync[d];
    stages[j].optimizer_s = optimizer[d];
    stages[j].in_flight = pipe.peak_activation[d];
    stages[j].memory = memory[d];
  }

  // The host floor. In eager mode the host issues every kernel (dispatch, autograd, launch) while
  // the GPU runs the ones before: the two overlap, and the slower bounds the step. A device's
  // iteration cannot be shorter than its host's time to issue the kernels of its stages' m
  // micro-batches and of its optimizer step. Small configurations are host-bound (docs/measure.md);
  // with no measured host cost per kernel (host_s_per_kernel 0) the floor is 0.
  double host_s = 0, host_kernels = 0;
  {
    std::vector<double> kernels(P, 0);
    for (int64_t j = 0; j < S; ++j)
      for (int64_t i = ranges[j].first; i <= ranges[j].second; ++i)
        kernels[dev[j]] += static_cast<double>(m) * (*rank_costs[dev[j]])[i].kernels;
    for (int64_t d = 0; d < P; ++d) {
      kernels[d] += optimizer_kernels(params[d] / (s.zero >= 1 ? s.dp : 1));
      const double t = kernels[d] * cost_.fit(*gpu[d]).host_s_per_kernel;
      if (t > host_s || (host_s == 0 && kernels[d] > host_kernels)) {
        host_s = t;
        host_kernels = kernels[d];
      }
    }
  }
  out.kernels_per_iteration = host_kernels;
  out.host_s = host_s;
  const double device_s = pipe.makespan_s + tail;
  const double host_wait = std::max(0.0, host_s - device_s);

  // Totals and the breakdown (named parts that sum to the iteration time).
  out.iteration_s = device_s + host_wait;
  out.samples_per_s = static_cast<double>(s.global_batch) / out.iteration_s;
  out.tokens_per_s = out.samples_per_s * static_cast<double>(model_.seq_len);
  double peak = 0;
  for (int64_t d = 0; d < P; ++d)
    for (int64_t device : groups[d]) {
      const GpuSpec& g = cluster_.groups[devices_[device].group].node.gpu;
      peak += g.peak_flops(cost_.compute_dtype(g, model_.dtype));
    }
  out.mfu = model_flops_per_sample(model_) * static_cast<double>(s.global_batch) /
            (out.iteration_s * peak);
  out.bubble_rate = pipe.bubble_rate;
  // The busiest device bounds the makespan; what is left is pipeline fill, drain and waiting.
  std::vector<double> busy(P, 0), comm(P, 0);
  for (int64_t j = 0; j < S; ++j) {
    busy[dev[j]] += stages[j].forward_s + stages[j].backward_input_s + stages[j].backward_weight_s;
    comm[dev[j]] += stages[j].tp_comm_s;
  }
  const int64_t crit = std::max_element(busy.begin(), busy.end()) - busy.begin();
  double p2p = 0;
  for (double c : problem.p2p_s) p2p += 2 * c;
  const double idle = std::max(0.0, pipe.makespan_s - static_cast<double>(m) * busy[crit]);
  p2p = std::min(p2p, idle);
  out.breakdown = {
      {"compute", static_cast<double>(m) * (busy[crit] - comm[crit])},
      {"tp_comm", static_cast<double>(m) * comm[crit]},
      {"pp_p2p", p2p},
      {"pp_bubble", idle - p2p},  // >= 0: rounding can put the makespan a hair below m x busy
      {"dp_sync", exposed[tail_rank]},
      {"optimizer", optimizer[tail_rank]},
      {"host_wait", host_wait},  // the device idle for its host beyond its own work (host floor)
  };
  out.stages = std::move(stages);
  return out;
}

}  // namespace hetplan
