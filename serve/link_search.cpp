#include "serve/link_search.h"

#include <algorithm>
#include <vector>

#include "serve/annealing.h"
#include "serve/flow.h"

namespace hetplan::serve {
namespace {

// Most idle machines a new branch passes through.
constexpr int kMaxBypass = 6;

// The cluster's links as adjacency lists.
struct Links {
  explicit Links(const ServingProblem& problem) {
    const int n = problem.machines();
    from_clients.assign(n, false);
    to_clients.assign(n, false);
    in.resize(n);
    out.resize(n);
    for (int v = 0; v < n; ++v) {
      from_clients[v] = problem.cluster.link(kSource, v).has_value();
      to_clients[v] = problem.cluster.link(v, kSink).has_value();
      for (int w = 0; w < n; ++w)
        if (w != v && problem.cluster.link(v, w)) {
          out[v].push_back(w);
          in[w].push_back(v);
        }
    }
  }
  std::vector<bool> from_clients, to_clients;
  std::vector<std::vector<int>> in, out;
};

// Moves that follow the links: a machine takes only ranges its links carry, handovers and cuts
// move together, a window of layers shifts along a pipeline, new branches run through idle
// machines.
class LinkAnnealer : public PlacementAnnealer<LinkAnnealer> {
 public:
  LinkAnnealer(const ServingProblem& problem, const LocalSearchOptions& options)
      : PlacementAnnealer(problem, options, FailedMove::kRetried), links_(problem) {}

 private:
  friend class PlacementAnnealer<LinkAnnealer>;

  // Whether machine i ending at layer `end` (exclusive) can hand over to a linked machine, or to
  // the clients after the last layer.
  bool can_end(const Placement& p, int i, const LayerRange& range) const {
    if (range.end() == problem_.num_layers()) return links_.to_clients[i];
    for (int w : links_.out[i])
      if (continues(problem_, range, p.ranges[w])) return true;
    return false;
  }

  // Layers machine i may start at: where a linked machine hands over, or 0 from the clients.
  std::vector<int> starts(const Placement& p, int i) const {
    std::vector<int> s;
    if (links_.from_clients[i]) s.push_back(0);
    for (int u : links_.in[i]) {
      const LayerRange& r = p.ranges[u];
      if (!r.empty() && r.end() < problem_.num_layers()) s.push_back(r.end());
    }
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
    return s;
  }

  // Every range machine i may take with the other machines where they are.
  std::vector<LayerRange> ranges_for(const Placement& p, int i) const {
    std::vector<LayerRange> out;
    const int kmax = problem_.capacity[i].max_layers;
    for (int s : starts(p, i))
      for (int k = 1; k <= kmax && s + k <= problem_.num_layers(); ++k)
        if (can_end(p, i, {s, k})) out.push_back({s, k});
    return out;
  }

  // Machine i takes another range its links carry (or an idle machine joins).
  bool move_range(Placement& p) {
    const int i = pick(usable_);
    auto options = ranges_for(p, i);
    std::erase(options, p.ranges[i]);
    if (options.empty()) return false;
    p.ranges[i] = pick(options);
    return true;
  }

  // A machine and one it feeds move the layer where one hands over to the other.
  bool move_boundary(Placement& p) {
    const int u = pick(usable_);
    const LayerRange a = p.ranges[u];
    if (a.empty() || a.end() == problem_.num_layers() || links_.out[u].empty()) return false;
    const int w = pick(links_.out[u]);
    const LayerRange b = p.ranges[w];
    if (!continues(problem_, a, b)) return false;
    const int lo = std::max(a.start + 1, b.end() - problem_.capacity[w].max_layers);
    const int hi = std::min(a.start + problem_.capacity[u].max_layers, b.end() - 1);
    if (hi < lo) return false;
    const int at = lo + below(hi - lo + 1);
    if (at == a.end() && at == b.start) return false;
    p.ranges[u] = {a.start, at - a.start};
    p.ranges[w] = {at, b.end() - at};
    return true;
  }

  // Every machine that ends at a machine's end moves that end, and every machine that starts
  // there moves its start with it: parallel machines hand over together.
  bool move_cut(Placement& p) {
    const int u = pick(usable_);
    const int b = p.ranges[u].end();
    const int L = problem_.num_layers();
    if (p.ranges[u].empty() || b == L) return false;
    int to = b + (below(2) ? 1 : -1) * (below(3) + 1);
    if (to <= 0 || to >= L) return false;
    for (int i : usable_) {
      LayerRange& r = p.ranges[i];
      if (r.empty()) continue;
      if (r.end() == b)
        r = {r.start, to - r.start};
      else if (r.start == b)
        r = {to, r.end() - to};
      else
        continue;
      if (r.count < 1 || r.count > problem_.capacity[i].max_layers) return false;
    }
    return true;
  }

  // Every start and end within [lo, hi] moves by one layer: the machines inside keep their sizes
  // and handovers, the one straddling lo and the one straddling hi give or take the layer. This
  // passes a layer along a pipeline from a machine with room to a bottleneck in one step.
  bool move_window(Placement& p) {
    const int a = pick(usable_), b = pick(usable_);
    if (p.ranges[a].empty() || p.ranges[b].empty()) return false;
    int lo = below(2) ? p.ranges[a].start : p.ranges[a].end();
    int hi = below(2) ? p.ranges[b].start : p.ranges[b].end();
    if (lo > hi) std::swap(lo, hi);
    const int L = problem_.num_layers();
    if (lo <= 0 || hi >= L) return false;
    const int d = below(2) ? 1 : -1;
    auto moved = [&](int x) { return lo <= x && x <= hi ? x + d : x; };
    for (int i : usable_) {
      LayerRange& r = p.ranges[i];
      if (r.empty()) continue;
      const int s = moved(r.start), e = moved(r.end());
      if (e - s < 1 || e - s > problem_.capacity[i].max_layers || s < 0 || e > L) return false;
      r = {s, e - s};
    }
    return true;
  }

  // A new branch through idle machines: from where a used machine ends, along links through idle
  // machines, to a used machine that can go on (or to the clients after the last layer). The
  // layers between are shared so that the branch's weakest machine is as fast as it can be.
  bool move_bypass(Placement& p) {
    const int L = problem_.num_layers();
    const int u = pick(usable_);
    const LayerRange from = p.ranges[u];
    if (from.empty() || from.end() == L) return false;
    std::vector<int> path;
    int most = 0;  // layers the path may hold
    int v = u;
    for (int depth = 0; depth < kMaxBypass; ++depth) {
      std::vector<int> idle;
      for (int w : links_.out[v])
        if (p.ranges[w].empty() && problem_.capacity[w].max_layers > 0 &&
            std::find(path.begin(), path.end(), w) == path.end())
          idle.push_back(w);
      if (!path.empty() && (idle.empty() || below(2))) return finish_bypass(p, from, path, most, v);
      if (idle.empty()) return false;
      v = pick(idle);
      path.push_back(v);
      most += problem_.capacity[v].max_layers;
    }
    return finish_bypass(p, from, path, most, v);
  }

  // Ends the branch `path` (from the end of `from`, last machine `last`) at a machine it links to.
  bool finish_bypass(Placement& p, const LayerRange& from, const std::vector<int>& path, int most,
                     int last) {
    const int L = problem_.num_layers();
    const int m = static_cast<int>(path.size());
    const int b = from.end();
    std::vector<std::pair<int, int>> ends;  // layers the branch may end at: [lo, hi]
    if (links_.to_clients[last] && b + m <= L && L <= b + most) ends.emplace_back(L, L);
    for (int w : links_.out[last]) {
      const LayerRange& r = p.ranges[w];
      if (r.empty()) continue;
      // Without partial inference the branch must end exactly where w starts.
      const int last_end = problem_.partial_inference ? r.end() - 1 : r.start;
      const int lo = std::max(b + m, r.start), hi = std::min(last_end, b + most);
      if (lo <= hi) ends.emplace_back(lo, hi);
    }
    if (ends.empty()) return false;
    const auto [lo, hi] = pick(ends);
    const int to = lo + below(hi - lo + 1);
    // Max-min: one layer each, then each further layer where it costs the least capacity.
    std::vector<int> k(m, 1);
    for (int extra = to - b - m; extra > 0; --extra) {
      int best = -1;
      double best_cap = -1;
      for (int j = 0; j < m; ++j) {
        if (k[j] >= problem_.capacity[path[j]].max_layers) continue;
        const double c = problem_.capacity[path[j]].tokens_per_s[k[j] + 1];
        if (c > best_cap) {
          best_cap = c;
          best = j;
        }
      }
      ++k[best];
    }
    int at = b;
    for (int j = 0; j < m; ++j) {
      p.ranges[path[j]] = {at, k[j]};
      at += k[j];
    }
    return true;
  }

  bool switch_off(Placement& p) {
    const int i = pick(usable_);
    if (p.ranges[i].empty()) return false;
    p.ranges[i] = {};
    return true;
  }

  bool mutate(Placement& p) {
    const int move = below(100);
    if (move < 35) return move_range(p);
    if (move < 50) return move_boundary(p);
    if (move < 62) return move_cut(p);
    if (move < 82) return move_window(p);
    if (move < 94) return move_bypass(p);
    return switch_off(p);
  }

  const Links links_;
};

}  // namespace

LocalSearchResult link_local_search(const ServingProblem& problem, const Placement& start,
                                    const LocalSearchOptions& options) {
  LinkAnnealer annealer(problem, options);
  return annealer.run(start);
}

}  // namespace hetplan::serve
