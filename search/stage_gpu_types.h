// Whether a strategy's explicit stages name GPU types its cluster has: predict refuses a stage
// on a GPU type the cluster lacks (the search only writes stages on the cluster's own types).
#pragma once

#include <optional>

#include "costmodel/hardware.h"
#include "search/rules.h"
#include "search/strategy.h"

namespace hetplan {

// The first stage whose gpu_type (one type, or several joined by '+') names a type no node group
// of `cluster` has: key "stages[i].gpu_type", with the cluster's types in the reason. nullopt
// when every stage's types are the cluster's (or the strategy has no explicit stages).
std::optional<RuleViolation> stage_gpu_type_problem(const Strategy& s, const ClusterSpec& cluster);

}  // namespace hetplan
