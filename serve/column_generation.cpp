#include "serve/column_generation.h"

#include <chrono>

#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>

namespace hetplan::serve {
namespace {

using Clock = std::chrono::steady_clock;

// Generation pays when more than this share of the pooled columns starts out (3cluster24.ini:
// 87%, 5.6 s -> 0.6 s); with fewer left out, the extra rounds cost more than the smaller LP saves
// (Helix's high-heterogeneity Petals file: 23% left out, 0.7 s -> 1.5 s). docs/benchmarks.md.
constexpr double kLeastDeferredShare = 0.5;

bool worth_generating(const SparseLp& lp) {
  int pooled = 0, deferred = 0;
  for (int j = 0; j < lp.columns(); ++j) {
    pooled += lp.pool[j] >= 0;
    deferred += lp.pool[j] >= 0 && lp.deferred[j];
  }
  return deferred > kLeastDeferredShare * pooled;
}

// The columns of `lp` in the order of `which`, as Clp's addCols takes them.
struct ColumnBlock {
  std::vector<CoinBigIndex> starts{0};
  std::vector<int> rows;
  std::vector<double> values, lb, ub, obj;
};

ColumnBlock column_block(const SparseLp& lp, const CoinPackedMatrix& by_column,
                         const std::vector<int>& which) {
  ColumnBlock block;
  for (int j : which) {
    const CoinBigIndex start = by_column.getVectorStarts()[j];
    for (CoinBigIndex k = start; k < start + by_column.getVectorLengths()[j]; ++k) {
      block.rows.push_back(by_column.getIndices()[k]);
      block.values.push_back(by_column.getElements()[k]);
    }
    block.starts.push_back(static_cast<CoinBigIndex>(block.rows.size()));
    block.lb.push_back(lp.col_lb[j]);
    block.ub.push_back(lp.col_ub[j]);
    block.obj.push_back(lp.obj[j]);
  }
  return block;
}

// Loads the columns with `in_lp[j]` set, in index order and with the triplets in their order (so
// that with every column in, Clp sees exactly the LP that `lp` describes).
void load(OsiClpSolverInterface& solver, const SparseLp& lp, const std::vector<char>& in_lp) {
  std::vector<int> index(lp.columns(), -1);
  std::vector<double> lb, ub, obj;
  for (int j = 0; j < lp.columns(); ++j) {
    if (!in_lp[j]) continue;
    index[j] = static_cast<int>(lb.size());
    lb.push_back(lp.col_lb[j]);
    ub.push_back(lp.col_ub[j]);
    obj.push_back(lp.obj[j]);
  }
  std::vector<int> rows, cols;
  std::vector<double> values;
  for (size_t k = 0; k < lp.values.size(); ++k) {
    if (index[lp.cols[k]] < 0) continue;
    rows.push_back(lp.rows[k]);
    cols.push_back(index[lp.cols[k]]);
    values.push_back(lp.values[k]);
  }
  CoinPackedMatrix matrix(true, rows.data(), cols.data(), values.data(),
                          static_cast<CoinBigIndex>(values.size()));
  matrix.setDimensions(lp.row_count(), static_cast<int>(lb.size()));
  solver.loadProblem(matrix, lb.data(), ub.data(), obj.data(), lp.row_lb.data(), lp.row_ub.data());
  solver.setObjSense(-1.0);
}

// Per pool, the left-out column whose reduced cost `c_j - a_j y` is the highest above
// `tolerance`: the one that raises the objective most per unit. One per pool, because columns of
// a pool serve the same rows (a machine's flow out at one layer boundary), so that the next best
// is often no longer worth it once the best is in.
std::vector<int> entering_columns(const SparseLp& lp, const CoinPackedMatrix& by_column,
                                  const double* dual, const std::vector<char>& in_lp,
                                  double tolerance) {
  std::vector<std::pair<double, int>> best;  // per pool: (reduced cost, column)
  for (int j = 0; j < lp.columns(); ++j) {
    if (in_lp[j]) continue;
    double reduced = lp.obj[j];
    const CoinBigIndex start = by_column.getVectorStarts()[j];
    for (CoinBigIndex k = start; k < start + by_column.getVectorLengths()[j]; ++k)
      reduced -= by_column.getElements()[k] * dual[by_column.getIndices()[k]];
    if (!(reduced > tolerance)) continue;
    const int pool = lp.pool[j];
    if (pool >= static_cast<int>(best.size())) best.resize(pool + 1, {0.0, -1});
    if (best[pool].second < 0 || reduced > best[pool].first) best[pool] = {reduced, j};
  }
  std::vector<int> out;
  for (const auto& [reduced, j] : best)
    if (j >= 0) out.push_back(j);
  return out;
}

}  // namespace

std::optional<LpOptimum> maximise(const SparseLp& lp, double time_limit_s, bool generate_columns) {
  const auto t0 = Clock::now();
  auto left_s = [&] {
    return time_limit_s - std::chrono::duration<double>(Clock::now() - t0).count();
  };
  const bool generate = generate_columns && worth_generating(lp);
  std::vector<char> in_lp(lp.columns(), 1);
  if (generate)
    for (int j = 0; j < lp.columns(); ++j) in_lp[j] = lp.pool[j] < 0 || !lp.deferred[j];
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  load(solver, lp, in_lp);
  // Reduced costs need the columns one by one (built only when generating).
  CoinPackedMatrix by_column;
  if (generate)
    by_column = CoinPackedMatrix(true, lp.rows.data(), lp.cols.data(), lp.values.data(),
                                 static_cast<CoinBigIndex>(lp.values.size()));
  LpOptimum result;
  for (;;) {
    if (!(left_s() > 0)) return std::nullopt;
    solver.getModelPtr()->setMaximumSeconds(left_s());
    if (result.rounds++ == 0) {
      solver.initialSolve();
      // Added columns keep the basis primal feasible: primal simplex goes on from it.
      solver.setHintParam(OsiDoDualInResolve, false, OsiHintDo);
    } else {
      solver.resolve();
    }
    if (!solver.isProvenOptimal()) return std::nullopt;
    if (!generate) break;
    // Clp's own test for the columns it holds: no reduced cost above its dual tolerance.
    double tolerance = 0;
    solver.getDblParam(OsiDualTolerance, tolerance);
    const std::vector<int> entering =
        entering_columns(lp, by_column, solver.getRowPrice(), in_lp, tolerance);
    if (entering.empty()) break;
    for (int j : entering) in_lp[j] = 1;
    const ColumnBlock block = column_block(lp, by_column, entering);
    solver.addCols(static_cast<int>(entering.size()), block.starts.data(), block.rows.data(),
                   block.values.data(), block.lb.data(), block.ub.data(), block.obj.data());
  }
  result.objective = solver.getObjValue();
  result.columns_solved = solver.getNumCols();
  return result;
}

}  // namespace hetplan::serve
