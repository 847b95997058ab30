// Helix's capacity model: its formula by hand, its tables, and the objectives Helix recorded for
// its own MILP placements, reproduced.
#include <filesystem>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "costmodel/errors.h"
#include "serve/capacity.h"
#include "serve/flow.h"
#include "serve/helix_capacity.h"
#include "serve/helix_solution.h"
#include "serve_test_util.h"

namespace hetplan::serve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::kHelix;

HelixCapacityTables toy_tables() {
  HelixCapacityTables t;
  HelixTypeTable toy;
  toy.max_layers = 2;
  toy.kv_blocks = {100000, 40000};
  toy.typical_layers = toy.typical_layers_when_short = 2;
  toy.initial_layer_speed = 1;
  t.types["toy"] = toy;
  return t;
}

TEST(ServeHelixCapacity, FormulaByHand) {
  // Two machines of one type, 10 layers; prompt 1e-4 s per token, decode 0.01 + 1e-4 * batch s.
  // One type: every layer runs at its speed, so a machine with k layers has the share k / 10 of
  // a request's round trip whatever the speeds.
  ServingProblem p = testing::toy_problem(10, {1, 1}, 2);
  p.times.assign(2, std::make_shared<testing::LinearTimes>(1e-4, 0.01, 1e-4));
  CapacityParams params;
  params.model = CapacityModel::kHelix;
  const HelixCapacityTables tables = toy_tables();
  const auto caps = helix_capacities(p.cluster, p.model, p.times, {}, params, p.capacity, &tables);
  ASSERT_EQ(caps.size(), 2u);
  const MachineCapacity& cap = caps[0];
  EXPECT_EQ(cap.max_layers, 2);
  // k = 1: 16 x 100000 KV tokens per layer; 0.3 of them = 480000, 484.85 requests of 990 tokens;
  // a share of 0.1 -> 48.485 decode requests per step and 48.485 / 240 = 0.20202 prompts.
  EXPECT_DOUBLE_EQ(cap.kv_tokens_per_layer[1], 1.6e6);
  EXPECT_NEAR(cap.decode_batch[1], 48.484848, 1e-6);
  // Rounded: 152 prompt tokens, 48 decode tokens; scaled by 1 / 0.20202 = 4.95 to one whole
  // prompt: 990 tokens in 1e-4 x trunc(152 x 4.95 = 752.4) + 4.95 x (0.01 + 48e-4) = 0.14846 s.
  EXPECT_NEAR(cap.tokens_per_s[1], 990 / (752e-4 + 4.95 * 0.0148), 1e-6);  // 6668.46
  // k = 2: 0.3 x 640000 = 192000 tokens, 193.94 requests, share 0.2: 38.79 decode requests and
  // 0.16162 prompts; 121 and 39 tokens, scaled by 6.1875: 990 tokens in
  // 2 x (1e-4 x trunc(748.7) + 6.1875 x (0.01 + 39e-4)) = 0.3216125 s.
  EXPECT_NEAR(cap.tokens_per_s[2], 990 / (2 * (748e-4 + 6.1875 * 0.0139)), 1e-6);  // 3078.24
}

TEST(ServeHelixCapacity, WholeRequestPerStep) {
  // With a cache so large that more than one prompt is due per decode step, Helix counts one
  // request: 750 prompt and 240 decode tokens per k x (t_prompt(750) + t_decode(240)).
  ServingProblem p = testing::toy_problem(10, {1}, 1);
  p.times.assign(1, std::make_shared<testing::LinearTimes>(1e-4, 0.01, 1e-4));
  HelixCapacityTables tables = toy_tables();
  tables.types["toy"].max_layers = 1;
  tables.types["toy"].kv_blocks = {1e7};  // 0.3 x 1.6e8 / 990 x 0.1 / 240 = 20.2 prompts per step
  tables.types["toy"].typical_layers = tables.types["toy"].typical_layers_when_short = 1;
  CapacityParams params;
  const auto caps = helix_capacities(p.cluster, p.model, p.times, {}, params, p.capacity, &tables);
  EXPECT_NEAR(caps[0].tokens_per_s[1], 990 / (0.075 + 0.01 + 0.024), 1e-9);
}

TEST(ServeHelixCapacity, PublishedObjectives) {
  // Helix's recorded MILP objectives (its artifact, artifact_evaluation/{single_cluster,
  // high_heterogeneity}/layout_llama70b/ilp/ilp_solution.sol): 1289.5557702751735 and
  // 4137.5475853976423 tokens/s. Its runs did not allow partial inference.
  struct Case {
    const char* cluster;
    const char* solution;
    double objective;
  };
  for (const Case& c :
       {Case{"clusters/cluster24.ini", "layouts/single_cluster-llama70b/ilp/ilp_sol.ini",
             1289.5557702751735},
        Case{"clusters/cluster42.ini", "layouts/high_heterogeneity-llama70b/ilp/ilp_sol.ini",
             4137.5475853976423}}) {
    for (bool partial : {false, true}) {
      ServingProblem p = testing::helix_problem(c.cluster, CapacityModel::kHelix);
      p.partial_inference = partial;
      const Placement placement = read_helix_solution(kHelix / c.solution, p.cluster, 80);
      EXPECT_TRUE(placement_errors(p, placement).empty()) << c.cluster;
      // Integer milli-tokens/s in the max flow: within 1e-3 of Helix's value.
      EXPECT_NEAR(max_flow(p, placement), c.objective, 2e-3)
          << c.cluster << (partial ? " with" : " without") << " partial inference";
    }
  }
}

TEST(ServeHelixCapacity, CapacitiesOnCluster24) {
  // The figure: an A100 holding 12 layers serves 952.1 tokens/s in Helix's model (2248.4
  // in hetplan's); Helix's tables hold T4 to 4 layers and A100 to 12.
  const ServingProblem helix =
      testing::helix_problem("clusters/cluster24.ini", CapacityModel::kHelix);
  const ServingProblem ours = testing::helix_problem("clusters/cluster24.ini");
  int a100 = -1;
  for (int i = 0; i < helix.machines(); ++i)
    if (helix.cluster.machines()[i].machine_type == "A100") a100 = i;
  ASSERT_GE(a100, 0);
  EXPECT_EQ(helix.capacity[a100].max_layers, 12);
  EXPECT_NEAR(helix.capacity[a100].tokens_per_s[12], 952.1, 0.05);
  EXPECT_NEAR(ours.capacity[a100].tokens_per_s[12], 2248.4, 0.05);
  // KV cache per layer from vLLM's measured blocks: 16 x 17591 tokens with 12 layers.
  EXPECT_DOUBLE_EQ(helix.capacity[a100].kv_tokens_per_layer[12], 16 * 17591.0);
}

TEST(ServeHelixCapacity, WithoutTablesUsesHetplansMemory) {
  // A type the tables do not list takes hetplan's layer limit and KV cache.
  ServingProblem p = testing::helix_problem("clusters/cluster24.ini");
  CapacityParams params;
  params.model = CapacityModel::kHelix;
  const auto caps = helix_capacities(p.cluster, p.model, p.times, {}, params, p.capacity, nullptr);
  for (int i = 0; i < p.machines(); ++i) {
    EXPECT_EQ(caps[i].max_layers, p.capacity[i].max_layers);
    EXPECT_DOUBLE_EQ(caps[i].kv_tokens_per_layer[1], p.capacity[i].kv_tokens_per_layer[1]);
    EXPECT_GT(caps[i].tokens_per_s[1], 0);
  }
}

TEST(ServeHelixCapacity, TableErrors) {
  const fs::path file = fs::temp_directory_path() / "hetplan_helix_capacity.yaml";
  auto write = [&](const std::string& types) {
    std::ofstream(file) << "model: toy\nkv_block_tokens: 16\nshort_below_model_copies: 1.2\n"
                           "speed_iterations: 10\ntypical_layers: {A: 1}\n"
                           "typical_layers_when_short: {A: 2}\ninitial_layer_speed: {A: 1}\n"
                           "machine_types:\n"
                        << types;
  };
  write("  A: {max_layers: 2, kv_blocks: [10]}\n");
  try {
    read_helix_capacity_tables(file);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("machine_types.A.kv_blocks"));
    EXPECT_THAT(e.what(), HasSubstr("expected 2 block counts"));
  }
  write("  A: {max_layers: 1, kv_blocks: [10]}\n");
  try {
    read_helix_capacity_tables(file);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("typical_layers_when_short.A"));
  }
  write("  B: {max_layers: 2, kv_blocks: [10, 5]}\n");
  EXPECT_THROW(read_helix_capacity_tables(file), InputError);  // A: no machine type
  fs::remove(file);
}

}  // namespace
}  // namespace hetplan::serve
