#include "costmodel/attention_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace hetplan {

double attended_pairs(int64_t queries, int64_t keys, bool causal, int64_t window) {
  const double k = static_cast<double>(keys);
  const double w = window > 0 && window < keys ? static_cast<double>(window) : k;
  const double whole = causal ? (w < k ? k * w - w * w / 2 : k * k * 0.5) : k * w;
  return queries == keys ? whole : whole * static_cast<double>(queries) / k;
}

double attention_time_s(const AttentionCoefficients& c, const AttentionWork& w, double peak_flops,
                        int64_t sm_count) {
  const double d = static_cast<double>(w.head_dim);
  const double head = w.head_dim > 0 ? d / (d + c.head_dim_half) : 1.0;
  const double s = static_cast<double>(w.seq);
  const double length = w.seq > 0 ? s / (s + c.seq_half) : 1.0;
  const double throughput = w.flops / (peak_flops * c.efficiency * length * head);
  if (w.batch_heads <= 0 || w.seq <= 0 || sm_count <= 0) return throughput;
  // FLOPs per (query, key) pair the pass computes, and the pairs of the longest block: its 128
  // rows against the whole sequence (a causal sequence within one block: half of its square), or
  // against the window and its own rows.
  const bool plain = (w.kv_seq == 0 || w.kv_seq == w.seq) && (w.window == 0 || w.window >= w.seq);
  const double pairs =
      plain ? static_cast<double>(w.batch_heads) * s * s * (w.causal ? 0.5 : 1.0)
            : static_cast<double>(w.batch_heads) *
                  attended_pairs(w.seq, w.kv_seq > 0 ? w.kv_seq : w.seq, w.causal, w.window);
  const double rows = static_cast<double>(std::min(kAttentionBlockRows, w.seq));
  double keys = w.kv_seq > 0 ? static_cast<double>(w.kv_seq) : s;
  if (w.window > 0) keys = std::min(keys, static_cast<double>(w.window) + rows);
  const double longest = rows * keys * (w.causal && w.seq <= kAttentionBlockRows ? 0.5 : 1.0);
  const double per_sm = peak_flops / static_cast<double>(sm_count) * c.efficiency * head;
  const double critical = w.flops / pairs * longest / per_sm;
  static_assert(kAttentionBoundNorm == 2, "the search calls this per layer and pass: no pow");
  return std::sqrt(throughput * throughput + critical * critical);
}

namespace {

// Sum of squared log errors of launch + body / e, and the e in [0.005, 1] that minimises it (golden
// section on log e; the sum is unimodal in it).
std::pair<double, double> best_efficiency(const std::vector<double>& body,
                                          const std::vector<double>& time, double launch_s) {
  auto sse = [&](double log_e) {
    const double e = std::exp(log_e);
    double s = 0;
    for (size_t i = 0; i < body.size(); ++i) {
      const double r = std::log((launch_s + body[i] / e) / time[i]);
      s += r * r;
    }
    return s;
  };
  const double golden = 0.5 * (std::sqrt(5.0) - 1);
  double lo = std::log(0.005), hi = 0;
  double a = hi - golden * (hi - lo), b = lo + golden * (hi - lo);
  double fa = sse(a), fb = sse(b);
  for (int i = 0; i < 60; ++i) {
    if (fa < fb) {
      hi = b, b = a, fb = fa;
      a = hi - golden * (hi - lo), fa = sse(a);
    } else {
      lo = a, a = b, fa = fb;
      b = lo + golden * (hi - lo), fb = sse(b);
    }
  }
  const double log_e = 0.5 * (lo + hi);
  return {sse(log_e), std::exp(log_e)};
}

}  // namespace

AttentionFitResult fit_attention(const std::vector<AttentionSample>& samples, double peak_flops,
                                 int64_t sm_count, double launch_s,
                                 const AttentionCoefficients& prior) {
  AttentionFitResult out;
  out.coefficients = prior;
  if (samples.empty()) return out;
  std::set<int64_t> lengths, head_dims;
  bool every_length = true, every_head_dim = true;
  for (const auto& s : samples) {
    lengths.insert(s.work.seq);
    head_dims.insert(s.work.head_dim);
    every_length = every_length && s.work.seq > 0;
    every_head_dim = every_head_dim && s.work.head_dim > 0;
  }
  const int seq_steps = lengths.size() >= 2 && every_length ? 129 : 0;
  const int head_steps = head_dims.size() >= 2 && every_head_dim ? 17 : 0;
  // Two contexts, each with its own efficiency (the halves shared): the sum of squares splits
  // into one per context, each minimised on its own.
  size_t in_layer = 0;
  for (const auto& s : samples) in_layer += s.in_layer;
  const bool two = in_layer >= kMinAttentionContextSamples &&
                   samples.size() - in_layer >= kMinAttentionContextSamples;
  out.in_layer_points = two ? static_cast<int64_t>(in_layer) : 0;
  std::vector<double> body[2], times[2];  // [0]: alone (or all), [1]: inside layers
  for (const auto& s : samples) times[two && s.in_layer].push_back(s.time_s);
  double best_sse = std::numeric_limits<double>::infinity();
  for (int i = -1; i < seq_steps; ++i) {
    for (int j = -1; j < head_steps; ++j) {
      AttentionCoefficients c;
      c.efficiency = 1;
      c.seq_half = i < 0 ? 0 : 16 * std::exp2(i / 8.0);
      c.head_dim_half = j < 0 ? 0 : 4 * std::exp2(j / 2.0);
      body[0].clear(), body[1].clear();
      for (const auto& s : samples)
        body[two && s.in_layer].push_back(attention_time_s(c, s.work, peak_flops, sm_count));
      const auto [sse, e] = best_efficiency(body[0], times[0], launch_s);
      const auto [sse_layer, e_layer] =
          two ? best_efficiency(body[1], times[1], launch_s) : std::pair{0.0, e};
      if (sse + sse_layer < best_sse) {
        best_sse = sse + sse_layer;
        c.efficiency = e;
        c.in_layer_factor = e / e_layer;
        out.coefficients = c;
      }
    }
  }
  std::vector<double> errors;
  for (const auto& s : samples) {
    const double factor = s.in_layer ? out.coefficients.in_layer_factor : 1.0;
    const double predicted =
        launch_s + factor * attention_time_s(out.coefficients, s.work, peak_flops, sm_count);
    errors.push_back(std::abs(predicted / s.time_s - 1));
  }
  out.quality = summarize_errors(errors);
  out.quality.method = "in-sample, over the timings the fit took";
  return out;
}

}  // namespace hetplan
