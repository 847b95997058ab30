#include "serve/milp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <tuple>

#include <CbcHeuristic.hpp>
#include <CbcHeuristicLocal.hpp>
#include <CbcHeuristicRINS.hpp>
#include <CbcModel.hpp>
#include <CglFlowCover.hpp>
#include <CglGomory.hpp>
#include <CglKnapsackCover.hpp>
#include <CglMixedIntegerRounding2.hpp>
#include <CglProbing.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>

#include "serve/baselines.h"
#include "serve/flow.h"

namespace hetplan::serve {
namespace {

using Clock = std::chrono::steady_clock;

// Flows in the MILP are in thousands of tokens/s, so that coefficients stay near 1.
constexpr double kUnit = 1000.0;

// Machines of class c holding [s, s + k), and where their columns are.
struct Arc {
  int cls = 0, s = 0, k = 0;
  int n_col = 0;    // integer: how many machines
  int g_first = 0;  // flows entering at boundaries s .. s + entries - 1
  int entries = 0;
  double cap = 0;  // per machine, kilo-tokens/s
};

struct Model {
  std::vector<std::vector<int>> classes;
  std::vector<Arc> arcs;
  std::map<std::tuple<int, int, int>, int> arc_index;  // (class, s, k) -> arc
  std::vector<int> class_of;                           // machine -> class (-1: unusable)
  int columns = 0, rows = 0;
  OsiClpSolverInterface solver;
};

// Layer counts each class may hold: [lo, hi] per class.
using CountWindow = std::vector<std::pair<int, int>>;

void build(const ServingProblem& problem, const CountWindow& window, Model& m) {
  const int L = problem.num_layers();
  m.classes = machine_classes(problem);
  m.class_of.assign(problem.machines(), -1);
  std::vector<int> rows, cols;
  std::vector<double> elements, col_lb, col_ub, obj;
  std::vector<bool> integer;
  auto add_col = [&](double lb, double ub, double cost, bool is_int) {
    col_lb.push_back(lb);
    col_ub.push_back(ub);
    obj.push_back(cost);
    integer.push_back(is_int);
    return static_cast<int>(col_lb.size()) - 1;
  };
  auto add = [&](int row, int col, double value) {
    rows.push_back(row);
    cols.push_back(col);
    elements.push_back(value);
  };
  // Rows: one capacity row per arc (added as arcs appear), then one count row per class and one
  // conservation row per inner boundary; their indices are assigned after the arcs are known.
  std::vector<std::pair<int, int>> count_entries;       // (class, n column)
  std::vector<std::pair<int, int>> ends_at, enters_at;  // (boundary, g column)
  for (int c = 0; c < static_cast<int>(m.classes.size()); ++c) {
    const int rep = m.classes[c].front();
    const int kmax = problem.capacity[rep].max_layers;
    if (kmax == 0) continue;
    for (int i : m.classes[c]) m.class_of[i] = c;
    const double count = static_cast<double>(m.classes[c].size());
    const int k_lo = window.empty() ? 1 : std::max(1, window[c].first);
    const int k_hi = window.empty() ? kmax : std::min(kmax, window[c].second);
    for (int k = k_lo; k <= k_hi; ++k) {
      for (int s = 0; s + k <= L; ++s) {
        Arc a;
        a.cls = c;
        a.s = s;
        a.k = k;
        a.cap = machine_arc_capacity(problem, rep, {s, k}) / kUnit;
        if (!(a.cap > 0)) continue;
        const int cap_row = static_cast<int>(m.arcs.size());
        a.n_col = add_col(0, count, 0, true);
        add(cap_row, a.n_col, -a.cap);
        count_entries.emplace_back(c, a.n_col);
        a.g_first = static_cast<int>(col_lb.size());
        a.entries = problem.partial_inference ? k : 1;
        for (int e = 0; e < a.entries; ++e) {
          const int b = s + e;
          const int g = add_col(0, COIN_DBL_MAX, b == 0 ? 1.0 : 0.0, false);
          add(cap_row, g, 1.0);
          if (b > 0) enters_at.emplace_back(b, g);
          if (s + k < L) ends_at.emplace_back(s + k, g);
        }
        m.arc_index[{c, s, k}] = static_cast<int>(m.arcs.size());
        m.arcs.push_back(a);
      }
    }
  }
  const int arc_rows = static_cast<int>(m.arcs.size());
  const int count_row0 = arc_rows;
  const int flow_row0 = count_row0 + static_cast<int>(m.classes.size());
  for (const auto& [c, col] : count_entries) add(count_row0 + c, col, 1.0);
  for (const auto& [b, col] : ends_at) add(flow_row0 + b - 1, col, 1.0);
  for (const auto& [b, col] : enters_at) add(flow_row0 + b - 1, col, -1.0);
  // Every layer is held by at least one machine: valid for any placement with a positive flow,
  // and it cuts off the LP's favourite fractional solution (slivers of machines holding one
  // layer each, which makes the plain relaxation equal to Helix's trivial bound).
  const int cover_row0 = flow_row0 + (L - 1);
  for (const Arc& a : m.arcs)
    for (int l = a.s; l < a.s + a.k; ++l) add(cover_row0 + l, a.n_col, 1.0);
  m.rows = cover_row0 + L;
  m.columns = static_cast<int>(col_lb.size());

  std::vector<double> row_lb(m.rows), row_ub(m.rows);
  for (int r = 0; r < arc_rows; ++r) {
    row_lb[r] = -COIN_DBL_MAX;
    row_ub[r] = 0;
  }
  for (int c = 0; c < static_cast<int>(m.classes.size()); ++c) {
    row_lb[count_row0 + c] = -COIN_DBL_MAX;
    row_ub[count_row0 + c] = static_cast<double>(m.classes[c].size());
  }
  for (int b = 1; b < L; ++b) row_lb[flow_row0 + b - 1] = row_ub[flow_row0 + b - 1] = 0;
  for (int l = 0; l < L; ++l) {
    row_lb[cover_row0 + l] = 1;
    row_ub[cover_row0 + l] = COIN_DBL_MAX;
  }

  CoinPackedMatrix matrix(true, rows.data(), cols.data(), elements.data(),
                          static_cast<CoinBigIndex>(elements.size()));
  matrix.setDimensions(m.rows, m.columns);
  m.solver.loadProblem(matrix, col_lb.data(), col_ub.data(), obj.data(), row_lb.data(),
                       row_ub.data());
  for (int j = 0; j < m.columns; ++j)
    if (integer[j]) m.solver.setInteger(j);
  m.solver.setObjSense(-1.0);  // maximise the flow entering at layer 0
  m.solver.messageHandler()->setLogLevel(0);
}

// The MILP column values of `placement` (flows from an LP with the counts fixed), or empty when
// the placement does not fit the model.
std::vector<double> warm_start(const Model& m, const Placement& placement, double& objective) {
  std::vector<int> counts(m.arcs.size(), 0);
  for (size_t i = 0; i < placement.ranges.size(); ++i) {
    const LayerRange& r = placement.ranges[i];
    if (r.empty()) continue;
    const int c = m.class_of[i];
    auto it = c < 0 ? m.arc_index.end() : m.arc_index.find({c, r.start, r.count});
    if (it == m.arc_index.end()) return {};
    ++counts[it->second];
  }
  OsiClpSolverInterface lp(m.solver);
  for (size_t a = 0; a < m.arcs.size(); ++a) {
    lp.setColLower(m.arcs[a].n_col, counts[a]);
    lp.setColUpper(m.arcs[a].n_col, counts[a]);
  }
  lp.initialSolve();
  if (!lp.isProvenOptimal()) return {};
  objective = lp.getObjValue();
  std::vector<double> x(lp.getColSolution(), lp.getColSolution() + m.columns);
  for (size_t a = 0; a < m.arcs.size(); ++a) x[m.arcs[a].n_col] = counts[a];
  return x;
}

Placement decode(const ServingProblem& problem, const Model& m, const double* x) {
  Placement p;
  p.ranges.assign(problem.machines(), LayerRange{});
  std::vector<size_t> next(m.classes.size(), 0);
  for (const Arc& a : m.arcs) {
    int n = static_cast<int>(std::lround(x[a.n_col]));
    for (; n > 0 && next[a.cls] < m.classes[a.cls].size(); --n)
      p.ranges[m.classes[a.cls][next[a.cls]++]] = {a.s, a.k};
  }
  return p;
}

}  // namespace

std::optional<double> milp_upper_bound(const ServingProblem& problem, double time_limit_s) {
  const auto t0 = Clock::now();
  Model m;
  build(problem, {}, m);
  if (m.arcs.empty()) return 0.0;
  const double left_s = time_limit_s - std::chrono::duration<double>(Clock::now() - t0).count();
  if (!(left_s > 0)) return std::nullopt;
  m.solver.getModelPtr()->setMaximumSeconds(left_s);
  m.solver.initialSolve();
  if (!m.solver.isProvenOptimal()) return std::nullopt;
  return m.solver.getObjValue() * kUnit;
}

MilpResult solve_placement_milp(const ServingProblem& problem, const std::vector<Placement>& starts,
                                const MilpOptions& options) {
  const auto t0 = Clock::now();
  MilpResult result;
  // The best start under the exact max flow decides the neighbourhood.
  const Placement* incumbent = nullptr;
  double incumbent_flow = -1;
  for (const Placement& start : starts) {
    const double f = max_flow(problem, start);
    if (f > incumbent_flow) {
      incumbent_flow = f;
      incumbent = &start;
    }
  }
  CountWindow window;
  if (options.layer_count_window >= 0 && incumbent != nullptr) {
    const auto classes = machine_classes(problem);
    window.assign(classes.size(), {1 << 30, -1});
    for (size_t c = 0; c < classes.size(); ++c) {
      for (int i : classes[c]) {
        const int k = incumbent->ranges[i].count;
        if (k == 0) continue;
        window[c].first = std::min(window[c].first, k - options.layer_count_window);
        window[c].second = std::max(window[c].second, k + options.layer_count_window);
      }
      if (window[c].second < 0) window[c] = {1, std::max(1, options.layer_count_window)};  // unused
    }
  }
  Model m;
  build(problem, window, m);
  result.columns = m.columns;
  result.rows = m.rows;
  result.integer_columns = static_cast<int>(m.arcs.size());
  if (m.arcs.empty()) return result;

  auto left_s = [&] {
    return options.time_limit_s - std::chrono::duration<double>(Clock::now() - t0).count();
  };
  // The warm starts come first, whatever the time: they are what the MILP returns at least.
  std::vector<double> best_start;
  double best_start_obj = -1;
  for (const Placement& start : starts) {
    double obj = 0;
    auto x = warm_start(m, start, obj);
    if (!x.empty() && obj > best_start_obj) {
      best_start_obj = obj;
      best_start = std::move(x);
    }
  }

  // Root LP relaxation: an upper bound on any placement's max flow (0 when out of time).
  if (left_s() > 0) {
    OsiClpSolverInterface lp(m.solver);
    lp.getModelPtr()->setMaximumSeconds(left_s());
    lp.initialSolve();
    if (lp.isProvenOptimal()) result.lp_bound_tokens_per_s = lp.getObjValue() * kUnit;
  }

  CbcModel model(m.solver);
  model.setLogLevel(options.log ? 1 : 0);
  model.messageHandler()->setLogLevel(options.log ? 1 : 0);
  model.setUseElapsedTime(true);  // wall-clock limit, as the user asked for
  // What the LPs above took comes off CBC's share; with nothing left, the warm start stands.
  if (left_s() <= 0) {
    if (!best_start.empty()) {
      result.solved = true;
      result.placement = decode(problem, m, best_start.data());
      result.objective_tokens_per_s = best_start_obj * kUnit;
    }
    result.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
    return result;
  }
  model.setMaximumSeconds(left_s());
  model.setMaximumNodes(static_cast<int>(std::min<int64_t>(options.max_nodes, 1 << 30)));
  model.setRandomSeed(static_cast<int>(options.seed % 1000000007));
  if (options.threads > 1) {
    model.setNumberThreads(options.threads);
    model.setThreadMode(1);  // deterministic parallel branch and bound
  }
  CglProbing probing;
  probing.setUsingObjective(true);
  probing.setMaxPass(1);
  probing.setMaxProbe(10);
  probing.setMaxLook(10);
  CglGomory gomory;
  gomory.setLimit(100);
  CglKnapsackCover knapsack;
  CglMixedIntegerRounding2 mir;
  CglFlowCover flow_cover;
  model.addCutGenerator(&probing, -1, "Probing");
  model.addCutGenerator(&gomory, -1, "Gomory");
  model.addCutGenerator(&knapsack, -1, "Knapsack");
  model.addCutGenerator(&mir, -1, "MIR2");
  model.addCutGenerator(&flow_cover, -1, "FlowCover");
  CbcRounding rounding(model);
  model.addHeuristic(&rounding);
  CbcHeuristicLocal local(model);
  model.addHeuristic(&local);
  CbcHeuristicRINS rins(model);
  model.addHeuristic(&rins);
  if (!best_start.empty())
    model.setBestSolution(best_start.data(), m.columns, -best_start_obj, true);

  model.branchAndBound();
  result.nodes = model.getNodeCount();
  result.optimal = model.isProvenOptimal();
  result.best_bound_tokens_per_s = model.getBestPossibleObjValue() * kUnit;
  if (const double* x = model.bestSolution()) {
    result.solved = true;
    result.placement = decode(problem, m, x);
    result.objective_tokens_per_s = model.getObjValue() * kUnit;
  }
  result.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return result;
}

}  // namespace hetplan::serve
