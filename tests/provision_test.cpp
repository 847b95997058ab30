#include "search/provision.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "cli_test_util.h"
#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "test_util.h"

namespace hetplan {
namespace {

TEST(Provision, PricesMixesAndMarksTheParetoFront) {
  ProvisionOptions o;
  o.node_types = {"g4dn.12xlarge", "p3.8xlarge"};
  o.max_nodes_per_type = 2;
  o.search.global_batch = 16;
  const ModelSpec model = load_model("gpt2-medium");
  const ProvisionResult r =
      provision(model, load_profile_inputs({default_calibration_dir().string()}), o);
  // Counts 0, 1, 2 for two types, not both 0: 8 mixes.
  EXPECT_EQ(r.mixes_tried, 8);
  ASSERT_EQ(r.mixes.size(), 8u);
  for (const auto& m : r.mixes) {
    double price = 0;
    for (const auto& g : m.cluster.groups) price += g.node.price_per_hour * g.count;
    EXPECT_DOUBLE_EQ(m.price_per_hour, price);
    ASSERT_TRUE(m.feasible) << m.cluster.name;
    // $ per million tokens = $/h / 3600 / tokens/s * 1e6.
    EXPECT_NEAR(m.dollars_per_million_tokens, price / 3600 / m.tokens_per_s * 1e6, 1e-9);
  }
  // Fastest first; the fastest mix is always on the Pareto front, and no front member is beaten
  // on both price and speed by another mix.
  EXPECT_TRUE(r.mixes.front().pareto);
  for (size_t i = 1; i < r.mixes.size(); ++i)
    EXPECT_LE(r.mixes[i].tokens_per_s, r.mixes[i - 1].tokens_per_s);
  for (const auto& a : r.mixes)
    for (const auto& b : r.mixes)
      if (a.pareto && &a != &b) {
        EXPECT_FALSE(b.price_per_hour < a.price_per_hour && b.tokens_per_s > a.tokens_per_s);
      }
}

TEST(Provision, BudgetExcludesExpensiveMixes) {
  ProvisionOptions o;
  o.node_types = {"g4dn.12xlarge", "p3.8xlarge"};
  o.max_nodes_per_type = 2;
  o.max_price_per_hour = 10;  // one or two g4dn.12xlarge ($3.912/h) only
  o.search.global_batch = 16;
  const ProvisionResult r = provision(load_model("gpt2-medium"),
                                      load_profile_inputs({default_calibration_dir().string()}), o);
  EXPECT_EQ(r.mixes_tried, 2);
  for (const auto& m : r.mixes) EXPECT_LE(m.price_per_hour, 10);
  // The other six are counted, with the cheapest of them: one p3.8xlarge at $12.24/h.
  EXPECT_EQ(r.over_budget, 6);
  EXPECT_EQ(r.cheapest_over, "p3.8xlarge:1");
  EXPECT_DOUBLE_EQ(r.cheapest_over_price, 12.24);
}

// Each type in a zone of its own (aws, $0.02/GB): the transfer term is the best strategy's priced
// bytes per step at the predicted step time, added to the nodes' price; one-type mixes pay none.
TEST(Provision, ZonesAddATransferTerm) {
  ProvisionOptions o;
  o.node_types = {"g4dn.12xlarge", "p3.8xlarge"};
  o.max_nodes_per_type = 1;
  o.search.global_batch = 16;
  o.spread = Spread::kZones;
  o.network = load_network("aws");
  const ProvisionResult r = provision(load_model("gpt2-medium"),
                                      load_profile_inputs({default_calibration_dir().string()}), o);
  ASSERT_EQ(r.mixes.size(), 3u);
  for (const auto& m : r.mixes) {
    ASSERT_TRUE(m.feasible) << m.cluster.name;
    EXPECT_NEAR(m.transfer.dollars, m.transfer.bytes() / 1e9 * 0.02, 1e-12);
    const double step_s = m.best.predicted.iteration_s;
    EXPECT_NEAR(m.transfer_dollars_per_hour, m.transfer.dollars * 3600 / step_s, 1e-9);
    const double per_token_h = 3600 * m.tokens_per_s / 1e6;
    EXPECT_NEAR(m.dollars_per_million_tokens,
                (m.price_per_hour + m.transfer_dollars_per_hour) / per_token_h, 1e-9);
    EXPECT_NEAR(m.transfer_dollars_per_million_tokens, m.transfer_dollars_per_hour / per_token_h,
                1e-12);
    if (m.cluster.groups.size() == 1) {
      EXPECT_DOUBLE_EQ(m.transfer.bytes(), 0);
    }
    if (m.cluster.groups.size() == 2) {
      EXPECT_EQ(m.cluster.groups[0].zone, "zone-1");
      EXPECT_EQ(m.cluster.zone_region.at("zone-2"), "region-1");
    }
  }
  o.network.reset();
  EXPECT_THROW(provision(load_model("gpt2-medium"),
                         load_profile_inputs({default_calibration_dir().string()}), o),
               InputError);
}

TEST(Provision, ANodeTypeListedTwiceIsAnInputError) {
  ProvisionOptions o;
  o.node_types = {"g4dn.12xlarge", "g4dn.12xlarge"};
  o.search.global_batch = 16;
  try {
    provision(load_model("gpt2-medium"), load_profile_inputs({default_calibration_dir().string()}),
              o);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("--nodes: g4dn.12xlarge is listed twice"),
              std::string::npos);
  }
}

// With --json - stdout holds the JSON alone (docs/cli.md); the table went to stdout before it.
TEST(ProvisionCli, JsonToStdoutIsTheJsonAlone) {
  const auto dir = testing::temp_dir("provision_stdout");
  const std::string out = (dir / "stdout.json").string(), err = (dir / "stderr.txt").string();
  const int status = std::system((std::string(HETPLAN_BINARY) +
                                  " provision --model gpt2-medium --nodes g4dn.12xlarge "
                                  "--global-batch 8 --max-nodes 2 --json - > " +
                                  out + " 2> " + err)
                                     .c_str());
  ASSERT_EQ(WEXITSTATUS(status), 0);
  const auto j = load_document(out).root;
  EXPECT_EQ(j["mixes_tried"], 2);
  EXPECT_EQ(j["mixes"].size(), 2u);
  // Each mix's predicted memory in whole bytes.
  EXPECT_TRUE(j["mixes"][0]["strategy"]["predicted"]["peak_memory_bytes"][0].is_number_integer());
  EXPECT_EQ(testing::fractional_bytes(j), std::vector<std::string>{});
  EXPECT_GE(testing::byte_values(j), 2u * 8);
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(testing::contains(text, "gpt2-medium (global batch 8): 2 node mixes")) << text;
  // No progress on a file (a CI log): it shows on a terminal only (tests/hostile_input_cli_test).
  EXPECT_FALSE(testing::contains(text, "node mixes searched")) << text;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
