// Clusters across zones and regions of a cloud (network.cloud, network.zones, nodes[].zone): the
// zone links' bandwidth and latency in the topology, and the priced traffic of a training step
// (search/transfer.h). Expected values worked out by hand from presets/networks/aws.yaml.
#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/cost_model.h"
#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "costmodel/hardware.h"
#include "costmodel/profile.h"
#include "costmodel/topology.h"
#include "search/evaluate.h"
#include "search/transfer.h"
#include "test_util.h"
#include "tests/framework_fixture.h"

namespace hetplan {
namespace {

Profile shipped_profile() { return load_profile_inputs({default_calibration_dir().string()}); }

const char* kThreeZones = R"(
network:
  cloud: aws
  zones: {us-east-1a: us-east-1, us-east-1b: us-east-1, us-west-2a: us-west-2}
nodes:
  - {type: p4d.24xlarge, count: 1, zone: us-east-1a}
  - {type: p4d.24xlarge, count: 1, zone: us-east-1b}
  - {type: g5.12xlarge, count: 1, zone: us-west-2a}
)";

ClusterSpec parse(const std::string& yaml) {
  return parse_cluster(parse_document(yaml, "z.yaml", DocumentFormat::kYaml));
}

TEST(Zones, ZoneLinksSetBandwidthAndLatency) {
  const ClusterSpec c = parse(kThreeZones);
  EXPECT_EQ(c.num_gpus(), 20);
  EXPECT_EQ(c.zone_link(0, 0), nullptr);
  EXPECT_EQ(c.zone_link(0, 1), &c.cloud->between_zones);
  EXPECT_EQ(c.zone_link(1, 2), &c.cloud->between_regions);
  // Between zones: the full 400 Gbit/s = 50 GB/s, at the zone link's 1 ms.
  EXPECT_DOUBLE_EQ(c.group_network_GBps(0, 1), 50);
  EXPECT_DOUBLE_EQ(c.group_network_latency_s(0, 1), 1e-3);
  // Between regions: half the slower node's 40 Gbit/s = 2.5 GB/s, at 30 ms.
  EXPECT_DOUBLE_EQ(c.group_network_GBps(0, 2), 2.5);
  EXPECT_DOUBLE_EQ(c.group_network_latency_s(0, 2), 30e-3);
  // The topology sees them: device 0 (zone a) to device 8 (zone b), and a group over all three.
  const auto devices = cluster_devices(c);
  EXPECT_DOUBLE_EQ(link_between(c, devices[0], devices[8]).GBps, 50);
  const CommGroup g = make_comm_group(c, devices, {0, 8, 16});
  EXPECT_DOUBLE_EQ(g.inter_GBps, 2.5);
  EXPECT_DOUBLE_EQ(g.inter_latency_s, 30e-3);
}

void expect_error(const std::string& yaml, const std::string& key_path) {
  try {
    parse(yaml);
    FAIL() << "accepted: " << yaml;
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), key_path) << e.what();
  }
}

TEST(Zones, BadZonesNameTheKey) {
  expect_error(
      "network: {cloud: aws, zones: {a: r}}\nnodes: [{type: p4d.24xlarge, count: 1, zone: b}]\n",
      "nodes[0].zone");
  expect_error("network: {zones: {a: r}}\nnodes: [{type: p4d.24xlarge, count: 1, zone: a}]\n",
               "network.zones");
  expect_error(
      "network: {cloud: aws, zones: {a: r}}\n"
      "nodes: [{type: p4d.24xlarge, count: 1, zone: a}, {type: g5.12xlarge, count: 1}]\n",
      "nodes");
  expect_error(
      "network: {cloud: aws, zones: {a: r}}\n"
      "nodes: [{type: p4d.24xlarge, count: 1, zone: a}, {type: p4d.24xlarge, count: 1, zone: a}]\n",
      "nodes[1]");
  expect_error("network: {cloud: azure, zones: {a: r}}\nnodes: [{type: p4d.24xlarge, count: 1}]\n",
               "");
}

// A ring's edges that join two zones carry its bytes over the priced link: ring 0 -> 1 -> 8 -> 9
// -> 0 crosses at 1 -> 8 and 9 -> 0 (0, 1 and 8, 9 share a node), 2 GB at $0.02/GB.
TEST(Zones, RingCrossingsArePriced) {
  const ClusterSpec c = parse(kThreeZones);
  const auto devices = cluster_devices(c);
  TransferPerStep t;
  add_ring_crossings(c, devices, {0, 1, 8, 9}, 1e9, t);
  EXPECT_DOUBLE_EQ(t.bytes_between_zones, 2e9);
  EXPECT_DOUBLE_EQ(t.bytes_between_regions, 0);
  EXPECT_DOUBLE_EQ(t.dollars, 0.04);
  add_ring_crossings(c, devices, {0, 16}, 1e9, t);  // to us-west-2 and back
  EXPECT_DOUBLE_EQ(t.bytes_between_regions, 2e9);
  EXPECT_DOUBLE_EQ(t.dollars, 0.08);
}

const char* kTwoZones = R"(
network:
  cloud: aws
  zones: {us-east-1a: us-east-1, us-east-1b: us-east-1}
nodes:
  - {type: p4d.24xlarge, count: 1, zone: us-east-1a}
  - {type: p4d.24xlarge, count: 1, zone: us-east-1b}
)";

// pp 2 with a stage per zone: each of the 8 data-parallel slices sends one activation forward
// and its gradient back per micro-batch: micro-batch 2 x 1,024 tokens x 1,024 hidden x 2 bytes
// = 4 MiB, 2 micro-batches (32 / (8 x 2)): 8 x 2 x 2 x 4 MiB = 128 MiB; the gradient rings stay
// inside their nodes.
TEST(Zones, PipelineSendsAcrossZonesArePriced) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = parse(kTwoZones);
  const CostModel cost(shipped_profile(), cluster);
  const Evaluator ev(model, cluster, cost, testing::fixture_framework());
  Strategy s;
  s.dp = 8;
  s.pp = 2;
  s.micro_batch = 2;
  s.global_batch = 32;
  const Prediction p = ev.predict(s);
  ASSERT_TRUE(p.feasible) << p.reason;
  const TransferPerStep t = transfer_per_step(ev, s, p);
  EXPECT_DOUBLE_EQ(t.pipeline_bytes, 134217728);
  EXPECT_DOUBLE_EQ(t.gradient_bytes, 0);
  EXPECT_DOUBLE_EQ(t.bytes_between_zones, 134217728);
  EXPECT_DOUBLE_EQ(t.dollars, 134217728 / 1e9 * 0.02);
}

// dp 16 over both nodes: each dense ring (tp 1: one ring over devices 0..15) crosses at 7 -> 8
// and 15 -> 0, each edge carrying 2 x 15/16 of the fp32 gradients (all-reduce).
TEST(Zones, GradientRingsAcrossZonesArePriced) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = parse(kTwoZones);
  const CostModel cost(shipped_profile(), cluster);
  const Evaluator ev(model, cluster, cost, testing::fixture_framework());
  Strategy s;
  s.dp = 16;
  s.micro_batch = 1;
  s.global_batch = 16;
  const Prediction p = ev.predict(s);
  ASSERT_TRUE(p.feasible) << p.reason;
  double params = 0;
  for (const auto& c : ev.layer_costs(0, 1, s)) params += c.param_count;
  params -= 50257.0 * 1024;  // the tied head's table, held once with the embedding's
  const TransferPerStep t = transfer_per_step(ev, s, p);
  const double expected = 2 * (2 * 15.0 / 16 * params * 4);
  EXPECT_DOUBLE_EQ(t.gradient_bytes, expected);
  EXPECT_DOUBLE_EQ(t.pipeline_bytes, 0);
  EXPECT_NEAR(t.dollars, expected / 1e9 * 0.02, 1e-12);
  // The same strategy in one zone costs nothing to move.
  const ClusterSpec one = load_cluster("p4d.24xlarge:2");
  const CostModel cost1(shipped_profile(), one);
  const Evaluator ev1(model, one, cost1, testing::fixture_framework());
  EXPECT_DOUBLE_EQ(transfer_per_step(ev1, s, ev1.predict(s)).dollars, 0);
}

// `hetplan clusters` lists the networks: aws between zones 100% of the bandwidth, 1 ms,
// $0.02/GB; between regions 50%, 30 ms, $0.02/GB.
TEST(Zones, ClustersListTheNetworks) {
  const auto r = testing::run_hetplan("clusters");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("100% 1 ms $0.020/GB"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("50% 30 ms $0.020/GB"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace hetplan
