#include "serve/topology.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "serve/flow.h"

namespace hetplan::serve {
namespace {

using Clock = std::chrono::steady_clock;

// "a, b, c" of the first `most` names, then how many more.
std::string name_list(const std::vector<std::string>& names, size_t most = 6) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < most; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > most) out += fmt::format(" and {} more", names.size() - most);
  return out.empty() ? "none" : out;
}

// "layers 3..5" or "layer 3".
std::string layer_span(int first, int last) {
  return first == last ? fmt::format("layer {}", first) : fmt::format("layers {}..{}", first, last);
}

// A placement under construction with the throughput each machine and link has left.
struct Residual {
  Placement placement;
  std::vector<double> machine;                 // tokens/s left on a used machine
  std::map<std::pair<int, int>, double> link;  // tokens/s used on a link (from, to)
  double link_left(int from, int to, double capacity) const {
    auto it = link.find({from, to});
    return capacity - (it == link.end() ? 0.0 : it->second);
  }
};

// One machine of a chain and the range it holds.
using Chain = std::vector<std::pair<int, LayerRange>>;

// The cluster's links as adjacency lists with their capacity in tokens/s, and the search for a
// chain of machines through them. A machine that already holds a range is entered where Helix's
// rule allows and left at its end; an unused one takes the next layers, as many as the
// throughput asked for allows (fewer where the chain must go on to a machine linked to the
// clients).
class ChainFinder {
 public:
  explicit ChainFinder(const ServingProblem& problem)
      : p_(problem), n_(problem.machines()), L_(problem.num_layers()) {
    const ServingModel& model = p_.model;
    next_.resize(n_);
    last_.assign(n_, 0.0);
    for (int v = 0; v < n_; ++v) {
      if (auto link = p_.cluster.link(kSource, v))
        first_.emplace_back(v, per_token(link->bandwidth_GBps, model.token_bytes));
      if (auto link = p_.cluster.link(v, kSink))
        last_[v] = per_token(link->bandwidth_GBps, model.token_bytes);
      for (int w = 0; w < n_; ++w)
        if (w != v)
          if (auto link = p_.cluster.link(v, w))
            next_[v].emplace_back(
                w, per_token(link->bandwidth_GBps, model.activation_bytes_per_token));
    }
  }

  // Tokens/s machine v sustains with k layers in the middle of a chain.
  double capacity(int v, int k) const {
    const Machine& m = p_.cluster.machines()[v];
    const double act = p_.model.activation_bytes_per_token;
    return std::min({p_.capacity[v].tokens_per_s[k], per_token(m.nic_in_GBps, act),
                     per_token(m.nic_out_GBps, act)});
  }

  // Most layers machine v may hold at `tokens_per_s` (0: none).
  int layers_at(int v, double tokens_per_s) const {
    for (int k = p_.capacity[v].max_layers; k >= 1; --k)
      if (capacity(v, k) >= tokens_per_s) return k;
    return 0;
  }

  double highest_capacity() const {
    double best = 0;
    for (int v = 0; v < n_; ++v)
      for (int k = 1; k <= p_.capacity[v].max_layers; ++k) best = std::max(best, capacity(v, k));
    return best;
  }

  // A chain from the clients to the clients that carries `tokens_per_s` more on top of `r`, or
  // empty; unused machines take as many layers as sustain `target` tokens/s.
  Chain find(double tokens_per_s, double target, const Residual& r) const {
    ChainSearch search(*this, tokens_per_s, target, r);
    for (const auto& [v, cap] : first_)
      if (r.link_left(kSource, v, cap) >= tokens_per_s && search.enter(v, 0)) return search.path;
    return {};
  }

  // Places the unused machines of `chain` and takes `tokens_per_s` off everything it passes.
  void apply(const Chain& chain, double tokens_per_s, Residual& r) const {
    int from = kSource;
    for (const auto& [m, range] : chain) {
      if (r.placement.ranges[m].empty()) {
        r.placement.ranges[m] = range;
        r.machine[m] = machine_arc_capacity(p_, m, range);
      }
      r.machine[m] -= tokens_per_s;
      r.link[{from, m}] += tokens_per_s;
      from = m;
    }
    r.link[{from, kSink}] += tokens_per_s;
  }

  bool any_source_link() const { return !first_.empty(); }
  bool any_sink_link() const {
    return std::any_of(last_.begin(), last_.end(), [](double c) { return c > 0; });
  }
  const std::vector<std::pair<int, double>>& first() const { return first_; }
  const std::vector<double>& last() const { return last_; }

 private:
  // Depth-first search over states (machine, layers done so far) from the clients, most layers
  // first, never through a machine twice. A state from which no chain went on is not tried again:
  // exact where the links form no cycle (Helix's simulator files), a heuristic where they do.
  struct ChainSearch {
    ChainSearch(const ChainFinder& f, double tokens_per_s, double target, const Residual& r)
        : f(f),
          t(tokens_per_s),
          r(r),
          k(f.n_, 0),
          on_path(f.n_, false),
          failed(static_cast<size_t>(f.n_) * (f.L_ + 1), false) {
      for (int v = 0; v < f.n_; ++v) {
        if (r.placement.ranges[v].empty()) k[v] = f.layers_at(v, std::max(tokens_per_s, target));
      }
    }

    // Machine w takes over after `l` layers; true when a chain to the clients follows.
    bool enter(int w, int l) {
      if (on_path[w]) return false;
      const LayerRange& held = r.placement.ranges[w];
      if (!held.empty()) {  // placed: entered where Helix's rule allows, left at its end
        const bool fits =
            f.p_.partial_inference ? held.start <= l && l < held.end() : held.start == l;
        return fits && r.machine[w] >= t && go_on(w, held, held.end());
      }
      for (int l2 = std::min(f.L_, l + k[w]); l2 > l; --l2)
        if (go_on(w, {l, l2 - l}, l2)) return true;
      return false;
    }

    bool go_on(int w, const LayerRange& range, int l) {
      on_path[w] = true;
      path.push_back({w, range});
      if (from(w, l)) return true;
      path.pop_back();
      on_path[w] = false;
      return false;
    }

    // After machine v with `l` layers done.
    bool from(int v, int l) {
      if (l == f.L_) return r.link_left(v, kSink, f.last_[v]) >= t;
      const size_t state = static_cast<size_t>(v) * (f.L_ + 1) + l;
      if (failed[state]) return false;
      for (const auto& [w, cap] : f.next_[v])
        if (r.link_left(v, w, cap) >= t && enter(w, l)) return true;
      failed[state] = true;
      return false;
    }

    const ChainFinder& f;
    double t;
    const Residual& r;
    std::vector<int> k;  // layers an unused machine may take
    std::vector<bool> on_path, failed;
    Chain path;
  };

  const ServingProblem& p_;
  int n_, L_;
  std::vector<std::vector<std::pair<int, double>>> next_;  // machine -> (machine, tokens/s)
  std::vector<std::pair<int, double>> first_;              // clients -> (machine, tokens/s)
  std::vector<double> last_;                               // machine -> clients, tokens/s
};

Residual empty_residual(int machines) {
  Residual r;
  r.placement.ranges.assign(machines, LayerRange{});
  r.machine.assign(machines, 0.0);
  return r;
}

// The smallest positive throughput a chain is asked for: "any chain at all".
constexpr double kAnyFlow = 1e-6;

}  // namespace

bool fully_linked(const ServingCluster& cluster) {
  const int n = cluster.size();
  for (int i = 0; i < n; ++i) {
    if (!cluster.link(kSource, i) || !cluster.link(i, kSink)) return false;
    for (int j = 0; j < n; ++j)
      if (i != j && !cluster.link(i, j)) return false;
  }
  return true;
}

namespace {

// Augmenting chains with machines sized for `target` tokens/s each.
Placement chains_for_target(const ServingProblem& problem, const ChainFinder& finder, double target,
                            Clock::time_point deadline) {
  Residual r = empty_residual(problem.machines());
  const double top = finder.highest_capacity();
  // Each chain saturates a machine or a link (to within the bisection's 0.1%); the cap on their
  // number only guards against rounding.
  for (int chains = 0; chains < 4 * problem.machines() + 16 && Clock::now() < deadline; ++chains) {
    Chain chain = finder.find(kAnyFlow, target, r);
    if (chain.empty()) break;
    // Bisect the throughput the best chain carries (to 0.1%).
    double lo = kAnyFlow, hi = top;
    while (hi > lo * 1.001 && Clock::now() < deadline) {
      const double mid = 0.5 * (lo + hi);
      Chain better = finder.find(mid, target, r);
      if (better.empty()) {
        hi = mid;
      } else {
        lo = mid;
        chain = std::move(better);
      }
    }
    finder.apply(chain, lo, r);
  }
  return r.placement;
}

}  // namespace

Placement chain_placement(const ServingProblem& problem, Clock::time_point deadline) {
  const ChainFinder finder(problem);
  const double top = finder.highest_capacity();
  Placement best = empty_residual(problem.machines()).placement;
  double best_flow = 0, best_target = top;
  auto consider = [&](double target) {
    Placement p = chains_for_target(problem, finder, target, deadline);
    const double f = max_flow(problem, p);
    if (f > best_flow * (1 + 1e-9)) {
      best_flow = f;
      best = std::move(p);
      best_target = target;
    }
  };
  // Targets from the fastest machine's capacity down by 10% steps to 1/1000 of it, then by 1%
  // steps around the best.
  for (double target = top; target > top * 1e-3 && Clock::now() < deadline; target *= 0.9)
    consider(target);
  if (best_flow > 0)
    for (double f = 1.09; f > 0.905 && Clock::now() < deadline; f -= 0.01)
      consider(best_target * f);
  return best;
}

std::string why_nothing_serves(const ServingProblem& problem) {
  const int n = problem.machines();
  const int L = problem.num_layers();
  int total = 0;
  std::map<std::string, std::pair<int, int>> by_type;  // type -> (machines, one of them)
  for (int i = 0; i < n; ++i) {
    total += problem.capacity[i].max_layers;
    auto [it, fresh] = by_type.emplace(problem.cluster.machines()[i].machine_type, std::pair{0, i});
    ++it->second.first;
  }
  if (total < L) {
    const double request = problem.workload.avg_prompt_tokens + problem.workload.avg_output_tokens;
    std::vector<std::string> parts;
    for (const auto& [type, e] : by_type) {
      const MachineCapacity& cap = problem.capacity[e.second];
      std::string part = fmt::format("{} x {}: {} layer{} each", e.first, type, cap.max_layers,
                                     cap.max_layers == 1 ? "" : "s");
      if (cap.max_layers < cap.weight_max_layers) {
        part += fmt::format(
            " (with {} its KV cache would hold {:.0f} tokens per layer, less than one request "
            "of {:g})",
            cap.max_layers + 1, cap.kv_tokens_per_layer[cap.max_layers + 1], request);
      }
      parts.push_back(part);
    }
    const std::string limits =
        problem.params.model == CapacityModel::kHelix && problem.params.helix_tables
            ? std::string("Helix's tables limit the layers of the machine types they list")
            : fmt::format("a machine keeps {:.0f}% of its VRAM free for KV cache, --kv-reserve",
                          100 * problem.params.kv_reserve_fraction);
    return fmt::format(
        "the cluster's machines hold at most {} of the model's {} layers ({}; a layer's weights "
        "are {:.2f} GB, and {})",
        total, L, name_list(parts, 12), problem.model.layer_weight_bytes / 1e9, limits);
  }
  if (fully_linked(problem.cluster)) return "";  // any order of machines is a chain
  const ChainFinder finder(problem);
  if (!finder.any_source_link()) return "no machine has a link from the clients (source)";
  if (!finder.any_sink_link()) return "no machine has a link to the clients (sink)";
  if (!finder.find(kAnyFlow, kAnyFlow, empty_residual(n)).empty()) return "";
  std::vector<std::string> from, to;
  for (const auto& [v, cap] : finder.first()) from.push_back(problem.cluster.machines()[v].name);
  for (int v = 0; v < n; ++v)
    if (finder.last()[v] > 0) to.push_back(problem.cluster.machines()[v].name);
  return fmt::format(
      "no chain of linked machines from the clients back to the clients can hold all {} layers "
      "(links from the clients go to {}; links to the clients come from {})",
      L, name_list(from), name_list(to));
}

std::string why_no_flow(const ServingProblem& problem, const Placement& placement) {
  const int n = problem.machines();
  const int L = problem.num_layers();
  if (static_cast<int>(placement.ranges.size()) != n)
    return "the placement does not fit the cluster";
  const FlowResult flow = solve_flow(problem, placement);
  if (flow.max_flow_tokens_per_s > 0) return "";
  // Layers held by no machine with capacity.
  std::vector<bool> held(L, false);
  for (int i = 0; i < n; ++i) {
    const LayerRange& r = placement.ranges[i];
    if (r.empty() || !(flow.machine_capacity[i] > 0) || r.start < 0 || r.end() > L) continue;
    for (int l = r.start; l < r.end(); ++l) held[l] = true;
  }
  for (int l = 0; l < L; ++l) {
    if (held[l]) continue;
    int last = l;
    while (last + 1 < L && !held[last + 1]) ++last;
    return fmt::format("{} held by no machine with capacity", layer_span(l, last));
  }
  // How far requests from the clients get along links with capacity.
  std::vector<std::vector<int>> next(n);
  std::vector<int> frontier;
  bool to_sink_linked = false;
  for (const FlowEdge& e : flow.edges) {
    if (!(e.capacity_tokens_per_s > 0)) continue;
    if (e.from == kSource)
      frontier.push_back(e.to);
    else if (e.to != kSink)
      next[e.from].push_back(e.to);
    else
      to_sink_linked = true;
  }
  if (frontier.empty()) return "no machine holding layer 0 has a link from the clients (source)";
  std::vector<bool> seen(n, false);
  int reached = 0;
  for (int v : frontier) seen[v] = true;
  bool sink_reachable = false;
  while (!frontier.empty()) {
    const int v = frontier.back();
    frontier.pop_back();
    reached = std::max(reached, placement.ranges[v].end());
    for (const FlowEdge& e : flow.edges)
      if (e.from == v && e.to == kSink && e.capacity_tokens_per_s > 0) sink_reachable = true;
    for (int w : next[v])
      if (!seen[w]) {
        seen[w] = true;
        frontier.push_back(w);
      }
  }
  if (reached < L)
    return fmt::format(
        "requests from the clients get through {} at most: no machine they reach has a link to a "
        "machine holding layer {}",
        layer_span(0, reached - 1), reached);
  if (!to_sink_linked || !sink_reachable)
    return fmt::format(
        "no machine holding layer {} that requests reach has a link to the clients "
        "(sink)",
        L - 1);
  return "the links and NICs on every path carry less than 0.001 tokens/s";
}

}  // namespace hetplan::serve
