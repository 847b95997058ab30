// Full recomputation of the first N blocks of each stage (Megatron-Core's --recompute-method block
// --recompute-num-layers N; Strategy::recompute_num_layers): the strategy key, the rule, the
// blocks' costs (N recomputed and the rest plain, as a share of each alike block), the export.
#include <set>

#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"
#include "report/export/exporters.h"
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

TEST(RecomputeBlock, TheKeyNeedsFullRecomputationAndRoundTrips) {
  const Strategy s =
      read_strategy(R"({"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8,
                              "recompute": "full", "recompute_num_layers": 3})");
  EXPECT_EQ(s.recompute_num_layers, 3);
  EXPECT_EQ(s.recompute_label(), "full(3 a stage)");
  EXPECT_EQ(to_json(s)["recompute_num_layers"], 3);
  EXPECT_FALSE(
      to_json(read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1,
                                "recompute": "full"})"))
          .contains("recompute_num_layers"));
  const std::string e = error_of([] {
    read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1,
             "recompute": "selective", "recompute_num_layers": 2})");
  });
  EXPECT_TRUE(contains(e, "recompute_num_layers")) << e;
  EXPECT_TRUE(contains(e, "needs recompute \"full\", found \"selective\"")) << e;
}

TEST(RecomputeBlock, OnlyAFrameworkThatRunsItTakesIt) {
  const ModelSpec model = load_model("gpt2-medium");
  Strategy s;
  s.dp = 8;
  s.global_batch = 8;
  s.recompute = Recompute::kFull;
  s.recompute_num_layers = 4;
  EXPECT_FALSE(first_broken_rule({model, load_framework("megatron-core"), 8}, s).has_value());
  const auto v = first_broken_rule({model, load_framework("deepspeed"), 8}, s);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->key, "recompute_num_layers");
  EXPECT_TRUE(contains(v->reason, "not the first 4 of each stage")) << v->reason;
}

TEST(RecomputeBlock, EachBlockIsItsShareOfFullAndPlain) {
  // gpt2-medium's 24 blocks over pp 2: 12 a stage. N = 3 recomputes a quarter of each.
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
  const Evaluator ev(model, cluster, cost, load_framework("megatron-core"));
  Strategy s;
  s.pp = 2;
  s.dp = 4;
  s.global_batch = 16;
  s.recompute = Recompute::kFull;
  const std::vector<LayerCost> full = ev.layer_costs(0, 1, s);
  Strategy none = s;
  none.recompute = Recompute::kNone;
  const std::vector<LayerCost> plain = ev.layer_costs(0, 1, none);
  s.recompute_num_layers = 3;
  const std::vector<LayerCost>& block = ev.layer_costs(0, 1, s);
  const size_t b = 1;  // the first block
  ASSERT_TRUE(model.layers[b].block());
  ASSERT_GT(full[b].times.pass_s[1], plain[b].times.pass_s[1]);
  ASSERT_LT(full[b].activation_bytes, plain[b].activation_bytes);
  for (int p = 0; p < kNumPasses; ++p)
    EXPECT_NEAR(block[b].times.pass_s[p],
                0.25 * full[b].times.pass_s[p] + 0.75 * plain[b].times.pass_s[p],
                1e-12 * full[b].times.pass_s[p]);
  EXPECT_NEAR(block[b].times.recompute_s, 0.25 * full[b].times.recompute_s, 1e-15);
  EXPECT_DOUBLE_EQ(block[b].activation_bytes,
                   0.25 * full[b].activation_bytes + 0.75 * plain[b].activation_bytes);
  // The embedding is not a block: as under full recomputation.
  EXPECT_DOUBLE_EQ(block[0].times.pass_s[1], full[0].times.pass_s[1]);
  // Every block of a stage (12, or more) is plain full recomputation.
  s.recompute_num_layers = 12;
  EXPECT_EQ(&ev.layer_costs(0, 1, s), &ev.layer_costs(0, 1, [&] {
    Strategy all = s;
    all.recompute_num_layers = 0;
    return all;
  }()));
  // The prediction lies between plain and full, in time and in memory.
  s.recompute_num_layers = 3;
  Strategy f = s;
  f.recompute_num_layers = 0;
  const Prediction pb = ev.predict(s), pf = ev.predict(f), pn = ev.predict(none);
  ASSERT_TRUE(pb.feasible && pf.feasible && pn.feasible) << pb.reason << pf.reason << pn.reason;
  EXPECT_LT(pn.iteration_s, pb.iteration_s);
  EXPECT_LT(pb.iteration_s, pf.iteration_s);
  EXPECT_LT(pf.stages[0].memory.activations, pb.stages[0].memory.activations);
  EXPECT_LT(pb.stages[0].memory.activations, pn.stages[0].memory.activations);
}

TEST(RecomputeBlock, ExportsAsTheBlockMethod) {
  const ModelSpec model = load_model("gpt2-medium");
  const Strategy s =
      read_strategy(R"({"dp": 1, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8,
                              "recompute": "full", "recompute_num_layers": 3})");
  const ExportResult m = find_exporter("megatron").run(model, s, {});
  EXPECT_TRUE(contains(m.text, "--recompute-granularity full")) << m.text;
  EXPECT_TRUE(contains(m.text, "--recompute-method block")) << m.text;
  EXPECT_TRUE(contains(m.text, "--recompute-num-layers 3")) << m.text;
  const ExportResult d = find_exporter("deepspeed").run(model, s, {});
  ASSERT_FALSE(d.unsupported.empty());
  EXPECT_TRUE(contains(d.unsupported.front(), "first 3 blocks")) << d.unsupported.front();
}

}  // namespace
}  // namespace hetplan

namespace hetplan {
namespace {

// The search tries half of each stage's blocks recomputed where the framework runs the block
// method: gpt2-medium's 24 blocks at pp 2 recompute 6 a stage.
TEST(RecomputeBlock, TheSearchTriesHalfOfEachStage) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
  SearchOptions o;
  o.global_batch = 16;
  o.top_k = 100000;
  const auto halves = [&](const FrameworkSpec& f) {
    const Evaluator ev(model, cluster, cost, f);
    std::set<int64_t> seen;
    for (const auto& t : search_training(ev, o).top)
      if (t.strategy.recompute_num_layers > 0) {
        EXPECT_EQ(t.strategy.recompute, Recompute::kFull);
        EXPECT_EQ(t.strategy.recompute_num_layers,
                  24 / (t.strategy.pp * t.strategy.chunks_per_device()) / 2);
        seen.insert(t.strategy.pp);
      }
    return seen;
  };
  EXPECT_TRUE(halves(load_framework("megatron-core")).count(2));
  EXPECT_TRUE(halves(load_framework("deepspeed")).empty());
}

}  // namespace
}  // namespace hetplan
