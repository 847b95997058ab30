#include "search/pipeline/classic_orders.h"

#include <algorithm>
#include <deque>
#include <utility>

#include <fmt/format.h>

namespace hetplan::pipeline {
namespace {

// Forward sequence of interleaved 1F1B on one device: groups of up to p micro-batches, each group
// through chunk 0, 1, ... (the backward sequence walks the chunks in reverse).
std::vector<std::pair<int, int>> interleaved_sequence(int p, int m, int v, bool backward) {
  std::vector<std::pair<int, int>> seq;  // (micro-batch, chunk)
  seq.reserve(static_cast<size_t>(m) * v);
  for (int g = 0; g < m; g += p) {
    const int size = std::min(p, m - g);
    for (int c = 0; c < v; ++c)
      for (int i = 0; i < size; ++i) seq.emplace_back(g + i, backward ? v - 1 - c : c);
  }
  return seq;
}

}  // namespace

PassOrder gpipe_order(int p, int m) {
  PassOrder o = make_order(Placement::kLinear, p, 1, m, false);
  o.variant = "gpipe";
  for (int d = 0; d < p; ++d) {
    auto& seq = o.per_device[d];
    seq.reserve(2 * static_cast<size_t>(m));
    for (int k = 0; k < m; ++k) seq.push_back({Op::kF, d, k});
    for (int k = 0; k < m; ++k) seq.push_back({Op::kB, d, k});
  }
  return o;
}

PassOrder one_f_one_b_order(int p, int m, int in_flight) {
  if (in_flight <= 0) in_flight = p;
  PassOrder o = make_order(Placement::kLinear, p, 1, m, false);
  o.variant = in_flight >= p ? "1f1b" : fmt::format("1f1b, at most {} in flight", in_flight);
  for (int d = 0; d < p; ++d) {
    auto& seq = o.per_device[d];
    seq.reserve(2 * static_cast<size_t>(m));
    const int warmup = std::min({p - 1 - d, in_flight - 1, m});
    int f = 0;
    for (; f < warmup; ++f) seq.push_back({Op::kF, d, f});
    for (int b = 0; b < m; ++b) {
      if (f < m) seq.push_back({Op::kF, d, f++});
      seq.push_back({Op::kB, d, b});
    }
  }
  return o;
}

int interleaved_group(int p, int m, InterleavedOrder order) {
  if (order == InterleavedOrder::kMegatron) return p;
  const auto rounds = static_cast<int>(pytorch_interleaved_rounds(m, p));
  return m % rounds == 0 ? m / rounds : p;
}

int interleaved_min_in_flight(int p, int m, int v, InterleavedOrder order) {
  // The first backward (micro-batch 0, last chunk) needs micro-batch 0's forward on every chunk,
  // which comes after (v-1) groups' worth of forwards in the sequence.
  return (v - 1) * std::min(interleaved_group(p, m, order), m) + 1;
}

PassOrder interleaved_order(int p, int m, int v, int in_flight, InterleavedOrder order) {
  PassOrder o = make_order(Placement::kLinear, p, v, m, false);
  o.variant = v == 1 ? "interleaved (1 chunk = 1f1b)" : fmt::format("interleaved, {} chunks", v);
  if (v > 1 && order == InterleavedOrder::kPyTorch) o.variant += " (PyTorch's rounds)";
  const int group = interleaved_group(p, m, order);
  // A last group smaller than p can deadlock the 1F1B alternation, so such an order is built for
  // m rounded up to whole groups and the passes of the padding micro-batches are then dropped
  // (dropping passes from a deadlock-free order keeps it deadlock-free). PyTorch's groups are
  // whole by its own rule.
  const int padded = m > group && m % group != 0 ? (m / group + 1) * group : m;
  const auto fwd = interleaved_sequence(group, padded, v, false);
  const auto bwd = interleaved_sequence(group, padded, v, true);
  const int total = padded * v;
  const int floor_warmup = interleaved_min_in_flight(p, m, v, order) - 1;
  for (int d = 0; d < p; ++d) {
    int warmup = std::min(total, 2 * (p - 1 - d) + (v - 1) * group);
    // As Megatron-LM does: one group fits entirely in flight. PyTorch has no such case.
    if (padded == p && order == InterleavedOrder::kMegatron) warmup = total;
    if (in_flight > 0) warmup = std::min(warmup, std::max(in_flight - 1, floor_warmup));
    auto& seq = o.per_device[d];
    seq.reserve(2 * static_cast<size_t>(m) * v);
    auto pass = [&](Op op, std::pair<int, int> mc) {
      if (mc.first < m) seq.push_back({op, mc.second * p + d, mc.first});
    };
    int f = 0;
    for (; f < warmup; ++f) pass(Op::kF, fwd[f]);
    for (int b = 0; b < total; ++b) {
      if (f < total) pass(Op::kF, fwd[f++]);
      pass(Op::kB, bwd[b]);
    }
  }
  if (in_flight > 0) o.variant += fmt::format(", at most {} in flight", in_flight);
  return o;
}

PassOrder zb_order(int p, int m, const ZbRule& rule) {
  PassOrder o = make_order(Placement::kLinear, p, 1, m, true);
  for (int d = 0; d < p; ++d) {
    auto& seq = o.per_device[d];
    seq.reserve(3 * static_cast<size_t>(m));
    std::deque<int> pending;  // micro-batches whose W is still to run
    int held = 0, f = 0;
    const int warmup = std::clamp(rule.warmup[d], 1, std::min(rule.cap, m));
    auto run_w = [&] {
      seq.push_back({Op::kW, d, pending.front()});
      pending.pop_front();
      --held;
    };
    for (; f < warmup; ++f, ++held) seq.push_back({Op::kF, d, f});
    for (int b = 0; b < m; ++b) {
      seq.push_back({Op::kB, d, b});
      pending.push_back(b);
      while (static_cast<int>(pending.size()) > rule.lag[d]) run_w();
      if (f < m) {
        while (held >= rule.cap) run_w();
        seq.push_back({Op::kF, d, f++});
        ++held;
      }
    }
    while (!pending.empty()) run_w();
  }
  return o;
}

ZbRule zb_h1_rule(int p) {
  ZbRule r;
  r.cap = p;
  for (int i = 0; i < p; ++i) {
    r.warmup.push_back(p - i);
    r.lag.push_back(i);
  }
  return r;
}

ZbRule zb_h2_rule(int p) {
  ZbRule r;
  r.cap = 2 * p - 1;
  for (int i = 0; i < p; ++i) {
    r.warmup.push_back(2 * (p - 1 - i) + 1);
    r.lag.push_back(2 * i);
  }
  return r;
}

std::vector<ZbRule> zb_limited_rules(int p, int limit) {
  std::vector<ZbRule> rules(3);
  for (auto& r : rules) r.cap = limit;
  for (int i = 0; i < p; ++i) {
    const int gap_fill = 2 * (p - 1 - i) + 1;  // forwards that fit before the first B arrives
    // ZB-H1-like: 1F1B's warm-up plus what the limit allows beyond p, lag i.
    const int w1 = std::clamp(p - i + std::max(0, limit - p), 1, std::min(limit, gap_fill));
    rules[0].warmup.push_back(w1);
    rules[0].lag.push_back(std::min(i, limit - w1));
    // ZB-H2-like: lag 2i first, the rest of the limit as warm-up.
    const int lag2 = std::min(2 * i, limit - 1);
    rules[1].warmup.push_back(std::clamp(limit - lag2, 1, gap_fill));
    rules[1].lag.push_back(lag2);
    // Fill the gap before the first B first, the rest as lag.
    const int w3 = std::clamp(limit, 1, gap_fill);
    rules[2].warmup.push_back(w3);
    rules[2].lag.push_back(std::min(2 * i, limit - w3));
  }
  return rules;
}

}  // namespace hetplan::pipeline
