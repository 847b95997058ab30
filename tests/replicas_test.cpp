// Replica groups inside a pipeline stage (search/replicas.h, search/eval/replicas.cpp): the
// strategy key's rules, the split of samples by speed, and the cost of a step that waits for its
// slowest group and reduces gradients across groups over the slowest link.
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/cost_model.h"
#include "costmodel/document.h"
#include "costmodel/profile.h"
#include "costmodel/topology.h"
#include "search/evaluate.h"
#include "search/replica_search.h"
#include "search/replicas.h"
#include "tests/framework_fixture.h"
#include "tests/test_util.h"

namespace hetplan {
namespace {

using testing::contains;
using testing::error_of;
using testing::range;

Strategy parse(const std::string& json) {
  const Document doc = parse_document(json, "strategy.json", DocumentFormat::kJson);
  return strategy_from_json(ObjectReader(doc));
}

// One stage (layers 0-25 of gpt2-medium) on two groups of one p4d node's A100s: 4 replicas and 2,
// tp 1, micro-batch 2, with `a` and `b` samples.
std::string two_groups(int64_t a, int64_t b, int64_t global_batch) {
  return fmt::format(R"({{"dp": 6, "tp": 1, "pp": 1, "micro_batch": 2, "global_batch": {},
    "stages": [{{"layers": [0, 25], "replicas": [
      {{"gpu_type": "a100-40gb", "devices": [0, 1, 2, 3], "tp": 1, "micro_batch": 2,
        "samples": {}}},
      {{"gpu_type": "a100-40gb", "devices": [4, 5], "tp": 1, "micro_batch": 2,
        "samples": {}}}]}}]}})",
                     global_batch, a, b);
}

TEST(ReplicaGroups, LoadAndWriteBack) {
  const Strategy s = parse(two_groups(32, 16, 48));
  ASSERT_TRUE(s.has_replicas());
  const auto& groups = s.stages[0].replicas;
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].replicas(), 4);
  EXPECT_EQ(groups[0].microbatches(), 4);  // 32 samples / (4 replicas x 2)
  EXPECT_EQ(groups[1].microbatches(), 4);  // 16 / (2 x 2)
  const Strategy again = parse(to_json(s).dump());
  EXPECT_EQ(again.stages[0].replicas[1].devices, std::vector<int64_t>({4, 5}));
  EXPECT_EQ(again.stages[0].replicas[1].samples, 16);
}

TEST(ReplicaGroups, LoaderNamesTheKeyOfABrokenRule) {
  // The samples add up to the global batch.
  std::string e = error_of([] { parse(two_groups(32, 16, 64)); });
  EXPECT_TRUE(contains(e, "stages[0].replicas")) << e;
  EXPECT_TRUE(contains(e, "add up to 48, expected global_batch 64")) << e;
  // Whole micro-batches: 15 samples in micro-batches of 2.
  e = error_of([] { parse(two_groups(32, 15, 47)); });
  EXPECT_TRUE(contains(e, "stages[0].replicas[1].samples")) << e;
  // dp is the replicas of a stage.
  std::string text = two_groups(32, 16, 48);
  text.replace(text.find("\"dp\": 6"), 7, "\"dp\": 8");
  e = error_of([&] { parse(text); });
  EXPECT_TRUE(contains(e, "dp")) << e;
  EXPECT_TRUE(contains(e, "expected 6")) << e;
  // No device twice.
  text = two_groups(32, 16, 48);
  text.replace(text.find("[4, 5]"), 6, "[3, 5]");
  e = error_of([&] { parse(text); });
  EXPECT_TRUE(contains(e, "device 3 is listed twice")) << e;
  // Devices: replicas x tp.
  text = two_groups(32, 16, 48);
  const size_t second = text.find("\"tp\": 1", text.find("[4, 5]"));
  text.replace(second, 7, "\"tp\": 4");
  e = error_of([&] { parse(text); });
  EXPECT_TRUE(contains(e, "(a multiple of tp 4), found 2")) << e;
}

TEST(ReplicaGroups, SamplesFollowSpeedInWholeMicroBatches) {
  // A group twice as fast takes twice the samples: 96 = 64 + 32.
  EXPECT_EQ(split_samples({2.0, 1.0}, {1, 1}, 96), std::vector<int64_t>({64, 32}));
  // In whole granules (replicas x micro-batch: 8 and 4): 64 and 32 are whole already.
  EXPECT_EQ(split_samples({2.0, 1.0}, {8, 4}, 96), std::vector<int64_t>({64, 32}));
  // 100 at 3:1 with granules 8 and 4: 72 + 24 below the shares 75 and 25, the 4 left to the group
  // it delays least ((72 + 8) / 3 = 26.7 does not fit in 4; (24 + 4) / 1 = 28).
  EXPECT_EQ(split_samples({3.0, 1.0}, {8, 4}, 100), std::vector<int64_t>({72, 28}));
  // Nothing of granules 8 and 8 makes 100.
  EXPECT_TRUE(split_samples({1.0, 1.0}, {8, 8}, 100).empty());
}

class ReplicaCost : public ::testing::Test {
 protected:
  Profile profile_ = load_profile_inputs({default_calibration_dir().string()});
  ModelSpec model_ = load_model("gpt2-medium");
};

TEST_F(ReplicaCost, StepWaitsForTheSlowerGroup) {
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1");
  const CostModel cost(profile_, cluster);
  const Evaluator ev(model_, cluster, cost, testing::fixture_framework());
  // Four replicas run twice as many samples per step as two: 32 and 16 samples are 4 micro-batches
  // on every replica, so both groups take the same time and the step is that time plus the tail.
  const Prediction even = ev.predict(parse(two_groups(32, 16, 48)));
  ASSERT_TRUE(even.feasible) << even.reason;
  ASSERT_EQ(even.groups.size(), 2u);
  EXPECT_DOUBLE_EQ(even.groups[0].pipeline_s, even.groups[1].pipeline_s);
  // 16 and 32 instead: each replica of the 2-replica group runs 8 micro-batches, the other's 2,
  // and the step waits for it.
  const Prediction skewed = ev.predict(parse(two_groups(16, 32, 48)));
  ASSERT_TRUE(skewed.feasible) << skewed.reason;
  EXPECT_EQ(skewed.groups[1].microbatches, 8);
  EXPECT_GT(skewed.groups[1].pipeline_s, skewed.groups[0].pipeline_s);
  double tail = 0;
  for (const auto& [name, s] : skewed.breakdown)
    if (name == "dp_sync" || name == "optimizer" || name == "host_wait") tail += s;
  EXPECT_NEAR(skewed.iteration_s, skewed.groups[1].pipeline_s + tail, 1e-12);
  // The slower group's pipeline is the same as its own uniform strategy's: dp 2 on devices 4 and
  // 5 with its 32 samples.
  Strategy alone;
  alone.dp = 2;
  alone.micro_batch = 2;
  alone.global_batch = 32;
  alone.stages = {StageSpec{0, 25, "a100-40gb", {4, 5}, {}}};
  const Prediction uniform = ev.predict(alone);
  double uniform_tail = 0;
  for (const auto& [name, s] : uniform.breakdown)
    if (name == "dp_sync" || name == "optimizer" || name == "host_wait") uniform_tail += s;
  EXPECT_NEAR(skewed.groups[1].pipeline_s, uniform.iteration_s - uniform_tail, 1e-12);
}

TEST_F(ReplicaCost, GradientsCrossTypesOverTheSlowerLink) {
  // An A100 of a p4d node (400 Gbit/s) and a V100 of a p3.8xlarge (10 Gbit/s), one replica each:
  // the cross-group all-reduce of the whole model's fp32 gradients runs over 10 Gbit/s.
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1,p3.8xlarge:1");
  const CostModel cost(profile_, cluster);
  const Evaluator ev(model_, cluster, cost, testing::fixture_framework());
  const Strategy s = parse(R"({"dp": 2, "tp": 1, "pp": 1, "micro_batch": 2, "global_batch": 12,
    "stages": [{"layers": [0, 25], "replicas": [
      {"gpu_type": "a100-40gb", "devices": [0], "tp": 1, "micro_batch": 2, "samples": 8},
      {"gpu_type": "v100", "devices": [8], "tp": 1, "micro_batch": 2, "samples": 4}]}]})");
  const Prediction p = ev.predict(s);
  ASSERT_EQ(p.groups.size(), 2u) << p.reason;
  // Both at tp 1: one slice, one round.
  EXPECT_EQ(p.groups[0].sync_slices, 1);
  EXPECT_EQ(p.groups[1].sync_rounds, 1);
  // A ring of 2 over the network: 2 steps of the p3's 30 us, 2 (n - 1) / n = 1 times the bytes
  // over 10 Gbit/s = 1.25 GB/s at the 0.85 network efficiency (the prior of
  // CostModel.CrossNodeAllReduceIsBoundByTheSharedNetwork).
  // The bytes: fp32 gradients (4 B) of the parameters one device holds, the tied table once.
  const LayerSpec& head = model_.layers.back();
  double params = -static_cast<double>(head.head()->vocab) * head.hidden;
  for (const LayerCost& c : ev.layer_costs(1, 1, group_strategy(s, 0, 1))) params += c.param_count;
  const double bytes = 4 * params;
  const double expected = 2 * 30e-6 + bytes / (1.25e9 * 0.85);
  EXPECT_NEAR(p.groups[0].sync_s, expected, 1e-6 * expected);
  EXPECT_EQ(p.groups[1].sync_s, p.groups[0].sync_s);
}

TEST_F(ReplicaCost, MixedWidthsReduceInSlicesOfTheWidest) {
  // Stage 0 of two p3.8xlarge nodes: one node at tp 4 next to one at tp 1 x 4 replicas. As
  // Sailor's runtime runs it, the stage's gradients are cut in 4 slices (the widest tp); each tp-1
  // device holds all 4 and all-reduces them in turn with the tp-4 device holding that slice: 4
  // rounds of one ring over all 5 replicas, about a quarter of the stage's gradients each.
  const ClusterSpec cluster = load_cluster("p3.8xlarge:2");
  const CostModel cost(profile_, cluster);
  const Evaluator ev(model_, cluster, cost, testing::fixture_framework());
  const Strategy s = parse(R"({"dp": 5, "tp": 4, "pp": 1, "micro_batch": 1, "global_batch": 12,
    "stages": [{"layers": [0, 25], "replicas": [
      {"gpu_type": "v100", "devices": [0, 1, 2, 3], "tp": 4, "micro_batch": 1, "samples": 4},
      {"gpu_type": "v100", "devices": [4, 5, 6, 7], "tp": 1, "micro_batch": 1, "samples": 8}]}]})");
  const Prediction p = ev.predict(s);
  ASSERT_EQ(p.groups.size(), 2u) << p.reason;
  EXPECT_EQ(p.groups[0].sync_slices, 4);
  EXPECT_EQ(p.groups[0].sync_rounds, 1);  // a tp-4 device holds one slice
  EXPECT_EQ(p.groups[1].sync_rounds, 4);  // a tp-1 device holds all four
  // Each ring moves what one tp-4 device holds (the cluster's group 0): a quarter of every split
  // weight and the whole of every replicated one, the tied table's quarter once.
  const LayerSpec& head = model_.layers.back();
  double params = -static_cast<double>(head.head()->vocab) * head.hidden / 4;
  for (const LayerCost& c : ev.layer_costs(0, 1, group_strategy(s, 0, 0))) params += c.param_count;
  const double bytes = params * 4;  // fp32 gradients, as above
  const CommGroup ring = make_comm_group(cluster, ev.devices(), {0, 4, 5, 6, 7});
  EXPECT_EQ(ring.nodes, 2);
  const double expected = 4 * cost.collective_s(CollectiveKind::kAllReduce, bytes, ring);
  EXPECT_NEAR(p.groups[0].sync_s, expected, 1e-9 * expected);
  EXPECT_EQ(p.groups[1].sync_s, p.groups[0].sync_s);
  // The 4 rounds move about the bytes of one all-reduce of the whole stage over the same ring (a
  // little more: the replicated tensors go in every round, and 4 rings' latency).
  double stage = -static_cast<double>(head.head()->vocab) * head.hidden;  // a tp-1 device's
  for (const LayerCost& c : ev.layer_costs(0, 1, group_strategy(s, 0, 1))) stage += c.param_count;
  const double whole = cost.collective_s(CollectiveKind::kAllReduce, 4 * stage, ring);
  EXPECT_GT(p.groups[0].sync_s, whole);
  EXPECT_LT(p.groups[0].sync_s, 1.05 * whole);
}

TEST_F(ReplicaCost, TheFirstVersionRefusesWhatItDoesNotCost) {
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1");
  const CostModel cost(profile_, cluster);
  const Evaluator ev(model_, cluster, cost, testing::fixture_framework());
  Strategy s = parse(two_groups(32, 16, 48));
  s.zero = 1;
  const Prediction p = ev.predict(s);
  EXPECT_FALSE(p.feasible);
  EXPECT_EQ(p.reason_code(), "replicas");
  EXPECT_TRUE(contains(p.reason, "zero 0")) << p.reason;
  // A group's tp must divide the heads (gpt2-medium: 16): tp 3 does not.
  s = parse(R"({"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 2,
    "stages": [{"layers": [0, 25], "replicas": [
      {"gpu_type": "a100-40gb", "devices": [0], "tp": 1, "micro_batch": 1, "samples": 1},
      {"gpu_type": "a100-40gb", "devices": [1, 2, 3], "tp": 3, "micro_batch": 1,
       "samples": 1}]}]})");
  const Prediction q = ev.predict(s);
  EXPECT_FALSE(q.feasible);
  EXPECT_EQ(q.reason_code(), "tp");
  EXPECT_TRUE(contains(q.reason, "stage 0 group 1")) << q.reason;
}

TEST_F(ReplicaCost, SearchSplitsTheBatchBetweenTypesByTheirSpeed) {
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1,p3.8xlarge:1");
  const CostModel cost(profile_, cluster);
  const Evaluator ev(model_, cluster, cost, testing::fixture_framework());
  ReplicaSearchOptions o;
  o.global_batch = 64;
  o.chains = false;  // each type its own pipelines (a chain of the two wins here otherwise)
  const ReplicaSearchResult r = search_replicas(ev, o);
  ASSERT_TRUE(r.best.has_value());
  const Strategy& s = r.best->strategy;
  ASSERT_EQ(s.stages.front().replicas.size(), 2u);  // an A100 pipeline and a V100 one
  const auto& groups = r.best->predicted.groups;
  EXPECT_EQ(groups[0].spec.samples + groups[1].spec.samples, 64);
  // The A100s take more of the batch than the V100s.
  EXPECT_GT(groups[0].spec.samples, groups[1].spec.samples);
  EXPECT_TRUE(r.best->predicted.feasible);
  EXPECT_GE(r.evaluated, r.feasible);
}

// Pipelines that change GPU type from stage to stage (Sailor's V100 stage 0 feeding A100s): with
// one GPU of each type neither type alone holds a two-stage pipeline, and a chain of the two does.
TEST_F(ReplicaCost, SearchFindsPipelinesThatChangeTypeFromStageToStage) {
  const auto dir = testing::temp_dir("replica_chain");
  const auto file = dir / "two.yaml";
  std::ofstream(file) << R"(name: two
node_types:
  a1: {gpu: a100-40gb, gpus: 1, fabric: pcie, intra_GBps: 16, intra_latency_us: 5,
       network_gbit: 100, network_latency_us: 10, host_link_GBps: 16}
  v1: {gpu: v100, gpus: 1, fabric: pcie, intra_GBps: 16, intra_latency_us: 5,
       network_gbit: 100, network_latency_us: 10, host_link_GBps: 16}
nodes:
  - {type: a1, count: 1}
  - {type: v1, count: 1}
)";
  const ClusterSpec cluster = load_cluster(file.string());
  const CostModel cost(profile_, cluster);
  const Evaluator ev(model_, cluster, cost, testing::fixture_framework());
  ReplicaSearchOptions o;
  o.global_batch = 16;
  o.pipeline_depths = {2};
  const ReplicaSearchResult r = search_replicas(ev, o);
  ASSERT_TRUE(r.best.has_value());
  const Strategy& s = r.best->strategy;
  ASSERT_EQ(s.stages.size(), 2u);
  ASSERT_EQ(s.stages[0].replicas.size(), 1u);
  const ReplicaGroup &first = s.stages[0].replicas[0], &second = s.stages[1].replicas[0];
  EXPECT_NE(first.gpu_type, second.gpu_type);
  EXPECT_EQ(first.devices.size(), 1u);
  EXPECT_EQ(second.devices.size(), 1u);
  EXPECT_EQ(first.samples, 16);
  EXPECT_TRUE(r.best->predicted.feasible) << r.best->predicted.reason;
  // The better of the two orders: its prediction is no slower than the other chain's.
  Strategy other = s;
  std::swap(other.stages[0].replicas, other.stages[1].replicas);
  const Prediction reversed = ev.predict(other);
  if (reversed.feasible) {
    EXPECT_LE(r.best->predicted.iteration_s, reversed.iteration_s * 1.000001);
  }
  // Beyond kChainMaxDepth no chain is tried: at depth 8 no plan exists here at all.
  o.pipeline_depths = {8};
  EXPECT_FALSE(search_replicas(ev, o).best.has_value());
}

// As Sailor runs them: every replica the same samples at one micro-batch, and the types' widths
// chosen for the plan, not for each type's own speed.
TEST_F(ReplicaCost, EvenSharesGiveEveryReplicaTheSameSamples) {
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1,p3.8xlarge:1");
  const CostModel cost(profile_, cluster);
  const Evaluator ev(model_, cluster, cost, testing::fixture_framework());
  ReplicaSearchOptions o;
  o.global_batch = 64;
  o.even_shares = true;
  const ReplicaSearchResult r = search_replicas(ev, o);
  ASSERT_TRUE(r.best.has_value());
  const auto& groups = r.best->predicted.groups;
  ASSERT_GE(groups.size(), 2u);
  int64_t samples = 0, replicas = 0;
  for (const auto& g : groups) {
    if (g.stage == 0) {
      samples += g.spec.samples;
      replicas += g.spec.replicas();
    }
    EXPECT_EQ(g.spec.micro_batch, groups[0].spec.micro_batch);
    EXPECT_EQ(g.spec.samples * groups[0].spec.replicas(),
              groups[0].spec.samples * g.spec.replicas());
    EXPECT_EQ(g.spec.samples % (g.spec.replicas() * g.spec.micro_batch), 0);
  }
  // The batch as Sailor's runtime runs it: 64 rounded down to a multiple of micro-batch x
  // replicas (the plan found: 3 replicas a stage at micro-batch 1, 63 samples).
  const int64_t step = replicas * groups[0].spec.micro_batch;
  EXPECT_EQ(samples, 64 / step * step);
  EXPECT_EQ(r.best->strategy.global_batch, samples);
  EXPECT_DOUBLE_EQ(r.best->predicted.samples_per_s,
                   static_cast<double>(samples) / r.best->predicted.iteration_s);
}

// Sailor's OPT-350M plan on its A100 + V100 cluster (examples/): predict writes every group's
// figures; no export format runs it.
TEST(ReplicaCli, PredictWritesTheGroupsAndExportRefuses) {
  const std::string src = HETPLAN_SOURCE_DIR;
  const auto dir = testing::temp_dir("replicas_cli");
  const std::string json = (dir / "p.json").string();
  const std::string inputs = fmt::format(
      "--model {0}/examples/models/opt-350m.yaml --cluster {0}/examples/clusters/"
      "a100-v100-cloud.yaml --strategy {0}/examples/strategies/opt-350m-sailor-replicas.json",
      src);
  const auto r = testing::run_hetplan("predict " + inputs + " --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "slices")) << r.output;
  nlohmann::json j;
  std::ifstream(json) >> j;
  const auto& groups = j["predicted"]["replica_groups"];
  ASSERT_EQ(groups.size(), 4u) << j.dump();
  EXPECT_EQ(groups[1]["gpu_type"], "v100");
  EXPECT_EQ(groups[1]["tp"], 4);
  EXPECT_EQ(groups[1]["replicas"], 24);
  EXPECT_EQ(groups[1]["microbatches"], 38);  // 904 samples over 24 replicas: 16 run 38
  // Stage 0's gradients in 4 slices (the V100s' tp 4): the A100s at tp 1 reduce all 4 in turn.
  EXPECT_EQ(groups[0]["sync_slices"], 4);
  EXPECT_EQ(groups[0]["sync_rounds"], 4);
  EXPECT_EQ(groups[1]["sync_rounds"], 1);
  EXPECT_EQ(groups[0]["sync_s"], groups[1]["sync_s"]);
  EXPECT_EQ(testing::fractional_bytes(j), std::vector<std::string>{});
  const auto e = testing::run_hetplan("export --strategy " + json + " --format megatron");
  EXPECT_EQ(e.exit_code, 2) << e.output;
  EXPECT_TRUE(contains(e.output, "replica groups")) << e.output;
  EXPECT_TRUE(contains(e.output, "eth-easl/sailor")) << e.output;
}

}  // namespace
}  // namespace hetplan
