// Solving a maximisation LP with Clp by column generation: columns marked deferred stay out of the
// LP until the duals of the LP solved so far say they would raise the objective. Once no left-out
// column has a positive reduced cost, the solution solves the whole LP (its duals are feasible for
// every column), so the optimum is the whole LP's, within Clp's tolerances. It pays when most
// columns are deferred and few of them are needed (the link-aware bound on a fully linked cluster:
// docs/serving.md, "Upper bounds").
#pragma once

#include <optional>
#include <vector>

namespace hetplan::serve {

// An LP as Clp takes it: bounds and objective per column, bounds per row, coefficients as
// (row, column, value) triplets; plus which columns may wait.
struct SparseLp {
  std::vector<double> col_lb, col_ub, obj, row_lb, row_ub;
  std::vector<int> rows, cols;
  std::vector<double> values;
  // Per column: the pool it competes in (-1: none, always in the LP), and whether it starts out.
  // Each round at most one column per pool enters, the one with the highest reduced cost.
  std::vector<int> pool;
  std::vector<char> deferred;

  int columns() const { return static_cast<int>(col_lb.size()); }
  int row_count() const { return static_cast<int>(row_lb.size()); }
};

// The optimum and what it took.
struct LpOptimum {
  double objective = 0;
  int rounds = 0;          // LP solves: 1 when nothing was deferred or nothing needed to enter
  int columns_solved = 0;  // columns of the last LP solved
};

// Maximises `lp` with Clp. With `generate_columns` false, or when at most half of the pooled
// columns are deferred (then the rounds cost more than the columns left out save), the whole LP
// is solved at once. Empty when not solved to optimality within `time_limit_s`.
std::optional<LpOptimum> maximise(const SparseLp& lp, double time_limit_s, bool generate_columns);

}  // namespace hetplan::serve
