// `serve --cluster` with what predict and search take (cluster presets, NODE:COUNT lists, training
// cluster files): the conversion to a serving cluster, telling the file kinds apart, and the CLI.
#include "serve/training_cluster.h"

#include <filesystem>
#include <fstream>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "costmodel/errors.h"
#include "costmodel/profile.h"
#include "serve/cost_layer_time.h"

namespace hetplan::serve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr double kGiB = 1ull << 30;
const fs::path kRepo = fs::path(HETPLAN_TEST_DATA).parent_path().parent_path();

std::string load_error(const std::string& spec) {
  try {
    load_serve_cluster(spec);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

fs::path write_file(const std::string& name, const std::string& text) {
  const fs::path dir = hetplan::testing::temp_dir("serve_training_cluster");
  std::ofstream(dir / name) << text;
  return dir / name;
}

void expect_link(const ServingCluster& c, int from, int to, double GBps, double latency_s) {
  SCOPED_TRACE(::testing::Message() << from << " -> " << to);
  const auto link = c.link(from, to);
  ASSERT_TRUE(link.has_value());
  EXPECT_DOUBLE_EQ(link->bandwidth_GBps, GBps);
  EXPECT_DOUBLE_EQ(link->latency_s, latency_s);
}

// presets/clusters/amp-hetero.yaml: 3 p3.8xlarge (4 x V100 16 GiB, 10 Gbit/s, 30 us) and 1
// g4dn.12xlarge (4 x T4 16 GiB, 50 Gbit/s, 30 us); no network section, so a pair of nodes gets
// the slower node's bandwidth and the larger latency.
TEST(ServeTrainingCluster, PresetBecomesOneMachinePerNode) {
  const ServeCluster loaded = load_serve_cluster("amp-hetero");
  ASSERT_TRUE(loaded.training.has_value());
  EXPECT_EQ(loaded.training->name, "amp-hetero");
  const ServingCluster& c = loaded.serving;
  ASSERT_EQ(c.size(), 4);
  const std::vector<std::string> names = {"p3.8xlarge-0", "p3.8xlarge-1", "p3.8xlarge-2",
                                          "g4dn.12xlarge"};
  for (int i = 0; i < 4; ++i) {
    const Machine& m = c.machines()[i];
    EXPECT_EQ(m.name, names[i]);
    EXPECT_EQ(m.machine_type, i < 3 ? "p3.8xlarge" : "g4dn.12xlarge");
    EXPECT_EQ(m.gpu_type, i < 3 ? "v100" : "t4");
    EXPECT_EQ(m.gpus, 4);
    // A V100's 16 GiB; a T4's 15,843,721,216 bytes with ECC on (presets/gpus/t4.yaml).
    EXPECT_DOUBLE_EQ(m.vram_bytes, 4 * (i < 3 ? 16 * kGiB : 15'843'721'216.0));
    const double nic = i < 3 ? 10.0 / 8 : 50.0 / 8;  // GBps
    EXPECT_DOUBLE_EQ(m.nic_in_GBps, nic);
    EXPECT_DOUBLE_EQ(m.nic_out_GBps, nic);
    // Clients over the machine's own network.
    expect_link(c, kSource, i, nic, 30e-6);
    expect_link(c, i, kSink, nic, 30e-6);
    EXPECT_FALSE(c.link(i, i).has_value());
    for (int j = 0; j < 4; ++j)
      if (j != i) expect_link(c, i, j, 10.0 / 8, 30e-6);  // every pair has a p3.8xlarge
  }
  EXPECT_FALSE(c.link(kSink, 0).has_value());
  EXPECT_FALSE(c.link(0, kSource).has_value());
  EXPECT_DOUBLE_EQ(c.source_nic_GBps, 0);  // unlimited
  EXPECT_DOUBLE_EQ(c.sink_nic_GBps, 0);
}

// examples/clusters/two-sites.yaml: 2 p4d.24xlarge (8 x A100 40 GiB, 400 Gbit/s, 15 us) and 4
// g4dn.12xlarge, joined by a 25 Gbit/s, 200 us link between the kinds.
TEST(ServeTrainingCluster, ClusterFileLinksFollowItsNetwork) {
  const ServingCluster c = load_serving_cluster(kRepo / "examples/clusters/two-sites.yaml");
  ASSERT_EQ(c.size(), 6);
  EXPECT_EQ(c.machines()[0].name, "p4d.24xlarge-0");
  EXPECT_EQ(c.machines()[1].name, "p4d.24xlarge-1");
  EXPECT_EQ(c.machines()[2].name, "g4dn.12xlarge-0");
  EXPECT_EQ(c.machines()[5].name, "g4dn.12xlarge-3");
  EXPECT_EQ(c.machines()[0].gpu_type, "a100-40gb");
  EXPECT_EQ(c.machines()[0].gpus, 8);
  EXPECT_DOUBLE_EQ(c.machines()[0].vram_bytes, 8 * 40 * kGiB);
  EXPECT_DOUBLE_EQ(c.machines()[0].nic_out_GBps, 50);
  EXPECT_DOUBLE_EQ(c.machines()[3].vram_bytes, 4 * 15'843'721'216.0);  // T4s with ECC on
  EXPECT_DOUBLE_EQ(c.machines()[3].nic_in_GBps, 6.25);
  expect_link(c, 0, 1, 50, 15e-6);  // p4d <-> p4d: their own network
  expect_link(c, 1, 0, 50, 15e-6);
  expect_link(c, 0, 2, 3.125, 200e-6);  // between the sites, both ways
  expect_link(c, 5, 1, 3.125, 200e-6);
  expect_link(c, 2, 3, 6.25, 30e-6);  // g4dn <-> g4dn
  expect_link(c, kSource, 0, 50, 15e-6);
  expect_link(c, 4, kSink, 6.25, 30e-6);
}

TEST(ServeTrainingCluster, NodeCountListsAndASingleNodePreset) {
  const ServingCluster c = load_serve_cluster("p4d.24xlarge:2,g6.12xlarge").serving;
  ASSERT_EQ(c.size(), 3);
  EXPECT_EQ(c.machines()[1].name, "p4d.24xlarge-1");
  EXPECT_EQ(c.machines()[2].name, "g6.12xlarge");  // a count of one: the kind alone
  EXPECT_EQ(c.machines()[2].gpu_type, "l4");
  EXPECT_DOUBLE_EQ(c.machines()[2].vram_bytes, 4 * 24 * kGiB);
  expect_link(c, 0, 2, 40.0 / 8, 30e-6);  // min(400, 40) Gbit/s, max(15, 30) us
  const ServingCluster one = load_serve_cluster("p5.48xlarge").serving;
  ASSERT_EQ(one.size(), 1);
  EXPECT_EQ(one.machines()[0].name, "p5.48xlarge");
  EXPECT_DOUBLE_EQ(one.machines()[0].nic_in_GBps, 400);
}

const char* kCustomCluster = R"(name: custom
gpu_types:
  mygpu: {peak_tflops: {fp16: 100}, memory_gib: 24, memory_GBps: 900, sm_count: 60, l2_mib: 6}
node_types:
  box: {gpu: mygpu, gpus: 2, fabric: pcie, intra_GBps: 16, intra_latency_us: 5,
        network_gbit: 100, network_latency_us: 20}
nodes:
  - {type: box, count: 3}
  - {type: p4d.24xlarge, count: 1}
network:
  links:
    - {between: [box, p4d.24xlarge], gbit: 40, latency_us: 100}
)";

TEST(ServeTrainingCluster, FileNodeAndGpuTypesAreConverted) {
  const fs::path path = write_file("custom.yaml", kCustomCluster);
  const ServeCluster loaded = load_serve_cluster(path.string());
  const ServingCluster& c = loaded.serving;
  ASSERT_EQ(c.size(), 4);
  EXPECT_EQ(c.machines()[2].name, "box-2");
  EXPECT_EQ(c.machines()[2].machine_type, "box");
  EXPECT_EQ(c.machines()[2].gpu_type, "mygpu");
  EXPECT_EQ(c.machines()[2].gpus, 2);
  EXPECT_DOUBLE_EQ(c.machines()[2].vram_bytes, 2 * 24 * kGiB);
  expect_link(c, 0, 1, 12.5, 20e-6);
  expect_link(c, 3, 0, 5, 100e-6);
  expect_link(c, kSource, 3, 50, 15e-6);
  EXPECT_EQ(c.origin(), path.string());
}

TEST(ServeTrainingCluster, FileKindsAreToldApartByTheirKeys) {
  EXPECT_EQ(cluster_file_kind(load_document(fs::path(HETPLAN_TEST_DATA) / "serve_cluster.yaml")),
            ClusterFileKind::kServing);
  EXPECT_EQ(cluster_file_kind(load_document(kRepo / "examples/clusters/two-sites.yaml")),
            ClusterFileKind::kTraining);
  const fs::path both =
      write_file("both.yaml",
                 "machine_types: {A100: {gpu: a100-40gb}}\nnodes:\n  - {type: p4d.24xlarge, "
                 "count: 1}\n");
  EXPECT_THAT(load_error(both.string()),
              HasSubstr("both.yaml: has keys of a serving cluster (machine_types) and of a "
                        "training cluster (nodes): expected one kind"));
  const fs::path neither = write_file("neither.json", R"({"name": "x", "gpus": 4})");
  EXPECT_THAT(load_error(neither.string()),
              HasSubstr("neither.json: expected a hetplan serving cluster file (machine_types, "
                        "machines, links; docs/serving.md) or a training cluster file"));
  EXPECT_THAT(load_error(neither.string()), HasSubstr("found the keys: gpus, name"));
  const fs::path list = write_file("list.yaml", "- a\n- b\n");
  EXPECT_THAT(load_error(list.string()), HasSubstr("list.yaml: expected a hetplan serving"));
  // A training file's own errors still name its key.
  const fs::path bad = write_file("bad.yaml", "nodes:\n  - {type: p4d.24xlarge, count: 0}\n");
  EXPECT_THAT(load_error(bad.string()), HasSubstr("bad.yaml: nodes[0].count"));
}

TEST(ServeTrainingCluster, SpecsThatAreNoneOfItSayWhatIsTaken) {
  EXPECT_THAT(load_error("nonexistent/c.yaml"),
              HasSubstr("nonexistent/c.yaml: no such file: expected a cluster preset "
                        "(amp-hetero, three-gen-1024), NODE:COUNT,..."));
  EXPECT_THAT(load_error("amp-hetro"), HasSubstr("--cluster amp-hetro: no such preset or file"));
  EXPECT_THAT(load_error(fs::temp_directory_path().string()), HasSubstr("is not a file"));
  EXPECT_THAT(load_error("p4d.24xlarge:0"),
              HasSubstr("expected NODE:COUNT with a whole count > 0"));
  EXPECT_THAT(load_error("p4d.24xlarge:3000"),
              HasSubstr("nodes: the cluster would have 3000 machines: hetplan serve takes at most "
                        "2048"));
}

// A node kind is timed on that node: p3.8xlarge is the node the Helix type V100x4 is timed on
// (4 V100 on its NVLink), so their times are the same; p3.16xlarge's 8 V100 are faster.
TEST(ServeTrainingCluster, CostModelTimesNodeKinds) {
  const ModelSpec model = load_model("llama2-13b");
  const ClusterSpec training = load_cluster("p3.8xlarge:1,p3.16xlarge:1");
  std::map<std::string, NodeSpec> nodes;
  for (const auto& g : training.groups) nodes[g.node.name] = g.node;
  const CostModelLayerTimes times(model, load_profile_inputs({default_calibration_dir().string()}),
                                  750, 870, nodes);
  const auto p3 = times.for_machine_type("p3.8xlarge");
  const auto helix = times.for_machine_type("V100x4");
  EXPECT_DOUBLE_EQ(p3->decode_s(8), helix->decode_s(8));
  EXPECT_DOUBLE_EQ(p3->prompt_s(2000), helix->prompt_s(2000));
  EXPECT_LT(times.for_machine_type("p3.16xlarge")->prompt_s(2000), p3->prompt_s(2000));
  EXPECT_THROW(times.for_machine_type("g4dn.12xlarge"), InputError);  // not in this cluster
}

TEST(ServeTrainingCluster, ServeOnAPresetPlacesEveryLayer) {
  const fs::path out = hetplan::testing::temp_dir("serve_training_cli") / "serve.json";
  const auto r = hetplan::testing::run_hetplan(
      "serve --model llama2-13b --cluster amp-hetero --time-limit 5 --requests 20 --quiet "
      "--json " +
      out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(out);
  const auto j = nlohmann::json::parse(in);
  EXPECT_GT(j["max_flow_tokens_per_s"].get<double>(), 0);
  ASSERT_EQ(j["placement"].size(), 4u);
  std::set<int> held;
  for (const auto& p : j["placement"])
    if (!p["layers"].is_null())
      for (int l = p["layers"][0].get<int>(); l <= p["layers"][1].get<int>(); ++l) held.insert(l);
  EXPECT_EQ(held.size(), 40u);  // llama2-13b's 40 blocks
  EXPECT_EQ(j["placement"][3]["machine"], "g4dn.12xlarge");
  // The summary's columns are as wide as the longest machine name and type (13 characters here).
  EXPECT_THAT(r.output, HasSubstr("\nmachine       type             layers  capacity      flow"));
  EXPECT_THAT(r.output, HasSubstr("\np3.8xlarge-0  p3.8xlarge    "));
}

TEST(ServeTrainingCluster, CliErrorsAreExit2) {
  const std::string helix = std::string(HETPLAN_EXTERNAL_DATA) + "/helix/profiles/llama2_70b";
  auto r = hetplan::testing::run_hetplan(
      "serve --model llama2-70b --cluster amp-hetero --profiles " + helix + " --quiet");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("llama2_70b: no per-layer profiles for the machine types of "
                                  "cluster amp-hetero: a training cluster's machine types are its "
                                  "node types; expected the folders p3.8xlarge/, g4dn.12xlarge/"));
  EXPECT_THAT(r.output, HasSubstr("(found: a100, l4, l4x2, t4, t4x2, t4x4, v100)"));
  const fs::path both = write_file("cli_both.yaml", "machines: []\nnetwork: {}\n");
  r = hetplan::testing::run_hetplan("serve --model llama2-13b --quiet --cluster " + both.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("cli_both.yaml: has keys of a serving cluster (machines)"));
  r = hetplan::testing::run_hetplan(
      "serve --model llama2-13b --quiet --cluster amp-hetero "
      "--machine-profiles x.ini");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("--machine-profiles applies only to Helix cluster topologies"));
}

// Per-layer times with --profiles: folders named after the node kinds are used.
TEST(ServeTrainingCluster, ProfilesNamedAfterNodeKindsAreUsed) {
  const fs::path helix = fs::path(HETPLAN_EXTERNAL_DATA) / "helix/profiles/llama2_70b";
  const fs::path dir = hetplan::testing::temp_dir("serve_training_profiles") / "profiles";
  fs::create_directories(dir);
  fs::copy(helix / "t4x4", dir / "g4dn.12xlarge",
           fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  const auto r = hetplan::testing::run_hetplan(
      "serve --model llama2-70b --cluster g4dn.12xlarge:6 --profiles " + dir.string() +
      " --time-limit 5 --no-simulation --quiet --no-milp");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("g4dn.12xlarge-5"));
}

}  // namespace
}  // namespace hetplan::serve
