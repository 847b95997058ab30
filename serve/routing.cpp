#include "serve/routing.h"

#include <algorithm>
#include <cmath>

namespace hetplan::serve {

Iwrr::Iwrr(std::vector<int> weights) : weights_(std::move(weights)) {
  for (int w : weights_) max_weight_ = std::max(max_weight_, w);
}

int Iwrr::next() {
  if (weights_.empty() || max_weight_ <= 0) return -1;
  const int n = size();
  // At most one full pass over all cycles finds a candidate (every weight is >= 1).
  for (int tries = 0; tries < n * max_weight_ + 1; ++tries) {
    const int candidate = position_;
    const bool served = weights_[candidate] >= cycle_;
    if (++position_ == n) {
      position_ = 0;
      if (++cycle_ > max_weight_) cycle_ = 1;
    }
    if (served) return candidate;
  }
  return -1;
}

const std::vector<RouteChoice>& RoutingTable::from(int endpoint) const {
  return out[endpoint == kSource ? out.size() - 1 : static_cast<size_t>(endpoint)];
}

RoutingTable routing_from_flow(const ServingProblem& problem, const FlowResult& flow,
                               int resolution) {
  const int n = problem.machines();
  RoutingTable table;
  table.out.assign(n + 1, {});
  for (const FlowEdge& e : flow.edges) {
    if (e.flow_tokens_per_s <= 0) continue;
    const size_t slot = e.from == kSource ? n : static_cast<size_t>(e.from);
    table.out[slot].push_back({e.to, e.flow_tokens_per_s, 0, 0});
  }
  for (auto& choices : table.out) {
    double total = 0;
    for (const auto& c : choices) total += c.flow_tokens_per_s;
    for (auto& c : choices) {
      c.share = c.flow_tokens_per_s / total;
      c.weight = std::max(1, static_cast<int>(std::lround(c.share * resolution)));
    }
  }
  return table;
}

}  // namespace hetplan::serve
