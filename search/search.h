// The training strategy search: a pipeline of small pieces — a candidate generator over the
// strategy space, pruning predicates each with a reason, a cost evaluation (layer partition and
// prediction), and a deterministic ranking.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "search/evaluate.h"

namespace hetplan {

// The most GPUs a training search plans for. Past a few thousand GPUs the cost of each candidate
// grows with the GPUs (its placement lists every device): GPT-3 175B on p4d.24xlarge nodes costs
// 187, 97, 48 and 25 candidates per cpu-second at 16,384, 32,768, 65,536 and 131,072 GPUs, and
// the search's memory grows likewise (70 MiB at 16,384 GPUs, 328 MiB at 131,072, 1.85 GiB at
// 800,000; dev VM, 2026-12-01, docs/search.md "Limits").
// 131,072 GPUs, the largest training clusters of 2026 (issue 37), is about as far as a search of
// the full space can finish in minutes on 2 cores; a larger cluster is refused up front.
inline constexpr int64_t kMaxSearchGpus = int64_t{1} << 17;

// The search's default context widths keep at least this many tokens of a sequence per rank: the
// published runs use CP 2 for Llama 3.1 405B at 8,192 tokens (Megatron-Bridge's summary, issue 37)
// and CP 2-32 only for longer sequences. A pruning heuristic of the search, not a cost.
inline constexpr int64_t kMinContextChunkTokens = 4096;
// The published MoE runs use EP 8-64 (issue 37); wider expert groups are searched when asked.
inline constexpr int64_t kMaxSearchedExpertWidth = 64;
// The interleaved schedule's chunks per device searched: up to 8 (27 of the 33 published rows
// with virtual stages run 2 to 8; the others 12 to 24, Megatron-Bridge's summary, vp column): each
// count more costs the search its interleaved candidates again.
inline constexpr int64_t kMaxSearchedChunks = 8;

struct SearchOptions {
  int64_t global_batch = 0;
  int threads = 1;
  int64_t top_k = 10;
  bool exhaustive = false;  // evaluate every valid candidate: no bound pruning
  // The space is what the evaluator's framework can run, narrowed by these:
  std::vector<std::string> schedules;  // empty: every schedule the framework runs
  // Each where the framework runs it (can_run.recompute).
  std::vector<Recompute> recompute = {Recompute::kNone, Recompute::kSelective, Recompute::kFull,
                                      Recompute::kOp};
  bool sequence_parallel = true;  // also sequence parallelism where tp > 1
  int max_zero = 3;
  std::vector<int64_t> micro_batches;  // empty: the global batch's divisors up to 64 (each
                                       // candidate keeps those dividing its per-replica batch)
  std::vector<int64_t> tensor_widths;  // empty: powers of two up to twice a node's GPUs
  // Context-parallel widths. Empty: powers of two while each rank keeps at least
  // kMinContextChunkTokens of a sequence (1 alone below 8,192 tokens), where the framework runs
  // context parallelism.
  std::vector<int64_t> context_widths;
  // Expert-parallel widths of an MoE model. Empty: powers of two dividing the routed experts, up
  // to kMaxSearchedExpertWidth (dense models: 1).
  std::vector<int64_t> expert_widths;
  // Expert tensor widths tried besides tp (0 in the list: tp itself). Empty: tp, and 1 where the
  // framework runs an expert tensor width of its own.
  std::vector<int64_t> expert_tensor_widths;
  // Low-precision recipes tried. Empty: bf16 alone (a recipe changes the numerics: the user
  // chooses it, the search does not).
  std::vector<Precision> precisions;
  // Switches every candidate takes; unset: the framework's default (FrameworkSpec::defaults).
  std::optional<bool> flash_attention;
  std::optional<bool> grad_accumulation_fusion;  // as Strategy::grad_accumulation_fusion
  std::optional<bool> overlap_grad_reduce;       // as Strategy::overlap_grad_reduce
  std::optional<bool> tp_comm_overlap;           // where sequence parallel, as the Strategy's
  std::optional<bool> fp32_grad_reduce;          // as Strategy::fp32_grad_reduce
  std::optional<HostMode> host_mode;
  // LoRA fine-tuning for every candidate (rank 0: every parameter trains).
  Lora lora;
  // Also plans that leave whole node groups idle (every non-empty subset of the cluster's groups
  // is placed): a slow node kind may cost more in pipeline stages and links than it adds.
  bool allow_idle_nodes = false;
  // Wall-clock seconds the search may take (0: no limit). When they are spent it stops enumerating
  // or costing and returns the best found so far; SearchStats::time_limit_reached says so.
  double time_limit_s = 0;
  // Seconds on a monotonic clock, for the time limit: the steady clock when empty (tests step
  // their own).
  std::function<double()> clock_s;
  // Called from the searching thread now and then: candidates done, candidates in all (the
  // enumeration's shapes while it enumerates: `enumerating` true), the best iteration time so far.
  std::function<void(int64_t done, int64_t total, double best_s, bool enumerating)> progress;
};

struct RankedStrategy {
  Strategy strategy;
  Prediction predicted;
};

struct SearchStats {
  int64_t candidates = 0;  // points of the strategy space enumerated
  int64_t evaluated = 0;   // fully costed
  int64_t feasible = 0;
  std::map<std::string, int64_t> pruned;      // by reason, before costing
  std::map<std::string, int64_t> infeasible;  // by reason, after costing
  double elapsed_s = 0;
  double candidates_per_s = 0;
  double time_limit_s = 0;          // SearchOptions::time_limit_s (0: none)
  bool time_limit_reached = false;  // the result is the best of what was costed in time
};

struct SearchResult {
  std::vector<RankedStrategy> top;                 // best first
  std::vector<RankedStrategy> closest_infeasible;  // when nothing fits: the least-bad tries
  // When candidates were pruned because weights, gradients and optimizer state alone cannot fit:
  // the smallest such footprint per GPU any candidate reaches, and the device memory it faced.
  double min_static_bytes = 0;
  double static_limit_bytes = 0;
  SearchStats stats;
};

// Deterministic: the same inputs give the same result for any thread count. Throws InputError
// where an option asks for what the evaluator's framework cannot run.
SearchResult search_training(const Evaluator& evaluator, const SearchOptions& options);

Json to_json(const SearchStats& stats);

}  // namespace hetplan
