#include "costmodel/hardware.h"

#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/calibration.h"
#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "costmodel/topology.h"

namespace hetplan {
namespace {

TEST(Hardware, GpuPresetsCarryDatasheetFigures) {
  const GpuSpec h100 = load_gpu("h100-sxm");
  EXPECT_DOUBLE_EQ(h100.peak_flops(Dtype::kBf16), 989.4e12);
  EXPECT_DOUBLE_EQ(h100.memory_bytes, 80.0 * (1ull << 30));
  EXPECT_EQ(h100.sm_count, 132);
  const GpuSpec t4 = load_gpu("t4");
  EXPECT_FALSE(t4.supports(Dtype::kBf16));  // Turing has no bf16 tensor cores
  EXPECT_DOUBLE_EQ(t4.peak_flops(Dtype::kFp16), 65e12);
}

// The H200 is the H100 SXM's compute with HBM3e: same peaks and SMs, more and faster memory.
TEST(Hardware, H200PresetAndItsExampleNode) {
  const GpuSpec h200 = load_gpu("h200");
  const GpuSpec h100 = load_gpu("h100-sxm");
  EXPECT_DOUBLE_EQ(h200.peak_flops(Dtype::kBf16), h100.peak_flops(Dtype::kBf16));
  EXPECT_DOUBLE_EQ(h200.peak_flops(Dtype::kFp8), h100.peak_flops(Dtype::kFp8));
  EXPECT_EQ(h200.sm_count, h100.sm_count);
  EXPECT_DOUBLE_EQ(h200.memory_bytes, 141.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(h200.memory_GBps, 4800);
  // What scripts/gpu_session.sh predicts for on an H200.
  const ClusterSpec c =
      load_cluster(std::string(HETPLAN_SOURCE_DIR) + "/examples/clusters/h200-node.yaml");
  EXPECT_EQ(c.num_gpus(), 8);
  EXPECT_EQ(c.num_nodes(), 1);
  EXPECT_EQ(c.groups.at(0).node.gpu.name, "h200");
}

// `hetplan fit` adds the shipped priors of the GPU type it fits (calibration_data/datasheet):
// every GPU preset has a file there, of its own type.
TEST(Hardware, EveryGpuPresetHasShippedPriors) {
  const std::filesystem::path dir = std::filesystem::path(HETPLAN_SOURCE_DIR) / "calibration_data";
  int gpus = 0;
  for (const auto& p : hardware_presets()) {
    if (p.kind != "gpu") continue;
    ++gpus;
    const CalibrationFile f = load_calibration(dir / "datasheet" / (p.name + ".json"));
    EXPECT_EQ(f.context.gpu_type, p.name);
    EXPECT_EQ(f.context.source, "datasheet");
    EXPECT_TRUE(f.datasheet.has_value()) << p.name;
  }
  EXPECT_GE(gpus, 7);
}

TEST(Hardware, ClusterListParsesCountsAndNetwork) {
  const ClusterSpec c = load_cluster("p3.8xlarge:3,g4dn.12xlarge:1");
  EXPECT_EQ(c.num_gpus(), 16);
  EXPECT_EQ(c.num_nodes(), 4);
  // Different kinds talk at the slower of their network speeds: min(10, 50) Gbit/s.
  EXPECT_DOUBLE_EQ(c.network_GBps("p3.8xlarge", "g4dn.12xlarge"), 10.0 / 8);
  EXPECT_DOUBLE_EQ(c.network_GBps("g4dn.12xlarge", "g4dn.12xlarge"), 50.0 / 8);
  const auto devices = cluster_devices(c);
  ASSERT_EQ(devices.size(), 16u);
  EXPECT_EQ(devices[12].node, 3);
  EXPECT_EQ(devices[12].group, 1);
  EXPECT_EQ(devices[12].local, 0);
}

TEST(Hardware, ClusterFileOverridesLinksAndDefinesNodes) {
  Document doc = parse_document(R"(
name: lab
gpu_types:
  fastgpu: {peak_tflops: {bf16: 100}, memory_gib: 32, memory_GBps: 1000, sm_count: 50, l2_mib: 10}
node_types:
  box: {gpu: fastgpu, gpus: 2, fabric: pcie, intra_GBps: 20, intra_latency_us: 5, network_gbit: 100, network_latency_us: 10}
nodes:
  - {type: box, count: 2}
  - {type: p4d.24xlarge, count: 1}
network:
  links:
    - {between: [box, p4d.24xlarge], gbit: 25, latency_us: 40}
)",
                                "lab.yaml", DocumentFormat::kYaml);
  const ClusterSpec c = parse_cluster(doc);
  EXPECT_EQ(c.num_gpus(), 12);
  EXPECT_DOUBLE_EQ(c.network_GBps("box", "p4d.24xlarge"), 25.0 / 8);
  EXPECT_DOUBLE_EQ(c.network_latency_s("box", "p4d.24xlarge"), 40e-6);
  EXPECT_DOUBLE_EQ(c.network_GBps("box", "box"), 100.0 / 8);
  EXPECT_EQ(c.groups[0].node.gpu.name, "fastgpu");
}

void expect_input_error(const std::string& yaml, const std::string& key_path) {
  Document doc = parse_document(yaml, "c.yaml", DocumentFormat::kYaml);
  try {
    parse_cluster(doc);
    FAIL() << "accepted: " << yaml;
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), key_path) << e.what();
  }
}

TEST(Hardware, BadClustersNameTheKey) {
  expect_input_error("nodes: []\n", "nodes");                                  // no GPUs
  expect_input_error("nodes: [{type: p9.big, count: 1}]\n", "nodes[0].type");  // unknown node
  expect_input_error("nodes: [{type: p4d.24xlarge, count: 0}]\n", "nodes[0].count");
  expect_input_error("nodes: [{type: p4d.24xlarge, count: 1, gpus: 2}]\n", "nodes[0].gpus");
  expect_input_error(
      "nodes: [{type: p4d.24xlarge, count: 1}]\nnetwork: {links: [{between: "
      "[p4d.24xlarge, g4dn.12xlarge], gbit: 1, latency_us: 1}]}\n",
      "network.links[0].between");
  expect_input_error(
      "node_types: {b: {gpu: t4, gpus: -1, fabric: pcie, intra_GBps: 1, "
      "intra_latency_us: 1, network_gbit: 1, network_latency_us: 1}}\nnodes: "
      "[{type: b, count: 1}]\n",
      "node_types.b.gpus");
  // Redefining a preset GPU applied only to nodes of the file's own types, not to the presets'.
  expect_input_error(
      "gpu_types: {t4: {peak_tflops: {bf16: 1000}, memory_gib: 16, memory_GBps: "
      "320, sm_count: 40, l2_mib: 4}}\nnodes: [{type: g4dn.12xlarge, count: 1}]\n",
      "gpu_types.t4");
  // Past any machine built: an error, not hours building 2^31 devices (scripts/fuzz_inputs.py).
  expect_input_error(
      "node_types: {b: {gpu: t4, gpus: 2147483648, fabric: pcie, intra_GBps: 1, "
      "intra_latency_us: 1, network_gbit: 1, network_latency_us: 1}}\nnodes: "
      "[{type: b, count: 1}]\n",
      "node_types.b.gpus");
  expect_input_error(
      "nodes: [{type: p4d.24xlarge, count: 131072}, {type: g4dn.12xlarge, "
      "count: 4}]\n",
      "nodes[1].count");
  try {
    load_cluster("p4d.24xlarge:9223372036854775807");
    ADD_FAILURE() << "a count of 2^63 - 1 was accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(),
                 "--cluster p4d.24xlarge:9223372036854775807: nodes[0].count: expected at most "
                 "1048576 GPUs in the cluster; 9223372036854775807 nodes alone exceed that");
  }
  EXPECT_EQ(load_cluster("p4d.24xlarge:131072").num_gpus(), int64_t{1} << 20);
  EXPECT_THROW(load_cluster("p4d.24xlarge:0"), InputError);
  EXPECT_THROW(load_cluster("p4d.24xlarge:x"), InputError);
  EXPECT_THROW(load_cluster("dgx-z:2"), InputError);
}

TEST(Topology, CommGroupsSeeNodesAndLinks) {
  const ClusterSpec c = load_cluster("p4d.24xlarge:2");
  const auto devices = cluster_devices(c);
  const CommGroup inside = make_comm_group(c, devices, {0, 1, 2, 3});
  EXPECT_EQ(inside.nodes, 1);
  EXPECT_EQ(inside.link(), "nvswitch");
  EXPECT_DOUBLE_EQ(inside.intra_GBps, 300);
  const CommGroup across = make_comm_group(c, devices, {0, 8}, 8);
  EXPECT_EQ(across.nodes, 2);
  EXPECT_EQ(across.per_node, 1);
  EXPECT_EQ(across.sharing, 8);
  EXPECT_DOUBLE_EQ(across.inter_GBps, 50);  // 400 Gbit/s
  const Link l = link_between(c, devices[7], devices[8]);
  EXPECT_FALSE(l.same_node);
  EXPECT_DOUBLE_EQ(l.GBps, 50);
}

// The --json listings carry the tables' figures (they had names and descriptions alone).
TEST(PresetListings, JsonHasTheTablesNumbers) {
  auto r = testing::run_hetplan("clusters --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, Json> by_name;
  for (const Json& j : Json::parse(r.output)) by_name[j["name"].get<std::string>()] = j;
  EXPECT_EQ(by_name.at("t4")["peak_tflops"]["fp16"], 65.0);  // the T4 datasheet's
  EXPECT_EQ(by_name.at("t4")["memory_GBps"], 320.0);
  // What CUDA reports of a T4 with ECC on (presets/gpus/t4.yaml), a whole number of bytes.
  EXPECT_EQ(by_name.at("t4")["memory_bytes"], int64_t{15'843'721'216});
  EXPECT_TRUE(by_name.at("t4")["memory_bytes"].is_number_integer());
  EXPECT_TRUE(by_name.at("t4")["l2_bytes"].is_number_integer());
  EXPECT_EQ(by_name.at("p4d.24xlarge")["gpu"], "a100-40gb");
  EXPECT_EQ(by_name.at("p4d.24xlarge")["gpus"], 8);
  EXPECT_EQ(by_name.at("amp-hetero")["gpus"], 16);
  EXPECT_EQ(by_name.at("amp-hetero")["nodes"][0]["type"], "p3.8xlarge");
  r = testing::run_hetplan("models --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const Json& j : Json::parse(r.output))
    if (j["name"] == "gpt2-medium") {
      EXPECT_EQ(j["hidden"], 1024);
      EXPECT_EQ(j["heads"], 16);
      EXPECT_EQ(j["parameters"], 354823168);
    }
}

}  // namespace
}  // namespace hetplan
