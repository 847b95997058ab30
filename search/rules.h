// The rules a strategy keeps before it is costed: one table for the evaluator's first step, the
// search's pruning and predict's messages (a broken rule is infeasible with its reason in the
// search, bad input naming the strategy key in predict). Each rule has the code the search counts
// it under and the strategy key it is about.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "costmodel/framework.h"
#include "costmodel/hardware.h"
#include "costmodel/model.h"
#include "search/strategy.h"

namespace hetplan {

// What the rules see besides the strategy. `cluster_gpus` 0: no cluster (no rule about its size).
struct RuleContext {
  const ModelSpec& model;
  const FrameworkSpec& framework;
  int64_t cluster_gpus = 0;
  const ClusterSpec* cluster = nullptr;  // nullptr: no rule about its GPUs
};

struct StrategyRule {
  std::string_view code;  // "batch", "tp", "zero", "schedule", ...
  std::string_view key;   // the strategy key a broken rule is about ("global_batch", "tp", ...)
  std::string (*broken)(const RuleContext&, const Strategy&);  // "" when kept, else why not
};

// Every rule, in the order they are checked (cheap and structural first).
const std::vector<StrategyRule>& strategy_rules();

struct RuleViolation {
  std::string code, key, reason;
};
// Whether the strategy's shape lets the experts' all-to-alls overlap (Megatron-Core's assertions
// for --overlap-moe-expert-parallel-comm: ep > 1, the all-to-all dispatcher, no full
// recomputation, virtual stages with a pipeline).
bool ep_comm_overlap_fits(const Strategy& s);

// The first rule `s` breaks, if any. `only_model` checks the rules that need neither the cluster
// nor the framework (hetplan measure's, before a harness run).
std::optional<RuleViolation> first_broken_rule(const RuleContext& context, const Strategy& s);

// Why `s` breaks the rule of code `code` ("" when it keeps it): for asking one rule of a probe
// strategy, e.g. whether a search option is one the framework runs, in the rule's own words.
std::string rule_problem(std::string_view code, const RuleContext& context, const Strategy& s);

// What the framework file asks for that hetplan does not know (a schedule it does not simulate);
// "" when nothing. Checked once where a framework is used.
std::string framework_problem(const FrameworkSpec& framework);

// How a strategy names its framework: the preset's name, or the path of a framework file.
std::string framework_reference(const FrameworkSpec& framework);

// The strategy with every switch it did not set itself (Strategy::given) taken from the
// framework's defaults, and `framework` set to its name. With the model, a default the model's
// dtype rules out gives way: where the framework's fused attention does not take the model's
// dtype (can_run.fused_attention_dtypes; Transformer Engine's and FlashAttention's take fp16 and
// bf16), its attention is unfused.
Strategy with_framework_defaults(Strategy s, const FrameworkSpec& framework,
                                 const ModelSpec* model = nullptr);

}  // namespace hetplan
