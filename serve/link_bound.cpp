#include "serve/link_bound.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>
#include <vector>

#include <CoinFinite.hpp>

#include "serve/column_generation.h"

namespace hetplan::serve {
namespace {

using Clock = std::chrono::steady_clock;

// Flows in the LP are in thousands of tokens/s, so that coefficients stay near 1 (as in milp.cpp).
constexpr double kUnit = 1000.0;
constexpr double kInf = std::numeric_limits<double>::infinity();
// Link kinds per group whose columns are in the LP from the start (column generation). On
// 3cluster24.ini 2 or 3 take 0.55 s; 1 takes 13 rounds (1.0 s), 4 or more a larger first LP
// (0.85-1.0 s). Dev VM, 2026-11-23, a throwaway driver.
constexpr size_t kKeptLinkKinds = 3;

// An LP's columns, rows and coefficients, collected before Clp sees them.
struct LpBuilder : SparseLp {
  // A column in [0, ub] kilo-tokens/s (infinite ub: unbounded), in the LP from the start.
  int column(double ub_tokens_per_s, double cost = 0) {
    col_lb.push_back(0);
    col_ub.push_back(ub_tokens_per_s < kInf ? ub_tokens_per_s / kUnit : COIN_DBL_MAX);
    obj.push_back(cost);
    pool.push_back(-1);
    deferred.push_back(0);
    return static_cast<int>(col_lb.size()) - 1;
  }
  // A column that competes in `pool` (column_generation.h), deferred or not.
  int pooled_column(int pool_id, bool defer) {
    const int c = column(kInf);
    pool.back() = pool_id;
    deferred.back() = defer;
    return c;
  }
  int row(double lb, double ub) {
    row_lb.push_back(lb);
    row_ub.push_back(ub);
    return static_cast<int>(row_lb.size()) - 1;
  }
  // A row `sum <= limit` in tokens/s, or -1 when the limit is infinite (no row needed).
  int limit_row(double limit_tokens_per_s) {
    return limit_tokens_per_s < kInf ? row(-COIN_DBL_MAX, limit_tokens_per_s / kUnit) : -1;
  }
  void add(int r, int c, double value) {
    if (r < 0) return;
    rows.push_back(r);
    cols.push_back(c);
    values.push_back(value);
  }
};

// What the LP knows of one machine.
struct MachineBound {
  bool usable = false;
  // tokens/s the machine may process when each token runs d of its layers (index d): the most
  // any layer count k >= d it may hold allows. Capacity usually falls with k; then it is c(d).
  std::vector<double> run_capacity;
  double max_capacity = 0;   // run_capacity[1]: tokens/s at most, whatever it holds
  double out_tokens = kInf;  // outbound NIC, activations
  double in_tokens = kInf;   // inbound NIC, activations
};

std::vector<MachineBound> machine_bounds(const ServingProblem& problem) {
  const double act = problem.model.activation_bytes_per_token;
  std::vector<MachineBound> out(problem.machines());
  for (int i = 0; i < problem.machines(); ++i) {
    const MachineCapacity& cap = problem.capacity[i];
    MachineBound& mb = out[i];
    mb.run_capacity.assign(cap.max_layers + 1, 0.0);
    double best = 0;
    for (int k = cap.max_layers; k >= 1; --k) {
      best = std::max(best, cap.tokens_per_s[k]);
      mb.run_capacity[k] = best;
    }
    mb.usable = best > 0;
    mb.max_capacity = best;
    const Machine& m = problem.cluster.machines()[i];
    mb.out_tokens = per_token(m.nic_out_GBps, act);
    mb.in_tokens = per_token(m.nic_in_GBps, act);
  }
  return out;
}

// Whether the link i -> j can never be the tightest limit on its flow: it carries at least what
// i can send to machines and j can take from them.
bool link_implied(const std::vector<MachineBound>& mb, int i, int j, double link_tokens) {
  const double out_i = std::min(mb[i].max_capacity, mb[i].out_tokens);
  const double in_j = std::min(mb[j].max_capacity, mb[j].in_tokens);
  return link_tokens >= std::min(out_i, in_j);
}

// Every ordered pair of usable machines is linked and no such link limits its flow. Then the
// machine-to-machine flows at a boundary are a transportation problem on the complete graph
// without self-loops, which the hub rows below describe exactly with O(n) instead of O(n^2)
// columns per boundary (cluster42: 42 x 41 links x 79 boundaries would be 136,000 columns).
bool hub_equivalent(const ServingProblem& problem, const std::vector<MachineBound>& mb) {
  const double act = problem.model.activation_bytes_per_token;
  for (int i = 0; i < problem.machines(); ++i) {
    if (!mb[i].usable) continue;
    for (int j = 0; j < problem.machines(); ++j) {
      if (j == i || !mb[j].usable) continue;
      const auto link = problem.cluster.link(i, j);
      if (!link || !link_implied(mb, i, j, per_token(link->bandwidth_GBps, act))) return false;
    }
  }
  return true;
}

// Machines that the LP treats as one. A group's rows are its machines' rows summed, and that
// loses nothing when the machines are interchangeable in the sense below: any solution of the
// machines' LP summed over each group solves the groups' LP, and any solution of the groups' LP
// split evenly among each group's machines (a group's flow over a kind of link split evenly
// among the links of that kind) solves the machines' LP with the same objective.
// - Hub form: machines alike in capacity, NICs and client links (on a complete graph whose links
//   cannot bind nothing else tells them apart).
// - Per-link form: machines alike as above that also have, towards every group and for every
//   link bandwidth, as many links of that bandwidth out to it and in from it (the coarsest such
//   partition, by colour refinement). Then each machine of a group sends and takes the same share
//   of its group's flow, and every link of a kind carries the same.
struct Group {
  std::vector<int> members;                    // the machines, in index order
  int rep() const { return members.front(); }  // a machine that stands for the others
  double size() const { return static_cast<double>(members.size()); }
};

bool alike(const ServingProblem& p, const std::vector<MachineBound>& mb, int i, int j) {
  auto same_link = [](std::optional<Link> a, std::optional<Link> b) {
    return a.has_value() == b.has_value() && (!a || a->bandwidth_GBps == b->bandwidth_GBps);
  };
  return mb[i].run_capacity == mb[j].run_capacity && mb[i].out_tokens == mb[j].out_tokens &&
         mb[i].in_tokens == mb[j].in_tokens &&
         p.cluster.machines()[i].nic_in_GBps == p.cluster.machines()[j].nic_in_GBps &&
         same_link(p.cluster.link(kSource, i), p.cluster.link(kSource, j)) &&
         same_link(p.cluster.link(i, kSink), p.cluster.link(j, kSink));
}

// Splits `colour` (per usable machine; -1 for the others) until machines of one colour have the
// same number of links of each bandwidth to and from the machines of each colour.
void refine_by_links(const ServingProblem& p, std::vector<int>& colour) {
  const int n = p.machines();
  // A machine's links: (out or in, the other machine's colour, bandwidth), sorted.
  using Signature = std::pair<int, std::vector<std::tuple<int, int, double>>>;
  for (int colours = -1;;) {
    std::vector<Signature> signature(n);
    for (int i = 0; i < n; ++i) {
      if (colour[i] < 0) continue;
      signature[i].first = colour[i];
      for (int k = 0; k < n; ++k) {
        if (k == i || colour[k] < 0) continue;
        if (const auto out = p.cluster.link(i, k))
          signature[i].second.emplace_back(0, colour[k], out->bandwidth_GBps);
        if (const auto in = p.cluster.link(k, i))
          signature[i].second.emplace_back(1, colour[k], in->bandwidth_GBps);
      }
      std::sort(signature[i].second.begin(), signature[i].second.end());
    }
    std::vector<Signature> seen;  // new colour: index of the signature, in order of appearance
    for (int i = 0; i < n; ++i) {
      if (colour[i] < 0) continue;
      auto it = std::find(seen.begin(), seen.end(), signature[i]);
      colour[i] = static_cast<int>(it - seen.begin());
      if (it == seen.end()) seen.push_back(std::move(signature[i]));
    }
    if (static_cast<int>(seen.size()) == colours) return;  // stable: no class split
    colours = static_cast<int>(seen.size());
  }
}

std::vector<Group> machine_groups(const ServingProblem& p, const std::vector<MachineBound>& mb,
                                  bool hub, bool merge) {
  std::vector<int> colour(p.machines(), -1);
  std::vector<int> reps;
  for (int i = 0; i < p.machines(); ++i) {
    if (!mb[i].usable) continue;
    auto it =
        std::find_if(reps.begin(), reps.end(), [&](int r) { return merge && alike(p, mb, r, i); });
    colour[i] = static_cast<int>(it - reps.begin());
    if (it == reps.end()) reps.push_back(i);
  }
  if (merge && !hub) refine_by_links(p, colour);
  std::vector<Group> out;
  std::vector<int> index_of;  // colour -> group
  for (int i = 0; i < p.machines(); ++i) {
    if (colour[i] < 0) continue;
    if (colour[i] >= static_cast<int>(index_of.size())) index_of.resize(colour[i] + 1, -1);
    if (index_of[colour[i]] < 0) {
      index_of[colour[i]] = static_cast<int>(out.size());
      out.emplace_back();
    }
    out[index_of[colour[i]]].members.push_back(i);
  }
  return out;
}

// Columns and rows of the LP, per group of machines; see docs/serving.md ("Upper bounds") for
// why each holds.
class LinkLp {
 public:
  LinkLp(const ServingProblem& problem, bool merge) : p_(problem), mb_(machine_bounds(problem)) {
    L_ = problem.num_layers();
    hub_ = hub_equivalent(problem, mb_);
    groups_ = machine_groups(problem, mb_, hub_, merge);
  }

  int groups() const { return static_cast<int>(groups_.size()); }

  bool hub() const { return hub_; }

  void build(LpBuilder& lp) {
    add_machines(lp);
    if (hub_)
      add_hub_transfers(lp);
    else
      add_link_transfers(lp);
    add_clients(lp);
  }

 private:
  // Per group: in-rows (arrives with b layers done, b < L) and out-rows (leaves with b done,
  // b >= 1), the runs y[g, b, d] between them, its compute row and its NIC rows.
  void add_machines(LpBuilder& lp) {
    const int n = static_cast<int>(groups_.size());
    in_row_.assign(n, std::vector<int>(L_ + 1, -1));
    out_row_.assign(n, std::vector<int>(L_ + 1, -1));
    nic_out_row_.assign(n, -1);
    nic_in_row_.assign(n, -1);
    for (int g = 0; g < n; ++g) {
      const MachineBound& m = mb_[groups_[g].rep()];
      const double size = groups_[g].size();
      for (int b = 0; b < L_; ++b) in_row_[g][b] = lp.row(0, 0);
      for (int b = 1; b <= L_; ++b) out_row_[g][b] = lp.row(0, 0);
      // Each token that passes a machine spends 1 / capacity of its second, however few of the
      // machine's layers it runs (Helix's model); a run of d layers needs k >= d.
      const int compute_row = lp.row(-COIN_DBL_MAX, size);
      const int kmax = static_cast<int>(m.run_capacity.size()) - 1;
      for (int b = 0; b < L_; ++b) {
        for (int d = 1; d <= std::min(kmax, L_ - b); ++d) {
          const int y = lp.column(kInf);
          lp.add(in_row_[g][b], y, -1.0);
          lp.add(out_row_[g][b + d], y, 1.0);
          lp.add(compute_row, y, kUnit / m.run_capacity[d]);
        }
      }
      nic_out_row_[g] = lp.limit_row(size * m.out_tokens);
      nic_in_row_[g] = lp.limit_row(size * m.in_tokens);
    }
  }

  // Links of one kind from a group to a group: how many, of which bandwidth.
  struct LinkKind {
    int to = 0;
    double bandwidth_GBps = 0;
    int count = 0;
  };

  // The kinds of link out of group gi, by group they lead to and then bandwidth.
  std::vector<LinkKind> link_kinds_from(int gi) const {
    std::vector<LinkKind> out;
    for (int gj = 0; gj < static_cast<int>(groups_.size()); ++gj) {
      std::map<double, int> links;  // bandwidth -> how many links from gi's machines to gj's
      for (int i : groups_[gi].members)
        for (int j : groups_[gj].members)
          if (i != j)
            if (const auto link = p_.cluster.link(i, j)) ++links[link->bandwidth_GBps];
      for (const auto& [bandwidth, count] : links) out.push_back({gj, bandwidth, count});
    }
    return out;
  }

  // Per pair of groups, kind of link and inner boundary, one column: tokens that leave a machine
  // of gi with b layers done for one of gj over such a link. Its links together carry at most
  // their number times one link's tokens/s. The columns of gi at b compete in one pool of the
  // column generation; those over all but gi's kKeptLinkKinds fastest kinds wait outside the LP
  // until their reduced cost asks for them (on a fully linked cluster most flow takes the fast
  // links: 3cluster24.ini's links within a region).
  void add_link_transfers(LpBuilder& lp) {
    for (int gi = 0; gi < static_cast<int>(groups_.size()); ++gi) {
      const std::vector<LinkKind> kinds = link_kinds_from(gi);
      std::vector<int> by_speed(kinds.size());
      std::iota(by_speed.begin(), by_speed.end(), 0);
      std::stable_sort(by_speed.begin(), by_speed.end(), [&](int a, int b) {
        return kinds[a].bandwidth_GBps > kinds[b].bandwidth_GBps;
      });
      std::vector<char> deferred(kinds.size(), 1);
      for (size_t r = 0; r < std::min(by_speed.size(), kKeptLinkKinds); ++r)
        deferred[by_speed[r]] = 0;
      for (size_t k = 0; k < kinds.size(); ++k) add_link_kind(lp, gi, kinds[k], deferred[k]);
    }
  }

  void add_link_kind(LpBuilder& lp, int gi, const LinkKind& kind, bool deferred) {
    const double tokens = per_token(kind.bandwidth_GBps, p_.model.activation_bytes_per_token);
    const int gj = kind.to;
    const int link_row = link_implied(mb_, groups_[gi].rep(), groups_[gj].rep(), tokens)
                             ? -1
                             : lp.limit_row(kind.count * tokens);
    for (int b = 1; b < L_; ++b) {
      const int f = lp.pooled_column(gi * L_ + b, deferred);
      lp.add(out_row_[gi][b], f, -1.0);
      lp.add(in_row_[gj][b], f, 1.0);
      lp.add(link_row, f, 1.0);
      lp.add(nic_out_row_[gi], f, 1.0);
      lp.add(nic_in_row_[gj], f, 1.0);
    }
  }

  // Per inner boundary b: u[g] leaves group g for the hub, v[g] enters g from it, H the total.
  // u + v <= H per machine keeps a machine from feeding itself (with the totals equal, exactly
  // when a transportation without self-loops exists); summed over a group, u[g] + v[g] <= size H.
  void add_hub_transfers(LpBuilder& lp) {
    for (int b = 1; b < L_; ++b) {
      const int total = lp.column(kInf);
      const int sent_row = lp.row(0, 0), received_row = lp.row(0, 0);
      lp.add(sent_row, total, -1.0);
      lp.add(received_row, total, -1.0);
      for (size_t g = 0; g < groups_.size(); ++g) {
        const int u = lp.column(kInf), v = lp.column(kInf);
        lp.add(out_row_[g][b], u, -1.0);
        lp.add(in_row_[g][b], v, 1.0);
        lp.add(sent_row, u, 1.0);
        lp.add(received_row, v, 1.0);
        const int no_self = lp.row(-COIN_DBL_MAX, 0);
        lp.add(no_self, u, 1.0);
        lp.add(no_self, v, 1.0);
        lp.add(no_self, total, -groups_[g].size());
        lp.add(nic_out_row_[g], u, 1.0);
        lp.add(nic_in_row_[g], v, 1.0);
      }
    }
  }

  // Token ids from the clients enter at b = 0 and leave for them at b = L; the objective is what
  // enters. A machine's outbound NIC row counts activations; a token id weighs token / activation
  // bytes of one (a machine holding the last layer sends only token ids, any other activations).
  void add_clients(LpBuilder& lp) {
    const ServingModel& model = p_.model;
    const double tb = model.token_bytes, act = model.activation_bytes_per_token;
    const int source_row = lp.limit_row(per_token(p_.cluster.source_nic_GBps, tb));
    const int sink_row = lp.limit_row(per_token(p_.cluster.sink_nic_GBps, tb));
    for (size_t g = 0; g < groups_.size(); ++g) {
      const int i = groups_[g].rep();
      const double size = groups_[g].size();
      const Machine& m = p_.cluster.machines()[i];
      if (const auto link = p_.cluster.link(kSource, i)) {
        // The flow graph caps this edge by the link and the inbound NIC at token-id size, apart
        // from the activations the NIC takes (flow.cpp).
        const int s = lp.column(
            size * std::min(per_token(link->bandwidth_GBps, tb), per_token(m.nic_in_GBps, tb)),
            1.0);
        lp.add(in_row_[g][0], s, 1.0);
        lp.add(source_row, s, 1.0);
      }
      if (const auto link = p_.cluster.link(i, kSink)) {
        const int t = lp.column(size * per_token(link->bandwidth_GBps, tb));
        lp.add(out_row_[g][L_], t, -1.0);
        lp.add(sink_row, t, 1.0);
        lp.add(nic_out_row_[g], t, tb / act);
      }
    }
  }

  const ServingProblem& p_;
  std::vector<MachineBound> mb_;
  int L_ = 0;
  bool hub_ = false;
  std::vector<Group> groups_;
  std::vector<std::vector<int>> in_row_, out_row_;  // [group][b]
  std::vector<int> nic_out_row_, nic_in_row_;       // per group; -1: unlimited
};

}  // namespace

std::optional<LinkBound> link_upper_bound(const ServingProblem& problem,
                                          const LinkBoundOptions& options) {
  const auto t0 = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  LinkLp model(problem, options.merge_alike_machines);
  LpBuilder lp;
  model.build(lp);
  LinkBound result;
  result.hub = model.hub();
  result.groups = model.groups();
  result.columns = lp.columns();
  result.rows = lp.row_count();
  if (result.columns == 0 || result.rows == 0) {  // no machine can run a layer
    result.elapsed_s = elapsed();
    return result;
  }
  const auto optimum = maximise(lp, options.time_limit_s - elapsed(), options.generate_columns);
  if (!optimum) return std::nullopt;
  result.tokens_per_s = std::max(0.0, optimum->objective * kUnit);
  result.rounds = optimum->rounds;
  result.columns_solved = optimum->columns_solved;
  result.elapsed_s = elapsed();
  return result;
}

TightestBound tightest_bound(double helix_tokens_per_s, std::optional<double> milp_lp_tokens_per_s,
                             std::optional<double> link_lp_tokens_per_s) {
  TightestBound best{helix_tokens_per_s, "helix"};
  // Equal within rounding (the LPs equal Helix's bound on fully linked clusters): the later kind
  // names it, so that the name does not flip with the last digit.
  auto consider = [&](const std::optional<double>& bound, const char* kind) {
    if (!bound || !(*bound <= best.tokens_per_s * (1 + 1e-9))) return;
    best = {std::min(*bound, best.tokens_per_s), kind};
  };
  consider(milp_lp_tokens_per_s, "milp_lp");
  consider(link_lp_tokens_per_s, "link_lp");
  return best;
}

}  // namespace hetplan::serve
