// Each op of a layer with its time (costmodel/op_times.h, Evaluator::layer_ops), as
// `hetplan predict --layer-ops` prints them: the ops' times add up to the layer's passes as the
// cost model sums them, alike layers are listed once, and the command prints the table.
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/cost_model.h"
#include "costmodel/hardware.h"
#include "costmodel/op_times.h"
#include "costmodel/profile.h"
#include "costmodel/topology.h"
#include "search/evaluate.h"
#include "test_util.h"

namespace hetplan {
namespace {

using testing::contains;
using testing::range;

CostModel datasheet_cost(const ClusterSpec& cluster) {
  return CostModel(
      fit_profile({load_calibration(default_calibration_dir() / "datasheet" / "h100-sxm.json")}),
      cluster);
}

double pass_sum(const std::vector<OpTime>& ops, Pass pass) {
  double s = 0;
  for (const OpTime& op : ops)
    if (op.pass == pass) s += op.seconds;
  return s;
}

TEST(OpTimes, OpTimesAddUpToTheLayersPasses) {
  const ClusterSpec cluster = load_cluster("dgx-h100:2");
  const CostModel cost = datasheet_cost(cluster);
  const GpuSpec& gpu = cluster.groups[0].node.gpu;
  const auto devices = cluster_devices(cluster);
  LayerGroups groups(make_comm_group(cluster, devices, range(0, 2)));
  groups.expert = make_comm_group(cluster, devices, range(0, 16));
  LayerShape shape;
  shape.tp = 2;
  shape.sequence_parallel = true;
  shape.ep = 16;
  shape.etp = 1;
  shape.dispatcher = MoeDispatcher::kFlex;
  const LayerWork w = layer_work(testing::moe_block(16, 2), shape);
  const std::vector<OpTime> ops = op_times(cost, gpu, w, groups, Dtype::kBf16);
  EXPECT_EQ(ops.size(), w.gemms.size() + w.memory_ops.size() + w.attention.size() + w.comms.size());
  // With no recomputation, correction or overlap the passes are the sums of their ops.
  const LayerTimes t = cost.layer_times_from_ops(gpu, w, Recompute::kNone, groups, Dtype::kBf16);
  for (Pass p : {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight})
    EXPECT_NEAR(pass_sum(ops, p), t.pass_s[static_cast<int>(p)], 1e-12) << to_string(p);
  // Each op says what it is: the experts' all-to-all over the 16 ranks of 2 nodes, deduplicated.
  bool dispatch = false;
  for (const OpTime& op : ops)
    if (op.name == "moe_dispatch_a2a") {
      dispatch = true;
      EXPECT_EQ(op.kind, "comm");
      EXPECT_TRUE(contains(op.what, "16 ranks, 2 nodes")) << op.what;
      EXPECT_TRUE(contains(op.what, "once per destination")) << op.what;
      EXPECT_GT(op.seconds, 0);
    }
  EXPECT_TRUE(dispatch);
}

// Under per-op recomputation each op says the share of it that runs again, and those shares of
// the forward ops add up to the layer's recomputation.
TEST(OpTimes, EachOpSaysWhatOfItRunsAgain) {
  const ClusterSpec cluster = load_cluster("dgx-h100:1");
  const CostModel cost = datasheet_cost(cluster);
  const GpuSpec& gpu = cluster.groups[0].node.gpu;
  const auto devices = cluster_devices(cluster);
  const LayerGroups groups(make_comm_group(cluster, devices, range(0, 2)));
  const FrameworkSpec tt = load_framework("torchtitan");
  LayerShape shape;
  shape.tp = 2;
  shape.sequence_parallel = true;
  shape.framework = &tt;
  const LayerWork w = layer_work(testing::llama_block(1024), shape);
  const std::vector<OpTime> ops = op_times(cost, gpu, w, groups, Dtype::kBf16, Recompute::kOp);
  double rerun_s = 0;
  for (const OpTime& op : ops) {
    if (op.pass != Pass::kForward) {
      EXPECT_EQ(op.rerun, 0) << op.name;
    }
    rerun_s += op.seconds * op.rerun;
    if (op.name == "qkv" && op.pass == Pass::kForward) {
      EXPECT_DOUBLE_EQ(op.rerun, 1.0 / 6);
    }
    if (op.kind == "attention") {
      EXPECT_EQ(op.rerun, 0);
    }
  }
  const LayerTimes t = cost.layer_times_from_ops(gpu, w, Recompute::kOp, groups, Dtype::kBf16);
  EXPECT_GT(t.recompute_s, 0);
  EXPECT_NEAR(rerun_s, t.recompute_s, 1e-12);
  // Without recomputation nothing runs again.
  for (const OpTime& op : op_times(cost, gpu, w, groups, Dtype::kBf16)) EXPECT_EQ(op.rerun, 0);
}

TEST(OpTimes, AlikeLayersAreListedOnce) {
  const ModelSpec model = load_model("llama3-8b", 2048);
  const ClusterSpec cluster = load_cluster("dgx-h100:1");
  const CostModel cost = datasheet_cost(cluster);
  const Evaluator ev(model, cluster, cost, load_framework("megatron-core"));
  const Strategy s =
      testing::read_strategy(R"({"dp": 2, "tp": 4, "pp": 1, "micro_batch": 1, "global_batch": 8})");
  const std::vector<LayerOps> layers = ev.layer_ops(0, s);
  // Embedding, 32 alike blocks, the head.
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(layers[0].first_layer, 0);
  EXPECT_EQ(layers[1].first_layer, 1);
  EXPECT_EQ(layers[1].count, 32);
  EXPECT_EQ(layers[2].count, 1);
  int64_t total = 0;
  for (const LayerOps& l : layers) total += l.count;
  EXPECT_EQ(total, static_cast<int64_t>(model.layers.size()));
  // The block's cost is the evaluator's own for that layer.
  const std::vector<LayerCost>& costs = ev.layer_costs(0, 1, s);
  EXPECT_DOUBLE_EQ(layers[1].cost.total_s(), costs[1].total_s());
  std::map<std::string, int> gemms;
  for (const OpTime& op : layers[1].ops)
    if (op.kind == "gemm") ++gemms[op.name];
  EXPECT_EQ(gemms["qkv"], 3);  // forward, input and weight gradient
}

TEST(OpTimes, PredictPrintsThemWhenAsked) {
  const auto dir = testing::temp_dir("layer_ops_cli");
  const auto strategy = dir / "s.json";
  std::ofstream(strategy) << R"({"dp": 8, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8})";
  const std::string args =
      "predict --model gpt2-medium --cluster dgx-h100:1 --strategy " + strategy.string();
  const auto plain = testing::run_hetplan(args);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_FALSE(contains(plain.output, "layer ops on")) << plain.output;
  const auto shown = testing::run_hetplan(args + " --layer-ops");
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_TRUE(contains(shown.output, "layer ops on h100-sxm")) << shown.output;
  EXPECT_TRUE(contains(shown.output, "and 23 alike")) << shown.output;
  EXPECT_TRUE(contains(shown.output, "backward_weight ops")) << shown.output;
  EXPECT_TRUE(contains(shown.output, "attention")) << shown.output;
  // The same in the JSON (and nothing without the flag).
  const auto json_path = dir / "p.json";
  ASSERT_EQ(testing::run_hetplan(args + " --json " + json_path.string()).exit_code, 0);
  EXPECT_FALSE(nlohmann::json::parse(std::ifstream(json_path)).contains("layer_ops"));
  ASSERT_EQ(testing::run_hetplan(args + " --layer-ops --json " + json_path.string()).exit_code, 0);
  const nlohmann::json doc = nlohmann::json::parse(std::ifstream(json_path));
  ASSERT_EQ(doc["layer_ops"].size(), 1u);
  const nlohmann::json& type = doc["layer_ops"][0];
  EXPECT_EQ(type["gpu_type"], "h100-sxm");
  EXPECT_EQ(type["tp"], 1);
  ASSERT_EQ(type["layers"].size(), 3u);  // embedding, 24 alike blocks, head
  const nlohmann::json& block = type["layers"][1];
  EXPECT_EQ(block["count"], 24);
  // The shipped H100 calibration timed gpt2-medium's blocks whole: their passes are the ops
  // scaled by those timings, and the table says so.
  EXPECT_TRUE(block["corrected"].get<bool>());
  EXPECT_TRUE(contains(shown.output, "and 23 alike: F")) << shown.output;
  EXPECT_TRUE(contains(shown.output, "whole-layer timings scale its ops")) << shown.output;
  double forward_s = 0;
  for (const auto& op : block["ops"])
    if (op["pass"] == "forward") forward_s += op["seconds"].get<double>();
  EXPECT_GT(forward_s, 0);
  EXPECT_GT(block["forward_s"].get<double>(), 0);
  // Its kernels and the host's time to issue them at the framework's 28 us a kernel (eager).
  EXPECT_GT(block["kernels"].get<double>(), 10);
  EXPECT_NEAR(block["host_s"].get<double>(), block["kernels"].get<double>() * 2.8e-5, 1e-12);
  EXPECT_TRUE(contains(shown.output, "for the host to issue them")) << shown.output;
}

}  // namespace
}  // namespace hetplan
