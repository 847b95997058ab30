// Max flow of placements on small graphs worked out by hand, and Helix's connection rule.
#include <gtest/gtest.h>

#include "serve/flow.h"
#include "serve_test_util.h"

namespace hetplan::serve {
namespace {

using testing::ranges;
using testing::toy_problem;

TEST(ServeFlow, ParallelMachinesAddUp) {
  // 4 layers: A holds [0,2) at 10 tokens/s; B and C hold [2,4) at 6 and 5.
  // Cut after A: 10; cut at B + C: 11. Max flow = 10.
  const ServingProblem p = toy_problem(4, {10, 6, 5}, 4);
  EXPECT_DOUBLE_EQ(max_flow(p, ranges({{0, 2}, {2, 2}, {2, 2}})), 10.0);
  // Two replicas of the first half raise the bound to the second half's 11.
  const ServingProblem q = toy_problem(4, {10, 6, 5, 10}, 4);
  EXPECT_DOUBLE_EQ(max_flow(q, ranges({{0, 2}, {2, 2}, {2, 2}, {0, 2}})), 11.0);
}

TEST(ServeFlow, UncoveredLayerMeansNoFlow) {
  const ServingProblem p = toy_problem(4, {10, 10}, 4);
  EXPECT_DOUBLE_EQ(max_flow(p, ranges({{0, 2}, {3, 1}})), 0.0);  // layer 2 held by no one
  EXPECT_DOUBLE_EQ(max_flow(p, ranges({{0, 4}, {}})), 10.0);     // one machine, whole model
}

TEST(ServeFlow, LinkCapacityIsBandwidthOverActivationBytes) {
  // A [0,2) 10 tokens/s feeds B [2,4) 6 and C [2,4) 5. The A -> B link carries 3 * 16384 B/s:
  // 16384-byte activations make that 3 tokens/s. Max flow = min(10, 3 + 5) = 8.
  ServingProblem p = toy_problem(4, {10, 6, 5}, 4);
  p.cluster.set_link(0, 1, {3 * 16384e-9, 0.001});
  const Placement pl = ranges({{0, 2}, {2, 2}, {2, 2}});
  EXPECT_DOUBLE_EQ(max_flow(p, pl), 8.0);
  const FlowResult r = solve_flow(p, pl);
  for (const FlowEdge& e : r.edges) {
    if (e.from == 0 && e.to == 1) {
      EXPECT_DOUBLE_EQ(e.capacity_tokens_per_s, 3.0);
      EXPECT_DOUBLE_EQ(e.flow_tokens_per_s, 3.0);
    }
  }
  // Client links carry token ids (2 bytes): 5 B/s from the source is 2.5 tokens/s.
  p.cluster.set_link(kSource, 0, {5e-9, 0.001});
  EXPECT_DOUBLE_EQ(max_flow(p, pl), 2.5);
}

TEST(ServeFlow, NicLimitsTheMachine) {
  // B's inbound NIC takes 2 * 16384 B/s: 2 tokens/s of activations. A starts at layer 0, so its
  // NIC carries token ids (2 bytes): 2 * 16384 B/s is 16384 tokens/s there, no limit.
  ServingProblem p = toy_problem(4, {10, 10}, 4);
  std::vector<Machine> machines = p.cluster.machines();
  machines[0].nic_in_GBps = 2 * 16384e-9;
  machines[1].nic_in_GBps = 2 * 16384e-9;
  ServingCluster c("toy", machines);
  for (int i = 0; i < 2; ++i) {
    c.set_link(kSource, i, {1e6, 0});
    c.set_link(i, kSink, {1e6, 0});
  }
  c.set_link(0, 1, {1e6, 0});
  p.cluster = c;
  const Placement pl = ranges({{0, 2}, {2, 2}});
  EXPECT_DOUBLE_EQ(machine_arc_capacity(p, 0, pl.ranges[0]), 10.0);
  EXPECT_DOUBLE_EQ(machine_arc_capacity(p, 1, pl.ranges[1]), 2.0);
  EXPECT_DOUBLE_EQ(max_flow(p, pl), 2.0);
}

TEST(ServeFlow, InboundNicChargedPerEdgeByWhatItCarries) {
  // A [0,2) and B [0,4), 10 tokens/s each; B's inbound NIC takes 3 * 16384 B/s. With no link from
  // the clients to B, B takes only A's activations (16384 bytes per token): 3 tokens/s, although
  // B holds layer 0 (token ids of 2 bytes would make its NIC 24576 tokens/s).
  ServingProblem p = toy_problem(4, {10, 10}, 4);
  std::vector<Machine> machines = p.cluster.machines();
  machines[1].nic_in_GBps = 3 * 16384e-9;
  ServingCluster c("toy", machines);
  c.set_link(kSource, 0, {1e6, 0});
  c.set_link(0, 1, {1e6, 0});
  c.set_link(1, kSink, {1e6, 0});
  p.cluster = c;
  const Placement pl = ranges({{0, 2}, {0, 4}});
  EXPECT_DOUBLE_EQ(max_flow(p, pl), 3.0);
  // With a link from the clients B also takes token ids: 24576 tokens/s of NIC there, so B's
  // compute (10) binds: source -> B and A -> B share B's 10 tokens/s.
  p.cluster.set_link(kSource, 1, {1e6, 0});
  EXPECT_DOUBLE_EQ(max_flow(p, pl), 10.0);
  // The clients' token ids are charged 2 bytes each: a NIC of 8 B/s takes 4 tokens/s from the
  // source (and 8 / 16384 from A).
  machines[1].nic_in_GBps = 8e-9;
  ServingCluster d("toy", machines);
  d.set_link(kSource, 0, {1e6, 0});
  d.set_link(kSource, 1, {1e6, 0});
  d.set_link(0, 1, {1e6, 0});
  d.set_link(1, kSink, {1e6, 0});
  p.cluster = d;
  EXPECT_NEAR(max_flow(p, pl), 4.0, 1e-3);
}

TEST(ServeFlow, HelixPartialInferenceRule) {
  // Helix's ILP (simulator/initial_layout/ilp_layout/ilp_layout.py): i may feed j when
  // start_j <= end_i < end_j; j then runs the layers from end_i on.
  ServingProblem p = toy_problem(6, {4, 4}, 6);
  EXPECT_TRUE(continues(p, {0, 3}, {2, 4}));   // 2 <= 3 < 6
  EXPECT_TRUE(continues(p, {0, 3}, {3, 3}));   // exact boundary
  EXPECT_FALSE(continues(p, {0, 3}, {4, 2}));  // gap at layer 3
  EXPECT_FALSE(continues(p, {0, 3}, {1, 2}));  // j ends where i ends: nothing left to run
  EXPECT_DOUBLE_EQ(max_flow(p, ranges({{0, 3}, {2, 4}})), 4.0);
  p.partial_inference = false;
  EXPECT_FALSE(continues(p, {0, 3}, {2, 4}));
  EXPECT_DOUBLE_EQ(max_flow(p, ranges({{0, 3}, {2, 4}})), 0.0);
}

TEST(ServeFlow, CapacityUsedOncePerTokenEvenWhenSkippingLayers) {
  // With partial inference a machine's capacity is spent by every token through it, however many
  // of its layers that token runs (Helix's model). A [0,2) 10, B [1,3) 10, C [0,1) 10, D [2,3) 10:
  // paths C -> B and A -> D carry 10 each: 20.
  const ServingProblem p = toy_problem(3, {10, 10, 10, 10}, 3);
  EXPECT_DOUBLE_EQ(max_flow(p, ranges({{0, 2}, {1, 2}, {0, 1}, {2, 1}})), 20.0);
}

TEST(ServeFlow, SolveFlowConservesFlow) {
  const ServingProblem p = toy_problem(4, {10, 6, 5, 7}, 4);
  const Placement pl = ranges({{0, 2}, {2, 2}, {1, 3}, {0, 2}});
  const FlowResult r = solve_flow(p, pl);
  double from_source = 0, to_sink = 0;
  std::vector<double> in(4, 0.0), out(4, 0.0);
  for (const FlowEdge& e : r.edges) {
    if (e.from == kSource)
      from_source += e.flow_tokens_per_s;
    else
      out[e.from] += e.flow_tokens_per_s;
    if (e.to == kSink)
      to_sink += e.flow_tokens_per_s;
    else
      in[e.to] += e.flow_tokens_per_s;
    EXPECT_LE(e.flow_tokens_per_s, e.capacity_tokens_per_s + 1e-9);
  }
  EXPECT_NEAR(from_source, r.max_flow_tokens_per_s, 1e-9);
  EXPECT_NEAR(to_sink, r.max_flow_tokens_per_s, 1e-9);
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(in[i], r.machine_flow[i], 1e-9);
    EXPECT_NEAR(out[i], r.machine_flow[i], 1e-9);
    EXPECT_LE(r.machine_flow[i], r.machine_capacity[i] + 1e-9);
  }
  // Layers 0-1 are held by machines 0 and 3 (10 + 7), layer 2 by 1 and 2 (6 + 5): 11.
  EXPECT_DOUBLE_EQ(r.max_flow_tokens_per_s, 11.0);
}

}  // namespace
}  // namespace hetplan::serve
