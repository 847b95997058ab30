// The pass orders a schedule may run: the named schedule's own constructions, or, under an
// activation limit, every construction of its family that stays within the limit. They depend
// only on the shape (schedule, p, m, chunks, limit); the simulator times them and keeps the
// fastest.
#pragma once

#include <string>
#include <vector>

#include "search/pipeline/pass_order.h"
#include "search/pipeline/schedule.h"

namespace hetplan::pipeline {

struct Candidates {
  bool feasible = true;
  std::string reason;
  std::vector<PassOrder> orders;
  bool try_guided = false;  // split-backward orders: also time them with the guided executor
};

// Shape of one schedule request, after defaults are applied.
struct Shape {
  const ScheduleInfo* info = nullptr;
  int devices = 1, microbatches = 1, chunks = 1, limit = 0;
  InterleavedOrder interleaved = InterleavedOrder::kMegatron;
  // Above kLargePasses passes only the first (primary) construction is built and it is timed
  // exactly, so that one simulation stays within tens of milliseconds.
  bool large = false;
};

inline constexpr double kLargePasses = 65536;

// Resolves defaults and checks the problem's shape; throws InputError when it is malformed.
Shape resolve_shape(std::string_view schedule, const PipelineProblem& problem);

// Smallest limit the family of `shape` can meet.
int minimum_limit(const Shape& shape);

Candidates build_candidates(const Shape& shape);

}  // namespace hetplan::pipeline
