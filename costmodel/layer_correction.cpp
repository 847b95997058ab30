#include "costmodel/layer_correction.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "costmodel/cost_model.h"
#include "costmodel/errors.h"
#include "costmodel/stats.h"

namespace hetplan {

LayerSpec measured_block(const LayerMeasurement& m) {
  LayerSpec layer;
  layer.name = "measured";
  layer.hidden = m.hidden;
  layer.seq_len = m.seq_len;
  TransformerLayer b;
  const bool llama = m.style == "llama";
  b.heads = m.heads;
  b.kv_heads = m.kv_heads > 0 ? m.kv_heads : m.heads;
  b.head_dim = m.heads > 0 ? m.hidden / m.heads : 0;
  b.ffn_hidden = m.ffn_hidden;
  b.activation = llama ? MlpActivation::kSwiglu : MlpActivation::kGelu;
  b.norm = llama ? NormKind::kRmsNorm : NormKind::kLayerNorm;
  b.bias = !llama;
  b.mlp_bias = b.bias;
  b.rotary = llama;
  layer.op = b;
  return layer;
}

LayerWork measured_block_work(const LayerMeasurement& m, Dtype dtype) {
  const LayerSpec layer = measured_block(m);
  LayerShape shape;
  shape.micro_batch = m.micro_batch;
  shape.tp = m.tp;
  shape.dtype = dtype;
  LayerWork w = layer_work(layer, shape);
  const auto& b = *layer.block();
  const double T = static_cast<double>(m.micro_batch) * m.seq_len;
  const double act = dtype_bytes(dtype);
  const double widths[3] = {static_cast<double>(b.heads / m.tp * b.head_dim),
                            static_cast<double>(b.kv_heads / m.tp * b.head_dim),
                            static_cast<double>(b.kv_heads / m.tp * b.head_dim)};
  std::erase_if(w.memory_ops, [](const MemoryOp& op) { return op.kernel == "qkv_grad_concat"; });
  for (Pass pass : {Pass::kForward, Pass::kBackwardInput})
    for (double width : widths) w.memory_ops.push_back({"copy", pass, 2 * T * width * act});
  return w;
}

double LayerTiming::rel_error(int pass) const {
  return measured_s[pass] > 0 ? predicted_s[pass] / measured_s[pass] - 1 : 0;
}

double LayerTiming::ratio(int pass) const {
  const double ops = predicted_s[pass] - comm_s[pass];
  return ops > 0 ? (measured_s[pass] - comm_s[pass]) / ops : 1;
}

namespace {

// AMP's layers as Megatron-LM v1.1.5 ran them under DeepSpeed (AMP's profiling script passes no
// dropout flags, so Megatron-LM's defaults hold: hidden and attention dropout 0.1; attention is
// unfused: two batched GEMMs around a softmax, as every attention was in 2020). nullopt, with the
// reason, for entries the cost model cannot rebuild as AMP measured them.
std::optional<LayerSpec> imported_layer(const LayerForwardMeasurement& m, std::string& why) {
  LayerSpec layer;
  layer.name = "imported";
  layer.hidden = m.hidden;
  layer.seq_len = m.seq_len;
  constexpr double kMegatronDropout = 0.1;
  if (m.kind == "transformer") {
    if (m.hidden <= 0 || m.heads <= 0 || m.seq_len <= 0 || m.hidden % m.heads) {
      why = "the record does not give the block's hidden size, heads and sequence length";
      return std::nullopt;
    }
    TransformerLayer b;  // GPT-2: LayerNorm, biases, GeLU, 4x MLP, causal
    b.heads = b.kv_heads = m.heads;
    b.head_dim = m.hidden / m.heads;
    b.ffn_hidden = 4 * m.hidden;
    b.dropout = kMegatronDropout;
    layer.op = b;
    return layer;
  }
  if (m.kind == "embedding") {
    if (m.hidden <= 0 || m.seq_len <= 0 || m.vocab <= 0) {
      why = "the record does not give the embedding's vocabulary, hidden size and sequence length";
      return std::nullopt;
    }
    EmbeddingLayer e;  // token and learned position tables
    e.vocab = m.vocab;
    e.max_positions = m.seq_len;
    e.dropout = kMegatronDropout;
    layer.op = e;
    return layer;
  }
  if (m.kind == "lm_head") {
    why = "AMP's head entries leave out the loss, which DeepSpeed computes outside the layer list";
    return std::nullopt;
  }
  why = "maps onto no hetplan layer";
  return std::nullopt;
}

// The tensor-parallel group of `tp` GPUs on one node of `node_type`, where a timing was taken.
std::optional<CommGroup> tp_group_on(const std::string& node_type, int64_t tp, std::string& why) {
  CommGroup none;
  if (tp <= 1) return none;
  if (node_type.empty()) {
    why = fmt::format("measured at tp {} on an unknown node: its communication cannot be taken off",
                      tp);
    return std::nullopt;
  }
  ClusterSpec cluster;
  try {
    cluster = load_cluster(node_type + ":1");
  } catch (const InputError& e) {
    why = fmt::format("unknown node preset {}: {}", node_type, e.what());
    return std::nullopt;
  }
  const int64_t gpus = cluster.groups.front().node.gpus;
  if (gpus < tp) {
    why = fmt::format("tp {} is wider than a {} node ({} GPUs)", tp, node_type, gpus);
    return std::nullopt;
  }
  std::vector<int64_t> ranks;
  for (int64_t i = 0; i < tp; ++i) ranks.push_back(i);
  return make_comm_group(cluster, cluster_devices(cluster), ranks);
}

// The layer's problem with tensor width `tp` ("" when there is none).
std::string tp_problem(const LayerSpec& layer, int64_t tp, Dtype dtype) {
  return tensor_parallel_problem(ModelSpec{"", "", "", "", layer.seq_len, dtype, {layer}}, tp);
}

void predict(LayerTiming& t, const CostModel& cost, const GpuSpec& gpu, const LayerWork& w,
             const CommGroup& tp) {
  t.key = w.key;
  const LayerTimes p = cost.layer_times_from_ops(gpu, w, Recompute::kNone, tp, t.dtype);
  for (int i = 0; i < kNumPasses; ++i) {
    t.predicted_s[i] = p.pass_s[i];
    t.comm_s[i] = p.tp_comm_s[i];
  }
}

}  // namespace

std::vector<LayerTiming> compare_layer_timings(const CostModel& cost, const GpuSpec& gpu,
                                               const GpuFit& fit) {
  std::vector<LayerTiming> out;
  for (const auto& m : fit.layers) {
    LayerTiming t;
    t.source = "measured";
    t.what = fmt::format("{} block, micro-batch {}", m.style, m.micro_batch);
    t.dtype = cost.compute_dtype(gpu, m.dtype);
    t.micro_batch = m.micro_batch;
    t.measured_s[0] = m.forward_s.median;
    t.measured_s[1] = m.backward_input_s.median;
    t.measured_s[2] = m.backward_weight_s.median;
    if (std::string p = tp_problem(measured_block(m), m.tp, t.dtype); !p.empty())
      t.unused = p;
    else  // the profiler times one rank's shard: no tensor-parallel communication
      predict(t, cost, gpu, measured_block_work(m, t.dtype), CommGroup{});
    out.push_back(t);
  }

  // Imported forward times: the entries of one hetplan layer are summed.
  using Group = std::tuple<std::string, int64_t, int64_t, int64_t, Dtype, std::string, std::string>;
  std::map<Group, std::vector<const LayerForwardMeasurement*>> groups;
  for (const auto& m : fit.layer_forward)
    groups[{m.model, m.layer, m.tp, m.micro_batch, m.dtype, m.node_type,
            m.layer >= 0 ? m.kind : "other"}]
        .push_back(&m);
  for (const auto& [g, records] : groups) {
    const LayerForwardMeasurement& m = *records.front();
    LayerTiming t;
    t.source = "imported";
    t.forward_only = true;
    std::string entries;
    for (const auto* r : records) {
      t.measured_s[0] += r->forward_s.median;
      entries += (entries.empty() ? "" : ", ") + std::to_string(r->entry);
    }
    t.what = m.layer >= 0 ? fmt::format("{} layer {} ({}; entries {}), tp {}", m.model, m.layer,
                                        m.kind, entries, m.tp)
                          : fmt::format("{}: {} entries, tp {}", m.model, records.size(), m.tp);
    t.dtype = cost.compute_dtype(gpu, m.dtype);
    t.micro_batch = m.micro_batch;
    std::string why = "maps onto no hetplan layer";
    std::optional<LayerSpec> layer;
    if (m.layer >= 0) layer = imported_layer(m, why);
    const std::optional<CommGroup> tp = layer ? tp_group_on(m.node_type, m.tp, why) : std::nullopt;
    if (!layer || !tp) {
      t.unused = why;
      out.push_back(t);
      continue;
    }
    LayerShape shape;
    shape.micro_batch = m.micro_batch;
    shape.tp = m.tp;
    shape.dtype = t.dtype;
    shape.flash_attention = false;
    if (std::string p = tp_problem(*layer, m.tp, t.dtype); !p.empty())
      t.unused = p;
    else
      predict(t, cost, gpu, layer_work(*layer, shape), *tp);
    if (t.unused.empty() && t.measured_s[0] <= t.comm_s[0])
      t.unused = fmt::format(
          "the predicted tensor-parallel communication ({:.3f} ms) is not below the measured "
          "forward ({:.3f} ms)",
          t.comm_s[0] * 1e3, t.measured_s[0] * 1e3);
    out.push_back(t);
  }
  return out;
}

std::vector<LayerTiming> compare_layer_timings(const Profile& profile, const GpuSpec& gpu) {
  ClusterSpec cluster;
  cluster.name = gpu.name;
  NodeGroup group;
  group.node.name = gpu.name;
  group.node.gpu = gpu;
  group.node.gpus = 1;
  group.count = 1;
  cluster.groups.push_back(group);
  const CostModel cost(profile, cluster);
  return cost.layer_timings(group.node.gpu);
}

std::array<double, kNumPasses> LayerCorrection::at(int64_t micro_batch) const {
  if (points.empty()) return {1, 1, 1};
  if (micro_batch <= points.front().micro_batch) return points.front().ratio;
  if (micro_batch >= points.back().micro_batch) return points.back().ratio;
  size_t i = 1;
  while (points[i].micro_batch < micro_batch) ++i;
  const Point& a = points[i - 1];
  const Point& b = points[i];
  const double x = std::log2(static_cast<double>(micro_batch) / a.micro_batch) /
                   std::log2(static_cast<double>(b.micro_batch) / a.micro_batch);
  std::array<double, kNumPasses> r{};
  for (int p = 0; p < kNumPasses; ++p) r[p] = a.ratio[p] + x * (b.ratio[p] - a.ratio[p]);
  return r;
}

std::vector<LayerCorrection> layer_corrections(const std::vector<LayerTiming>& timings) {
  // Per shape and dtype, the timings of the best source; per micro-batch, their ratios.
  struct Acc {
    bool measured = false;
    std::map<int64_t, std::array<std::vector<double>, kNumPasses>> ratios;
  };
  std::map<std::pair<LayerKey, Dtype>, Acc> acc;
  for (const auto& t : timings) {
    if (!t.unused.empty()) continue;
    Acc& a = acc[{t.key, t.dtype}];
    const bool measured = t.source == "measured";
    if (a.measured && !measured) continue;
    if (measured && !a.measured) a = Acc{true, {}};
    auto& r = a.ratios[t.micro_batch];
    for (int p = 0; p < kNumPasses; ++p)
      if (t.measured_s[t.forward_only ? 0 : p] > 0) r[p].push_back(t.ratio(t.forward_only ? 0 : p));
  }
  std::vector<LayerCorrection> out;
  for (const auto& [key, a] : acc) {
    LayerCorrection c;
    c.key = key.first;
    c.dtype = key.second;
    c.source = a.measured ? "measured" : "imported (forward; B and W take its ratio)";
    for (const auto& [mb, r] : a.ratios) {
      LayerCorrection::Point pt;
      pt.micro_batch = mb;
      for (int p = 0; p < kNumPasses; ++p) {
        pt.ratio[p] = r[p].empty() ? 1.0 : summarize(r[p]).median;
        pt.timings = std::max<int64_t>(pt.timings, static_cast<int64_t>(r[p].size()));
      }
      c.points.push_back(pt);
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::array<std::vector<double>, kNumPasses> held_out_micro_batch_errors(
    const std::vector<LayerTiming>& timings) {
  std::array<std::vector<double>, kNumPasses> errors;
  const std::vector<LayerCorrection> corrections = layer_corrections(timings);
  for (const auto& t : timings) {
    if (!t.unused.empty()) continue;
    const LayerCorrection* c = nullptr;
    for (const auto& k : corrections)
      if (k.key == t.key && k.dtype == t.dtype) c = &k;
    // Timings the correction does not use (imported ones beside measured) are not scored.
    if (!c || (c->source == "measured") != (t.source == "measured")) continue;
    LayerCorrection others = *c;
    std::erase_if(others.points, [&](const auto& p) { return p.micro_batch == t.micro_batch; });
    if (others.points.empty()) continue;
    const std::array<double, kNumPasses> r = others.at(t.micro_batch);
    for (int p = 0; p < kNumPasses; ++p) {
      if (!(t.measured_s[p] > 0)) continue;
      const double predicted = r[p] * (t.predicted_s[p] - t.comm_s[p]) + t.comm_s[p];
      errors[p].push_back(predicted / t.measured_s[p] - 1);
    }
  }
  return errors;
}

}  // namespace hetplan
