#include "search/pipeline/closed_forms.h"

#include <algorithm>

namespace hetplan::pipeline {
namespace {

// Fills the rates and peaks from per-device first starts, last ends and busy times.
// `after`: the chunk activations each device holds at most from its first backward on.
PipelineResult summarize(const std::vector<double>& first, const std::vector<double>& last,
                         const std::vector<double>& busy, const std::vector<int>& peaks,
                         const std::vector<int>& after, const StageTimes& times,
                         const char* variant) {
  PipelineResult r;
  r.variant = variant;
  const int p = static_cast<int>(first.size());
  r.makespan_s =
      *std::max_element(last.begin(), last.end()) - *std::min_element(first.begin(), first.end());
  double total = 0;
  for (int d = 0; d < p; ++d) {
    total += busy[d];
    const double span = last[d] - first[d];
    if (span > 0) r.max_device_bubble_rate = std::max(r.max_device_bubble_rate, 1 - busy[d] / span);
  }
  if (r.makespan_s > 0) r.bubble_rate = std::max(0.0, 1 - total / (p * r.makespan_s));
  r.peak_activation = peaks;
  if (!times.activation_bytes.empty())
    for (int d = 0; d < p; ++d) {
      r.peak_activation_bytes.push_back(peaks[d] * times.activation_bytes[d]);
      r.activation_bytes_with_gradients.push_back(after[d] * times.activation_bytes[d]);
    }
  return r;
}

}  // namespace

PipelineResult gpipe_closed_form(int p, int m, const StageTimes& t) {
  std::vector<double> backward(p);
  for (int s = 0; s < p; ++s) backward[s] = t.backward_input_s[s] + t.backward_weight_s[s];
  const auto p2p = [&](int s) { return s + 1 < p ? t.p2p_s[s] : 0.0; };
  // Forward flow shop: the last stage finishes its forwards at `forwards_end`.
  double chain = 0, max_forward = 0;
  std::vector<double> first(p), last(p), busy(p);
  for (int s = 0; s < p; ++s) {
    first[s] = chain;
    chain += t.forward_s[s] + p2p(s);
    max_forward = std::max(max_forward, t.forward_s[s]);
  }
  const double forwards_end = chain - p2p(p - 1) + (m - 1) * max_forward;
  // Backward flow shop from the last stage up: stage s ends micro-batch m-1 after the longest path.
  double tail = 0, max_backward = 0;
  for (int s = p - 1; s >= 0; --s) {
    tail += backward[s] + (s + 1 < p ? p2p(s) : 0.0);
    max_backward = std::max(max_backward, backward[s]);
    last[s] = forwards_end + tail + (m - 1) * max_backward;
    busy[s] = m * (t.forward_s[s] + backward[s]);
  }
  // Every forward before the first backward: the first backward leaves m - 1.
  return summarize(first, last, busy, std::vector<int>(p, m), std::vector<int>(p, m - 1), t,
                   "gpipe");
}

std::optional<PipelineResult> one_f_one_b_closed_form(int p, int m, const StageTimes& t) {
  const double f = t.forward_s[0], b = t.backward_input_s[0] + t.backward_weight_s[0];
  for (int s = 0; s < p; ++s)
    if (t.forward_s[s] != f || t.backward_input_s[s] + t.backward_weight_s[s] != b)
      return std::nullopt;
  for (double c : t.p2p_s)
    if (c != 0) return std::nullopt;
  const double makespan = (m + p - 1) * (f + b);
  std::vector<double> first(p), last(p), busy(p, m * (f + b));
  std::vector<int> peaks(p), after(p);
  for (int d = 0; d < p; ++d) {
    first[d] = d * f;
    last[d] = makespan - d * b;
    peaks[d] = std::min(p - d, m);
    // The steady state's forwards bring a device back to its warm-up's count, if any remain.
    after[d] = m > peaks[d] ? peaks[d] : peaks[d] - 1;
  }
  return summarize(first, last, busy, peaks, after, t, "1f1b");
}

}  // namespace hetplan::pipeline
