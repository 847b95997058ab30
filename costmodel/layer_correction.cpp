#include "costmodel/layer_correction.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "costmodel/cost_model.h"
#include "costmodel/errors.h"
#include "costmodel/framework.h"
#include "costmodel/linear_fit.h"
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
// unfused: two batched GEMMs around a softmax, as every attention was in 2020). Sailor's OPT
// layers are the same block with a ReLU MLP (OPT's dropout 0.1, attention unfused in fp32).
// nullopt, with the reason, for entries the cost model cannot rebuild as AMP measured them.
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
    TransformerLayer b;  // GPT-2: LayerNorm, biases, GeLU, 4x MLP, causal (OPT: ReLU)
    b.heads = b.kv_heads = m.heads;
    b.head_dim = m.hidden / m.heads;
    b.ffn_hidden = m.ffn_hidden > 0 ? m.ffn_hidden : 4 * m.hidden;
    if (m.activation == "relu") b.activation = MlpActivation::kRelu;
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
  if (!t.whole_step) return;
  // Forward and backward timed together: the sums stand in pass 0's place.
  for (int i = 1; i < kNumPasses; ++i) {
    t.predicted_s[0] += std::exchange(t.predicted_s[i], 0);
    t.comm_s[0] += std::exchange(t.comm_s[i], 0);
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
  using Group =
      std::tuple<std::string, int64_t, int64_t, int64_t, Dtype, std::string, std::string, bool>;
  std::map<Group, std::vector<const LayerForwardMeasurement*>> groups;
  for (const auto& m : fit.layer_forward)
    groups[{m.model, m.layer, m.tp, m.micro_batch, m.dtype, m.node_type,
            m.layer >= 0 ? m.kind : "other", m.forward_backward}]
        .push_back(&m);
  for (const auto& [g, records] : groups) {
    const LayerForwardMeasurement& m = *records.front();
    LayerTiming t;
    t.source = "imported";
    t.forward_only = true;
    t.whole_step = m.forward_backward;
    std::string entries;
    for (const auto* r : records) {
      t.measured_s[0] += r->forward_s.median;
      entries += (entries.empty() ? "" : ", ") + std::to_string(r->entry);
    }
    t.what = m.layer >= 0
                 ? fmt::format(
                       "{} layer {} ({}; entries {}), {}tp {}", m.model, m.layer, m.kind, entries,
                       m.forward_backward
                           ? fmt::format("forward and backward, micro-batch {}, ", m.micro_batch)
                           : "",
                       m.tp)
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
    if (!m.framework.empty()) {
      try {
        shape.framework = &loaded_framework(m.framework);
      } catch (const InputError& e) {
        t.unused = fmt::format("its framework {}: {}", m.framework, e.what());
        out.push_back(t);
        continue;
      }
    }
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

PassScale LayerCorrection::scale(int64_t micro_batch) const {
  PassScale s{at(micro_batch), {0, 0, 0}};
  for (int p = 0; p < kNumPasses; ++p)
    if (fixed_rate_pass[p]) {
      s.rate[p] = rate[p];
      s.fixed_s[p] = fixed_s[p];
    }
  return s;
}

std::string LayerCorrection::model_summary() const {
  if (model == Model::kRatio) return fmt::format("ratio ({})", why_ratio);
  std::string widths;
  for (int64_t tp : fit_tp) widths += fmt::format("{}{}", widths.empty() ? "" : ", ", tp);
  std::string passes;
  const bool alike = model == Model::kFixedRate && fixed_s[1] == fixed_s[0] &&
                     fixed_s[2] == fixed_s[0] && rate[1] == rate[0] &&
                     rate[2] == rate[0];  // imported forward times: B and W take F's terms
  for (int p = 0; p < (alike ? 1 : kNumPasses); ++p)
    if (fixed_rate_pass[p])
      passes += fmt::format("{}{} {:.3f} ms + {:.3f} x ops", passes.empty() ? "" : ", ",
                            alike ? std::string("F, B, W") : std::string(1, "FBW"[p]),
                            fixed_s[p] * 1e3, rate[p]);
  if (untimed_width) {
    if (model == Model::kMixed)
      passes += fmt::format("; the others as predicted (a ratio where timed: {})", why_ratio);
    return fmt::format("fixed + rate from tp {} (tp {} not timed; {} points): {}", widths, key.tp,
                       fit_points, passes);
  }
  if (model == Model::kMixed) passes += fmt::format("; the others ratio ({})", why_ratio);
  const auto [lo, hi] = covered_tp();
  const std::string covers = carries_over_widths() ? fmt::format("; covers tp {}-{}", lo, hi) : "";
  return fmt::format("fixed + rate (tp {}; {} points{}): {}", widths, fit_points, covers, passes);
}

std::pair<int64_t, int64_t> LayerCorrection::covered_tp() const {
  if (!carries_over_widths()) return {key.tp, key.tp};
  const auto [lo, hi] = std::minmax_element(fit_tp.begin(), fit_tp.end());
  return {std::max<int64_t>(1, (*lo + kUntimedWidthReach - 1) / kUntimedWidthReach),
          *hi * kUntimedWidthReach};
}

std::optional<FixedRate> fit_fixed_rate(const std::vector<std::pair<double, double>>& points,
                                        std::string& why) {
  if (points.size() < 2) {
    why = "one predicted op time: timed at one micro-batch and tensor width";
    return std::nullopt;
  }
  std::vector<FitPoint> fit_points;
  for (const auto& [predicted_s, measured_s] : points)
    fit_points.push_back({predicted_s, measured_s});
  const FixedSlopeFit line = fit_fixed_plus_slope(fit_points);
  if (!line.fixed_identifiable()) {
    why = fmt::format(
        "its predicted op times span {:.2f}x (under {}x): a fixed cost cannot be told from a rate",
        line.x_spread, kFixedTermMinSpread);
    return std::nullopt;
  }
  if (!(line.free_slope > 0)) {
    why = fmt::format("the fit's rate is {:.3f}: the timings do not grow with the op time",
                      line.free_slope);
    return std::nullopt;
  }
  if (line.free_fixed < 0) {
    why = fmt::format("the fit's fixed term is negative ({:.3f} ms)", line.free_fixed * 1e3);
    return std::nullopt;
  }
  return FixedRate{line.fixed, line.slope};
}

namespace {

// The timings one correction is made of: one shape and dtype, the best source.
struct ShapeTimings {
  bool measured = false;
  bool whole_step = false;  // imported forward-and-backward totals
  std::vector<const LayerTiming*> timings;
};
using ShapeKey = std::pair<LayerKey, Dtype>;

std::map<ShapeKey, ShapeTimings> timings_by_shape(const std::vector<LayerTiming>& timings) {
  std::map<ShapeKey, ShapeTimings> out;
  // A shape's best source: the profiler's timings, else imported forward-and-backward totals,
  // else imported forward times.
  const auto rank = [](const LayerTiming& t) {
    return t.source == "measured" ? 2 : t.whole_step ? 1 : 0;
  };
  std::map<ShapeKey, int> best;
  for (const auto& t : timings)
    if (t.unused.empty()) best[{t.key, t.dtype}] = std::max(best[{t.key, t.dtype}], rank(t));
  for (const auto& t : timings) {
    if (!t.unused.empty() || rank(t) != best[{t.key, t.dtype}]) continue;
    ShapeTimings& a = out[{t.key, t.dtype}];
    a.measured = t.source == "measured";
    a.whole_step = t.whole_step;
    a.timings.push_back(&t);
  }
  return out;
}

// The pass a timing measured for pass p (imported forward times stand for B and W too).
int timed_pass(const LayerTiming& t, int p) { return t.forward_only ? 0 : p; }

LayerCorrection ratio_correction(const ShapeKey& key, const ShapeTimings& a) {
  LayerCorrection c;
  c.key = key.first;
  c.dtype = key.second;
  c.source = a.measured     ? "measured"
             : a.whole_step ? "imported (forward and backward; every pass takes its ratio)"
                            : "imported (forward; B and W take its correction)";
  std::map<int64_t, std::array<std::vector<double>, kNumPasses>> ratios;
  for (const LayerTiming* t : a.timings) {
    auto& r = ratios[t->micro_batch];
    for (int p = 0; p < kNumPasses; ++p)
      if (t->measured_s[timed_pass(*t, p)] > 0) r[p].push_back(t->ratio(timed_pass(*t, p)));
  }
  for (const auto& [mb, r] : ratios) {
    LayerCorrection::Point pt;
    pt.micro_batch = mb;
    for (int p = 0; p < kNumPasses; ++p) {
      pt.ratio[p] = r[p].empty() ? 1.0 : summarize(r[p]).median;
      pt.timings = std::max<int64_t>(pt.timings, static_cast<int64_t>(r[p].size()));
    }
    c.points.push_back(pt);
  }
  return c;
}

// The layer's shape with its tensor width left out: timings of one layer at several tensor widths
// are pooled under it (the fixed part is per rank, the rate part on the rank's shard).
LayerKey without_tp(LayerKey key) {
  key.tp = 0;
  return key;
}

// Fits fixed + rate per pass to the timings of `shapes` (one layer, one source, several tensor
// widths) and gives it to their corrections; where it cannot be fitted they keep their ratios and
// say why.
void fit_pooled(const std::vector<const ShapeTimings*>& shapes,
                std::vector<LayerCorrection*>& corrections) {
  // A fixed time per pass cannot be read off forward-and-backward totals: they keep their ratios
  // (Sailor's such timings grow with the micro-batch as the work does).
  if (std::any_of(shapes.begin(), shapes.end(),
                  [](const ShapeTimings* s) { return s->whole_step; })) {
    for (LayerCorrection* c : corrections)
      c->why_ratio = "forward and backward timed together: one ratio for every pass";
    return;
  }
  // Per (tensor width, micro-batch): the median predicted and measured ops time of each pass.
  std::map<std::pair<int64_t, int64_t>, std::array<std::vector<double>, 2 * kNumPasses>> cells;
  std::vector<int64_t> widths;
  bool forward_only = false;
  for (const ShapeTimings* s : shapes)
    for (const LayerTiming* t : s->timings) {
      forward_only = t->forward_only;
      if (std::find(widths.begin(), widths.end(), t->key.tp) == widths.end())
        widths.push_back(t->key.tp);
      auto& cell = cells[{t->key.tp, t->micro_batch}];
      for (int p = 0; p < (t->forward_only ? 1 : kNumPasses); ++p) {
        if (!(t->measured_s[p] > 0)) continue;
        cell[2 * p].push_back(t->predicted_s[p] - t->comm_s[p]);
        cell[2 * p + 1].push_back(t->measured_s[p] - t->comm_s[p]);
      }
    }
  std::sort(widths.begin(), widths.end());
  // Per pass: its fit, or why it keeps its ratios. A pass not timed has neither: its ratio is 1
  // (its ops as predicted) under either model.
  std::array<std::optional<FixedRate>, kNumPasses> fits;
  std::string why_ratio;
  for (int p = 0; p < (forward_only ? 1 : kNumPasses); ++p) {
    std::vector<std::pair<double, double>> points;
    for (const auto& [where, cell] : cells)
      if (!cell[2 * p].empty())
        points.emplace_back(summarize(cell[2 * p]).median, summarize(cell[2 * p + 1]).median);
    if (points.empty()) continue;
    std::string why;
    fits[p] = fit_fixed_rate(points, why);
    if (!fits[p])
      why_ratio += fmt::format("{}{}", why_ratio.empty() ? "" : "; ",
                               forward_only ? why : fmt::format("{}: {}", "FBW"[p], why));
  }
  if (forward_only) fits[1] = fits[2] = fits[0];  // AMP's rule: B and W as the forward
  const bool any_fitted = std::any_of(fits.begin(), fits.end(), [](const auto& f) { return f; });
  for (LayerCorrection* c : corrections) {
    c->why_ratio = why_ratio;
    if (!any_fitted) continue;
    c->model =
        why_ratio.empty() ? LayerCorrection::Model::kFixedRate : LayerCorrection::Model::kMixed;
    c->fit_tp = widths;
    c->fit_points = static_cast<int64_t>(cells.size());
    for (int p = 0; p < kNumPasses; ++p) {
      if (!fits[p]) continue;
      c->fixed_rate_pass[p] = true;
      c->fixed_s[p] = fits[p]->fixed_s;
      c->rate[p] = fits[p]->rate;
    }
  }
}

}  // namespace

std::vector<LayerCorrection> layer_corrections(const std::vector<LayerTiming>& timings,
                                               bool fixed_rate) {
  const std::map<ShapeKey, ShapeTimings> shapes = timings_by_shape(timings);
  std::vector<LayerCorrection> out;
  out.reserve(shapes.size());
  for (const auto& [key, a] : shapes) out.push_back(ratio_correction(key, a));
  if (!fixed_rate) {
    for (auto& c : out) c.why_ratio = "fixed + rate not asked for";
    return out;
  }
  // Pool each layer's tensor widths, per source (profiler timings, imported forward times and
  // imported forward-and-backward totals never mix).
  std::map<std::tuple<LayerKey, Dtype, bool, bool>,
           std::pair<std::vector<const ShapeTimings*>, std::vector<LayerCorrection*>>>
      pools;
  size_t i = 0;
  for (const auto& [key, a] : shapes) {
    auto& pool = pools[{without_tp(key.first), key.second, a.measured, a.whole_step}];
    pool.first.push_back(&a);
    pool.second.push_back(&out[i++]);
  }
  for (auto& [key, pool] : pools) fit_pooled(pool.first, pool.second);
  return out;
}

std::vector<LayerCorrection> untimed_width_corrections(const std::vector<LayerCorrection>& timed) {
  // Per layer (its shape without its width) and dtype: the widths with a correction of their own,
  // and the lines that carry over, the profiler's first (every correction of one pool holds the
  // same line, so one of each source stands for its pool).
  struct Layer {
    std::vector<int64_t> timed_tp;
    std::vector<const LayerCorrection*> lines;
  };
  std::map<ShapeKey, Layer> layers;
  for (const LayerCorrection& c : timed) {
    Layer& l = layers[{without_tp(c.key), c.dtype}];
    l.timed_tp.push_back(c.key.tp);
    if (!c.carries_over_widths()) continue;
    auto same_source = [&](const LayerCorrection* o) { return o->source == c.source; };
    if (std::none_of(l.lines.begin(), l.lines.end(), same_source)) l.lines.push_back(&c);
  }
  std::vector<LayerCorrection> out;
  for (auto& [key, l] : layers) {
    std::stable_partition(l.lines.begin(), l.lines.end(),
                          [](const LayerCorrection* c) { return c->source == "measured"; });
    int64_t widest = 0;
    for (const LayerCorrection* c : l.lines) widest = std::max(widest, c->covered_tp().second);
    for (int64_t tp = 1; tp <= widest; ++tp) {
      if (std::find(l.timed_tp.begin(), l.timed_tp.end(), tp) != l.timed_tp.end()) continue;
      for (const LayerCorrection* line : l.lines) {
        const auto [lo, hi] = line->covered_tp();
        if (tp < lo || tp > hi) continue;
        LayerCorrection c = *line;
        c.key.tp = tp;
        c.points.clear();  // the ratios are the timed widths' own: untimed, a pass is as predicted
        c.untimed_width = true;
        out.push_back(std::move(c));
        break;
      }
    }
  }
  return out;
}

std::array<std::vector<double>, kNumPasses> held_out_micro_batch_errors(
    const std::vector<LayerTiming>& timings, bool fixed_rate) {
  std::array<std::vector<double>, kNumPasses> errors;
  const std::map<ShapeKey, ShapeTimings> shapes = timings_by_shape(timings);
  // The corrections without each (shape, micro-batch)'s timings, made once per such pair.
  std::map<std::pair<ShapeKey, int64_t>, std::vector<LayerCorrection>> without;
  for (const auto& [key, a] : shapes)
    for (const LayerTiming* t : a.timings) {
      auto [it, fresh] = without.try_emplace({key, t->micro_batch});
      if (!fresh) continue;
      std::vector<LayerTiming> rest;
      for (const auto& o : timings)
        if (!(o.key == key.first && o.dtype == key.second && o.micro_batch == t->micro_batch))
          rest.push_back(o);
      it->second = layer_corrections(rest, fixed_rate);
    }
  for (const auto& t : timings) {
    if (!t.unused.empty()) continue;
    const ShapeKey key{t.key, t.dtype};
    // Imported timings beside measured ones of their shape are not what it is corrected with.
    if (shapes.at(key).measured != (t.source == "measured")) continue;
    const LayerCorrection* c = nullptr;
    for (const auto& k : without.at({key, t.micro_batch}))
      if (k.key == t.key && k.dtype == t.dtype) c = &k;
    if (!c || (c->source == "measured") != (t.source == "measured")) continue;
    const PassScale s = c->scale(t.micro_batch);
    for (int p = 0; p < kNumPasses; ++p) {
      if (!(t.measured_s[p] > 0)) continue;
      const double ops = t.predicted_s[p] - t.comm_s[p];
      const double predicted = s.fixed_s[p] + s.rate[p] * ops + t.comm_s[p];
      errors[p].push_back(predicted / t.measured_s[p] - 1);
    }
  }
  return errors;
}

}  // namespace hetplan
