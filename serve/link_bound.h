// An upper bound on the max flow of every placement that respects the cluster's links: a linear
// program over (machine, layers done) whose flows follow the links, which every placement's max
// flow satisfies (argument in docs/serving.md, "Upper bounds"). On a sparse topology such as
// Helix's simulator_cluster.ini it is far tighter than the bounds that ignore links.
#pragma once

#include <optional>
#include <string>

#include "serve/capacity.h"

namespace hetplan::serve {

// The link-aware LP bound and what it took.
struct LinkBound {
  double tokens_per_s = 0;
  double elapsed_s = 0;  // building the LP and solving it
  int columns = 0, rows = 0;
  int rounds = 0;          // LPs solved: more than 1 when link columns entered as they were needed
  int columns_solved = 0;  // columns of the last LP solved (column generation leaves some out)
  bool hub = false;  // machine-to-machine links aggregated per layer boundary (see link_bound.cpp)
  int groups = 0;    // groups of interchangeable machines the LP's rows are per
};

// How to solve it. Both shortcuts give the same bound; turning them off is for tests.
struct LinkBoundOptions {
  double time_limit_s = 10;
  // Interchangeable machines (alike, with as many links of each bandwidth to and from each group)
  // share rows and columns.
  bool merge_alike_machines = true;
  // Link columns enter the LP when their reduced cost asks for them (column_generation.h), where
  // most of them would wait; false solves the whole LP at once.
  bool generate_columns = true;
};

// Solves the link-aware LP with Clp. Empty when it is not solved within `options.time_limit_s`.
std::optional<LinkBound> link_upper_bound(const ServingProblem& problem,
                                          const LinkBoundOptions& options = {});

// Which of the valid upper bounds is the tightest.
struct TightestBound {
  double tokens_per_s = 0;
  std::string kind;  // "link_lp", "milp_lp" or "helix"
};

// The least of Helix's bound and the two LP bounds where they were computed; on a tie the
// link-aware one, then the MILP's, names the bound.
TightestBound tightest_bound(double helix_tokens_per_s, std::optional<double> milp_lp_tokens_per_s,
                             std::optional<double> link_lp_tokens_per_s);

}  // namespace hetplan::serve
