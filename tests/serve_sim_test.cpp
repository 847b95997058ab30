// Routing weights (IWRR) and the request-trace simulator: hand-checked timings and conservation.
#include <gtest/gtest.h>

#include "serve/baselines.h"
#include "serve/flow.h"
#include "serve/routing.h"
#include "serve/simulator.h"
#include "serve_test_util.h"

namespace hetplan::serve {
namespace {

TEST(ServeRouting, InterleavedWeightedRoundRobin) {
  // Weights 3 and 1: cycle 1 serves both, cycles 2 and 3 only the first: 0 1 0 0, repeated.
  Iwrr iwrr({3, 1});
  std::vector<int> seen;
  for (int i = 0; i < 8; ++i) seen.push_back(iwrr.next());
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 0, 0, 0, 1, 0, 0}));
  Iwrr none;
  EXPECT_EQ(none.next(), -1);
}

TEST(ServeRouting, WeightsFollowTheFlow) {
  // A [0,2) 10 tokens/s feeds B [2,4) 6 and C [2,4) 5: A sends 6 to B and 4 to C, or 5 and 5.
  const ServingProblem p = testing::toy_problem(4, {10, 6, 5}, 4);
  const FlowResult f = solve_flow(p, testing::ranges({{0, 2}, {2, 2}, {2, 2}}));
  const RoutingTable t = routing_from_flow(p, f);
  ASSERT_EQ(t.from(kSource).size(), 1u);
  EXPECT_EQ(t.from(kSource)[0].to, 0);
  EXPECT_DOUBLE_EQ(t.from(kSource)[0].share, 1.0);
  double share = 0, flow = 0;
  for (const RouteChoice& c : t.from(0)) {
    share += c.share;
    flow += c.flow_tokens_per_s;
    EXPECT_GE(c.weight, 1);
  }
  EXPECT_DOUBLE_EQ(share, 1.0);
  EXPECT_DOUBLE_EQ(flow, 10.0);
}

TEST(ServeSimulation, OneRequestTimedByHand) {
  // One machine holds all 4 layers; prompt and output of one token each (means 1 -> lengths 1).
  // Time to first token = source link (1 ms latency) + 4 layers x prompt 1e-5 s + sink link
  // (1 ms): 0.00204 s; the request is then done.
  const ServingProblem p = testing::toy_problem(4, {100}, 4);
  const Placement pl = testing::ranges({{0, 4}});
  const RoutingTable t = routing_from_flow(p, solve_flow(p, pl));
  SimulationConfig c;
  c.requests = 1;
  c.mean_prompt_tokens = 1;
  c.mean_output_tokens = 1;
  const SimulationResult s = simulate_serving(p, pl, t, c);
  EXPECT_EQ(s.completed, 1);
  EXPECT_NEAR(s.prompt_latency.mean_s, 0.001 + 4 * 1e-5 + 0.001, 1e-12);
  EXPECT_DOUBLE_EQ(s.admission_wait.mean_s, 0.0);
}

TEST(ServeSimulation, DecodeStepTimedByHand) {
  // Same machine, output of 3 tokens: each decode step goes client -> machine -> client: 1 ms +
  // 4 layers x (0.01 + 0.001 x 1) s + 1 ms = 0.046 s per token after the first.
  const ServingProblem p = testing::toy_problem(4, {100}, 4);
  const Placement pl = testing::ranges({{0, 4}});
  const RoutingTable t = routing_from_flow(p, solve_flow(p, pl));
  SimulationConfig c;
  c.requests = 1;
  c.mean_prompt_tokens = 1;
  c.mean_output_tokens = 3;  // uniform over [2, 4]
  const SimulationResult s = simulate_serving(p, pl, t, c);
  ASSERT_EQ(s.completed, 1);
  EXPECT_NEAR(s.decode_latency.mean_s, 0.046, 1e-12);
}

TEST(ServeSimulation, NicsTimedByHand) {
  // One machine holds all 4 layers; one request of one prompt and one output token. Its inbound
  // NIC takes 2 B/s: the 2-byte prompt arrives 1 ms (source link latency) + 1 s after it is sent;
  // 4 layers x 1e-5 s of prompt; its outbound NIC sends the 2-byte token at 1 B/s (2 s), then the
  // sink link's 1 ms: 3.00204 s to the first token.
  ServingProblem p = testing::toy_problem(4, {100}, 4);
  std::vector<Machine> machines = p.cluster.machines();
  machines[0].nic_in_GBps = 2e-9;
  machines[0].nic_out_GBps = 1e-9;
  ServingCluster c("toy", machines);
  c.set_link(kSource, 0, {1e6, 0.001});
  c.set_link(0, kSink, {1e6, 0.001});
  p.cluster = c;
  const Placement pl = testing::ranges({{0, 4}});
  SimulationConfig config;
  config.requests = 1;
  config.mean_prompt_tokens = 1;
  config.mean_output_tokens = 1;
  const SimulationResult s =
      simulate_serving(p, pl, routing_from_flow(p, solve_flow(p, pl)), config);
  ASSERT_EQ(s.completed, 1);
  EXPECT_NEAR(s.prompt_latency.mean_s, 0.001 + 1 + 4 * 1e-5 + 2 + 0.001, 1e-12);
}

TEST(ServeSimulation, NicBoundThroughputStaysBelowTheMaxFlow) {
  // QA's nic.yaml in small: A [0,2) feeds B [2,4), 100 tokens/s of compute each, but A's
  // outbound NIC carries 5 activations (16384 bytes) per second: max flow 5 tokens/s. The
  // simulation used to ignore NICs and reach the compute rate.
  ServingProblem p = testing::toy_problem(4, {100, 100}, 4);
  std::vector<Machine> machines = p.cluster.machines();
  machines[0].nic_out_GBps = 5 * 16384e-9;
  ServingCluster c("toy", machines);
  c.set_link(kSource, 0, {1e6, 0.001});
  c.set_link(0, 1, {1e6, 0.001});
  c.set_link(1, kSink, {1e6, 0.001});
  p.cluster = c;
  const Placement pl = testing::ranges({{0, 2}, {2, 2}});
  const FlowResult f = solve_flow(p, pl);
  ASSERT_DOUBLE_EQ(f.max_flow_tokens_per_s, 5.0);
  SimulationConfig config;
  config.requests = 100;
  config.mean_prompt_tokens = 20;
  config.mean_output_tokens = 10;
  config.rate_requests_per_s = 10;  // 300 tokens/s offered: overload
  const SimulationResult s = simulate_serving(p, pl, routing_from_flow(p, f), config);
  EXPECT_EQ(s.completed, 100);
  // A request's activations cross A's NIC prompt + output - 1 times (its last token is not run
  // again) where the flow model counts prompt + output tokens: the NIC's 5 tokens/s bound the
  // simulation at 5 x tokens / (tokens - requests).
  const double tokens = s.throughput_tokens_per_s * s.duration_s;
  EXPECT_LE(s.throughput_tokens_per_s, 5.0 * tokens / (tokens - 100) + 1e-9);
  EXPECT_GT(s.throughput_tokens_per_s, 0.9 * f.max_flow_tokens_per_s);  // the NIC is saturated
}

TEST(ServeSimulation, RequestsFitTheContext) {
  // Lengths are drawn up to 1.5 x the means: 4500 + 1500 would pass a 4096-token context. The
  // output is shortened to fit (the CLI sets the cap to the model's context).
  const ServingProblem p = testing::toy_problem(4, {1e6}, 4);
  const Placement pl = testing::ranges({{0, 4}});
  SimulationConfig c;
  c.requests = 50;
  c.rate_requests_per_s = 1000;
  c.mean_prompt_tokens = 3000;
  c.mean_output_tokens = 1000;
  c.max_request_tokens = 4096;
  const SimulationResult s = simulate_serving(p, pl, routing_from_flow(p, solve_flow(p, pl)), c);
  ASSERT_EQ(s.completed, 50);
  EXPECT_LE(s.throughput_tokens_per_s * s.duration_s, 50 * 4096 + 1e-6);
  c.max_request_tokens = 0;  // no cap: some requests are longer
  const SimulationResult longer =
      simulate_serving(p, pl, routing_from_flow(p, solve_flow(p, pl)), c);
  EXPECT_GT(longer.throughput_tokens_per_s * longer.duration_s,
            s.throughput_tokens_per_s * s.duration_s);
}

TEST(ServeSimulation, ConservationOnHelixCluster) {
  const ServingProblem p = testing::helix_problem("clusters/cluster24.ini");
  const Placement pl = greedy_placement(p);
  const FlowResult f = solve_flow(p, pl);
  SimulationConfig c;
  c.requests = 300;
  c.rate_requests_per_s = 2 * f.max_flow_tokens_per_s / 990;  // overload: throughput-bound
  const SimulationResult s = simulate_serving(p, pl, routing_from_flow(p, f), c);
  EXPECT_EQ(s.completed, 300);
  EXPECT_EQ(s.rejected, 0);
  EXPECT_GT(s.prompt_latency.mean_s, 0);
  EXPECT_GT(s.decode_latency.mean_s, 0);
  EXPECT_GT(s.throughput_tokens_per_s, 0);
  // No machine runs a larger decode batch than the capacity model assumes, so the simulated
  // throughput cannot beat the max flow.
  EXPECT_LE(s.throughput_tokens_per_s, f.max_flow_tokens_per_s);
  EXPECT_LE(s.decode_throughput_tokens_per_s, s.throughput_tokens_per_s);
  // Same seed, same trace, same result.
  const SimulationResult again = simulate_serving(p, pl, routing_from_flow(p, f), c);
  EXPECT_DOUBLE_EQ(again.throughput_tokens_per_s, s.throughput_tokens_per_s);
}

}  // namespace
}  // namespace hetplan::serve
