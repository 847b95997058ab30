// Issue 37 in the strategy, the rules, the evaluator and the search: context parallelism (world
// size dp x cp x tp x pp, gradients over dp x cp, activations of seq / cp tokens), expert
// parallelism (experts over ep x etp groups carved out of dp x cp x tp, their gradients and ZeRO
// shards over the expert data-parallel replicas), and the low-precision recipes (their GEMMs,
// weight copies and per-step quantisation).
#include <set>

#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/errors.h"
#include "costmodel/memory.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"
#include "search/evaluate.h"
#include "search/rules.h"
#include "search/search.h"
#include "search/strategy.h"
#include "test_util.h"

namespace hetplan {
namespace {

using testing::contains;
using testing::error_of;

using testing::read_strategy;

struct Planned {
  ModelSpec model;
  ClusterSpec cluster;
  CostModel cost;
  Evaluator ev;
  Planned(const std::string& m, const std::string& c,
          const std::string& framework = "megatron-core")
      : model(load_model(m)),
        cluster(load_cluster(c)),
        cost(load_profile_inputs({default_calibration_dir().string()}), cluster),
        ev(model, cluster, cost, load_framework(framework)) {}
};

TEST(ParallelStrategy, ReadsAndWritesTheNewKeys) {
  const Strategy s = read_strategy(R"({"dp": 4, "tp": 2, "pp": 2, "cp": 2, "ep": 8, "etp": 1,
      "cp_comm": "a2a+p2p", "cp_a2a": 2, "moe_dispatcher": "allgather", "moe_imbalance": 1.25,
      "precision": "fp8-blockwise", "micro_batch": 1, "global_batch": 16})");
  EXPECT_EQ(s.devices(), 4 * 2 * 2 * 2);
  EXPECT_EQ(s.rank_devices(), 16);
  EXPECT_EQ(s.grad_replicas(), 8);
  EXPECT_EQ(s.expert_tp(), 1);
  EXPECT_EQ(s.expert_dp(), 2);  // 16 devices / (ep 8 x etp 1)
  EXPECT_EQ(s.cp_comm, CpComm::kA2aP2p);
  EXPECT_EQ(s.moe_dispatcher, MoeDispatcher::kAllGather);
  EXPECT_EQ(s.precision, Precision::kFp8Blockwise);
  const Json j = to_json(s);
  EXPECT_EQ(j["cp"], 2);
  EXPECT_EQ(j["ep"], 8);
  EXPECT_EQ(j["etp"], 1);
  EXPECT_EQ(j["cp_comm"], "a2a+p2p");
  EXPECT_EQ(j["cp_a2a"], 2);
  EXPECT_EQ(j["precision"], "fp8-blockwise");
  EXPECT_EQ(j["moe_imbalance"], 1.25);
  // Defaults: no context or expert parallelism, bf16, the all-to-all dispatcher; etp follows tp.
  const Strategy d =
      read_strategy(R"({"dp": 2, "tp": 4, "pp": 1, "micro_batch": 1, "global_batch": 2})");
  EXPECT_EQ(d.cp, 1);
  EXPECT_EQ(d.ep, 1);
  EXPECT_EQ(d.etp, 0);
  EXPECT_EQ(d.expert_tp(), 4);
  EXPECT_EQ(d.precision, Precision::kBf16);
  EXPECT_EQ(d.moe_dispatcher, MoeDispatcher::kAllToAll);
  EXPECT_EQ(to_json(d)["etp"], 4);
  EXPECT_EQ(framework_switches(s), " fp8-blockwise");
  // Bad values name the file and the key.
  EXPECT_TRUE(contains(error_of([] {
                         read_strategy(
                             R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1,
                                  "precision": "fp6"})");
                       }),
                       "s.json: precision: expected one of"));
  EXPECT_TRUE(contains(error_of([] {
                         read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "cp": 0, "micro_batch": 1,
                                  "global_batch": 1})");
                       }),
                       "s.json: cp:"));
  EXPECT_TRUE(contains(error_of([] {
                         read_strategy(
                             R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1,
                                  "moe_imbalance": 0.5})");
                       }),
                       "s.json: moe_imbalance:"));
}

// Each rule Megatron-Core applies, as an infeasible value with its code.
TEST(ParallelStrategy, BrokenRulesAreInfeasibleWithTheirCode) {
  const Planned moe("qwen3-30b-a3b", "dgx-h100:2");
  const auto broken = [&](const Planned& x, const std::string& json) {
    const Prediction p = x.ev.predict(read_strategy(json));
    EXPECT_FALSE(p.feasible) << json;
    EXPECT_EQ(p.kind, Infeasible::kRule) << json;
    return p.rule + ": " + p.reason;
  };
  // ep must divide the 128 experts.
  EXPECT_TRUE(contains(broken(moe, R"({"dp": 12, "tp": 1, "pp": 1, "ep": 3, "micro_batch": 1,
                                      "global_batch": 12})"),
                       "ep: ep 3 does not divide the 128 experts"));
  // ep x etp is carved out of dp x cp x tp.
  EXPECT_TRUE(contains(broken(moe, R"({"dp": 2, "tp": 1, "pp": 8, "ep": 4, "micro_batch": 1,
                                      "global_batch": 16})"),
                       "ep: ep x etp = 4 x 1 does not divide dp x cp x tp = 2"));
  // Expert parallelism at tp > 1 needs sequence parallelism.
  EXPECT_TRUE(contains(broken(moe, R"({"dp": 8, "tp": 2, "pp": 1, "ep": 8, "micro_batch": 1,
                                      "global_batch": 8})"),
                       "ep: expert parallelism, an expert tensor width other than tp or the "
                       "all-to-all dispatcher at tp > 1 needs sequence parallelism"));
  // Context parallelism: fused attention, 2 x cp chunks of the sequence (4096).
  EXPECT_TRUE(contains(broken(moe, R"({"dp": 8, "tp": 1, "pp": 1, "cp": 2, "micro_batch": 1,
                                      "global_batch": 8, "flash_attention": false})"),
                       "cp: context parallelism runs fused attention"));
  EXPECT_TRUE(contains(broken(moe, R"({"dp": 4, "tp": 1, "pp": 1, "cp": 3, "micro_batch": 1,
                                      "global_batch": 4})"),
                       "cp: cp 3 needs the sequence"));
  // MXFP8 is Blackwell's; the H100 has fp8 tensor cores without block scaling.
  EXPECT_TRUE(contains(broken(moe, R"({"dp": 16, "tp": 1, "pp": 1, "ep": 16, "micro_batch": 1,
                                      "global_batch": 16, "precision": "mxfp8"})"),
                       "precision: h100-sxm has no block-scaled (Blackwell) tensor cores"));
  // A dense model has no experts to spread.
  const Planned dense("llama3-8b", "dgx-h100:1");
  EXPECT_TRUE(contains(broken(dense, R"({"dp": 8, "tp": 1, "pp": 1, "ep": 8, "micro_batch": 1,
                                        "global_batch": 8})"),
                       "ep: llama3-8b has no routed experts"));
  // What a framework cannot run: DeepSpeed's context parallelism is Ulysses' all-to-all.
  const Planned ds("llama3-8b", "dgx-h100:1", "deepspeed");
  EXPECT_TRUE(contains(broken(ds, R"({"dp": 4, "tp": 1, "pp": 1, "cp": 2, "micro_batch": 1,
                                     "global_batch": 4})"),
                       "cp: deepspeed runs context parallelism by a2a, not p2p"));
  EXPECT_TRUE(contains(broken(ds, R"({"dp": 8, "tp": 1, "pp": 1, "micro_batch": 1,
                                     "global_batch": 8, "precision": "fp8-current"})"),
                       "precision: deepspeed runs the precisions bf16, not fp8-current"));
  // fp8 needs Hopper's (or Ada's) tensor cores: the V100 has none.
  const Planned volta("gpt2-medium", "p3.8xlarge:1");
  EXPECT_TRUE(contains(broken(volta, R"({"dp": 4, "tp": 1, "pp": 1, "micro_batch": 1,
                                        "global_batch": 4, "precision": "fp8-delayed"})"),
                       "precision: v100"));
}

// Context parallelism: the same 16 GPUs as dp 8 or as dp 4 x cp 2; each rank then holds half the
// tokens, so half the activations, and attention's key-value exchange joins its passes.
TEST(ParallelStrategy, ContextParallelismHalvesEachRanksActivations) {
  const Planned x("llama3-8b", "dgx-h100:2");
  Strategy s = read_strategy(R"({"dp": 8, "tp": 2, "pp": 1, "micro_batch": 1, "global_batch": 64,
                        "sequence_parallel": true, "zero": 1})");
  Strategy c = s;
  c.dp = 4;
  c.cp = 2;
  c.global_batch = 32;  // the same 8 micro-batches per data-parallel replica
  const Prediction a = x.ev.predict(s), b = x.ev.predict(c);
  ASSERT_TRUE(a.feasible && b.feasible) << a.reason << b.reason;
  EXPECT_EQ(b.stages[0].stage.devices.size(), 16u);
  // Exactly half: every activation held is per token (flash attention keeps no s x s scores, and
  // Korthikanti et al.'s other terms are s b h multiples), and each rank holds half the tokens.
  const double ratio = b.stages[0].memory.activations / a.stages[0].memory.activations;
  EXPECT_NEAR(ratio, 0.5, 1e-12);
  // The distributed optimizer shards over dp x cp = 8 ranks in both.
  EXPECT_NEAR(b.stages[0].memory.optimizer, a.stages[0].memory.optimizer,
              1e-9 * a.stages[0].memory.optimizer);
  // Half the samples per iteration, each micro-batch's pass on half the tokens and a little more
  // (the exchange of keys and values that the attention blocks do not hide).
  EXPECT_LT(b.iteration_s, a.iteration_s);
  EXPECT_GT(b.iteration_s, 0.5 * a.iteration_s);
}

// Expert parallelism: at ep 16 over 16 ranks every rank holds 8 of Qwen3-30B-A3B's 128 experts,
// and the experts' gradients have no replica to be reduced with (expert_dp 1).
TEST(ParallelStrategy, ExpertsAreShardedOverEpAndReducedOverTheirReplicas) {
  const Planned x("qwen3-30b-a3b", "dgx-h100:2");
  Strategy s = read_strategy(R"({"dp": 16, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 64,
                        "zero": 1})");
  Strategy e = s;
  e.ep = 16;
  const Prediction a = x.ev.predict(s), b = x.ev.predict(e);
  ASSERT_GT(a.stages.size(), 0u);
  ASSERT_TRUE(b.feasible) << b.reason;
  // 30.5B parameters, 29.0B of them in routed experts: at ep 16 a rank holds 1.5B + 29.0B / 16.
  const double all = static_cast<double>(x.model.parameters());
  double experts = 0;
  for (const auto& l : x.model.layers) experts += static_cast<double>(expert_parameters(l));
  const double held = all - experts + experts / 16;
  EXPECT_NEAR(b.stages[0].memory.weights, 2 * held, 0.01 * 2 * held);
  EXPECT_NEAR(a.stages[0].memory.weights, 2 * all, 0.01 * 2 * all);
  // The experts' gradients are not reduced at ep 16: far less to synchronise.
  EXPECT_LT(b.stages[0].dp_sync_s, 0.2 * a.stages[0].dp_sync_s);
  // Their dispatch and combine cross the two nodes: a part of the breakdown of its own.
  const auto part = [](const Prediction& p, const std::string& name) {
    for (const auto& [key, s] : p.breakdown)
      if (key == name) return s;
    return -1.0;
  };
  EXPECT_GT(part(b, "ep_comm"), 0.05 * b.iteration_s);
  EXPECT_EQ(part(b, "cp_comm"), 0.0);
  EXPECT_GT(b.stages[0].ep_comm_s, 0.0);
  double sum = 0;
  for (const auto& [key, s] : b.breakdown) sum += s;
  EXPECT_NEAR(sum, b.iteration_s, 1e-9 * b.iteration_s);
  // Megatron-Core's batch-level overlap hides the all-to-alls behind another micro-batch's
  // compute: only what the layer's compute cannot cover stays.
  Strategy o = e;
  o.ep_comm_overlap = true;
  const Prediction c = x.ev.predict(o);
  ASSERT_TRUE(c.feasible) << c.reason;
  EXPECT_LT(part(c, "ep_comm"), part(b, "ep_comm"));
  EXPECT_NEAR(b.iteration_s - c.iteration_s, part(b, "ep_comm") - part(c, "ep_comm"),
              1e-6 * b.iteration_s);
  EXPECT_NEAR(part(c, "compute"), part(b, "compute"), 1e-6 * b.iteration_s);
  // It needs virtual stages with a pipeline (Megatron-Core asserts it).
  Strategy piped = o;
  piped.dp = 8;
  piped.pp = 2;
  piped.ep = 8;
  const Prediction refused = x.ev.predict(piped);
  EXPECT_EQ(refused.rule, "ep_comm_overlap") << refused.reason;
}

// ZeRO shards the dense parameters' states over dp and the experts' over their own replicas; a
// recipe's weight copies join the weights. Megatron's layout (2 + 4 + 12 B per parameter).
TEST(ParallelStrategy, DeviceMemoryShardsExpertsOverTheirReplicas) {
  MemoryInput in;
  in.param_count = 10;
  in.expert_param_count = 6;
  in.dp = 4;
  in.expert_dp = 2;
  in.zero = 1;
  in.low_precision_weight_bytes = 5;
  const MemoryBreakdown m = device_memory(in);
  EXPECT_DOUBLE_EQ(m.weights, 2 * 10 + 5);
  EXPECT_DOUBLE_EQ(m.gradients, 4 * 10);
  EXPECT_DOUBLE_EQ(m.optimizer, 4 * 12 / 4.0 + 6 * 12 / 2.0);
  in.zero = 3;
  const MemoryBreakdown z3 = device_memory(in);
  EXPECT_DOUBLE_EQ(z3.weights, 4 * 2 / 4.0 + 6 * 2 / 2.0 + 5 / 4.0);
  // Weights held in the recipe alone (--fp8-param-gather): 3 parameters without their 2 B.
  in.zero = 1;
  in.low_precision_only_param_count = 3;
  EXPECT_DOUBLE_EQ(device_memory(in).weights, 2 * 10 + 5 - 3 * 2);
}

// An fp8 recipe runs the blocks' GEMMs at the fp8 rate (faster on the H100), keeps fp8 copies of
// their weights beside the bf16 ones, and keeps their inputs for backward in fp8.
TEST(ParallelStrategy, Fp8IsFasterAndKeepsWeightCopies) {
  const Planned x("llama3-8b", "dgx-h100:1");
  Strategy s = read_strategy(R"({"dp": 4, "tp": 2, "pp": 1, "micro_batch": 1, "global_batch": 64,
                        "zero": 1, "sequence_parallel": true})");
  Strategy f = s;
  f.precision = Precision::kFp8Current;
  f = with_framework_defaults(f, x.ev.framework());
  s = with_framework_defaults(s, x.ev.framework());
  const Prediction a = x.ev.predict(s), b = x.ev.predict(f);
  ASSERT_TRUE(a.feasible && b.feasible) << a.reason << b.reason;
  EXPECT_LT(b.iteration_s, 0.95 * a.iteration_s);
  // Held in fp8 alone, a weight and its transpose take Hopper the 2 B its bf16 weight did.
  EXPECT_NEAR(b.stages[0].memory.weights, a.stages[0].memory.weights,
              1e-6 * a.stages[0].memory.weights);
  EXPECT_GT(b.stages[0].optimizer_s, a.stages[0].optimizer_s);  // the weights quantised again
  // Megatron-Bridge's fp8 recipes hold those weights in fp8 alone (fp8_param_gather): the
  // framework's default; without it the bf16 weights stay beside their copies.
  EXPECT_TRUE(f.low_precision_params);
  Strategy both = f;
  both.low_precision_params = false;
  const Prediction c = x.ev.predict(both);
  EXPECT_GT(c.stages[0].memory.weights, 1.5 * b.stages[0].memory.weights);
  // The linear layers' inputs are kept as their fp8 copies (1 B an element, not 2).
  EXPECT_LT(b.stages[0].memory.activations, 0.9 * a.stages[0].memory.activations);
  EXPECT_GT(b.stages[0].memory.activations, 0.5 * a.stages[0].memory.activations);
}

// The search spreads an MoE model's experts where the framework can, tries the recipes asked
// for, and refuses recipes the framework lacks.
TEST(ParallelSearch, ExpertWidthsAndRecipesAreSearched) {
  const Planned x("qwen3-30b-a3b", "dgx-h100:2");
  SearchOptions o;
  o.global_batch = 256;
  o.top_k = 5;
  o.tensor_widths = {1, 2};
  o.max_zero = 1;
  o.precisions = {Precision::kBf16, Precision::kFp8Current};
  const SearchResult r = search_training(x.ev, o);
  ASSERT_FALSE(r.top.empty());
  bool spread = false;
  for (const auto& t : r.top) spread |= t.strategy.ep > 1;
  EXPECT_TRUE(spread);
  EXPECT_GT(r.stats.pruned.at("ep"), 0);  // widths that do not divide a rank's devices
  EXPECT_EQ(r.top.front().strategy.precision, Precision::kFp8Current);
  for (const auto& t : r.top) EXPECT_EQ(t.strategy.devices(), 16);
  const Planned ds("llama3-8b", "dgx-h100:1", "deepspeed");
  SearchOptions bad;
  bad.global_batch = 64;
  bad.precisions = {Precision::kFp8Current};
  EXPECT_TRUE(contains(error_of([&] { search_training(ds.ev, bad); }),
                       "precision: deepspeed runs the precisions bf16, not fp8-current"));
}

// Context widths by default only where each rank keeps 4096 tokens or more.
TEST(ParallelSearch, ContextWidthsFollowTheSequence) {
  const Planned x("llama3-8b", "dgx-h100:2");
  ModelSpec long_model = x.model;
  for (auto& l : long_model.layers) l.seq_len = 16384;
  long_model.seq_len = 16384;
  const Evaluator ev(long_model, x.cluster, x.cost, load_framework("megatron-core"));
  SearchOptions o;
  o.global_batch = 16;
  o.top_k = 50;
  o.tensor_widths = {1, 2, 4, 8};
  const SearchResult r = search_training(ev, o);
  std::set<int64_t> cps;
  for (const auto& t : r.top) cps.insert(t.strategy.cp);
  EXPECT_TRUE(cps.count(2) || cps.count(4)) << r.top.size();
  EXPECT_FALSE(cps.count(8));  // 16384 / 8 = 2048 tokens per rank: not tried by default
  // A framework without the ring takes its own way: torchtitan gathers keys and values.
  const Evaluator tt(long_model, x.cluster, x.cost, load_framework("torchtitan"));
  o.max_zero = 3;
  const SearchResult t = search_training(tt, o);
  bool context = false;
  for (const auto& r : t.top) {
    context |= r.strategy.cp > 1;
    if (r.strategy.cp > 1) {
      EXPECT_EQ(r.strategy.cp_comm, CpComm::kAllGather);
    }
  }
  EXPECT_TRUE(context);
}

}  // namespace
}  // namespace hetplan
