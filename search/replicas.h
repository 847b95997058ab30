// Replica groups inside a pipeline stage (issue 38): the rules a strategy with them keeps, what
// the first version runs, the uniform strategy each group is costed as, and the split of a
// stage's samples between groups in proportion to their speed.
//
// Group g of every stage forms pipeline g: its replicas send their activations to group g of the
// next stage. So every stage lists as many groups, and group g has the same samples, micro-batch
// and replica count in every stage; its GPU type and tensor width may change from stage to stage
// (Sailor's OPT-350M plan: V100 x 4 in stage 0 feeding A100 x 1 in stage 1).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "search/strategy.h"

namespace hetplan {

// Where a replica group rule is broken: the reason, and the key it is about, on stage `stage`
// (-1: the strategy's own key) and its group `group` (-1: the stage's key).
struct ReplicaProblem {
  std::string reason;
  std::string key;
  int64_t stage = -1, group = -1;
};

// The first rule the replica groups break as far as the strategy alone can tell (the model and the
// cluster are checked where they are known); nullopt when none or no stage lists replicas.
std::optional<ReplicaProblem> replicas_problem(const Strategy& s);

// What the first version does not cost with replica groups (cp, ep, ZeRO, virtual stages,
// sequence parallelism): the reason, or "" when it runs the strategy.
std::string replicas_limit(const Strategy& s);

// Group `g` of stage `k` as a uniform strategy: its tp and micro-batch, its replicas as dp, and as
// global batch its busiest replica's micro-batches on every replica; every stage keeps its layers
// only (no devices, no replicas).
Strategy group_strategy(const Strategy& s, size_t k, size_t g);

// Pipelines (groups per stage) of a strategy with replicas; 0 without.
size_t replica_pipelines(const Strategy& s);

// Splits `total` samples over groups in proportion to `samples_per_s`, each share a whole number
// of `granule` samples (a group's replicas x micro-batch) and at least one granule; the remainder
// goes to the group whose finish time it delays least. Empty when `total` cannot be made of the
// granules that way. A granule of micro_batch lets a group's replicas differ by one micro-batch.
std::vector<int64_t> split_samples(const std::vector<double>& samples_per_s,
                                   const std::vector<int64_t>& granule, int64_t total);

}  // namespace hetplan
