// Helix INI files: every file kind, the units trap, and clear errors for bad files.
#include <filesystem>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "costmodel/errors.h"
#include "serve/helix_import.h"
#include "serve/helix_solution.h"
#include "serve/ini_file.h"
#include "serve/serving_cluster.h"

namespace hetplan::serve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path kHelix = fs::path(HETPLAN_EXTERNAL_DATA) / "helix";

double value_of(const std::string& text, HelixQuantity kind) {
  const IniFile ini = IniFile::parse("[S]\nx = " + text + "\n", "test.ini");
  return IniSectionReader(ini, "S").quantity("x", kind);
}

TEST(ServeIni, UnitsTrapMbpsAndGbpsAreBytesPerSecond) {
  // Helix's README: "12.5 mbps" means 100 Mbit/s = 12.5e6 bytes/s; "1.25 gbps" means 10 Gbit/s.
  EXPECT_DOUBLE_EQ(value_of("12.5 * mbps", HelixQuantity::kBandwidth), 12.5e6);
  EXPECT_DOUBLE_EQ(value_of("12.5 * mbps", HelixQuantity::kBandwidth) * 8, 100e6);  // bits/s
  EXPECT_DOUBLE_EQ(value_of("1.25 * gbps", HelixQuantity::kBandwidth) * 8, 10e9);
  EXPECT_DOUBLE_EQ(value_of("1000000.0 * kbps", HelixQuantity::kBandwidth), 1e9);
  EXPECT_DOUBLE_EQ(value_of("16 * GB", HelixQuantity::kBytes), 16e9);
  EXPECT_DOUBLE_EQ(value_of("24000.0 * MB", HelixQuantity::kBytes), 24e9);
  EXPECT_DOUBLE_EQ(value_of("1 * MilliSec", HelixQuantity::kSeconds), 1e-3);
  EXPECT_DOUBLE_EQ(value_of("-1", HelixQuantity::kBandwidth), -1);  // Helix: unlimited
}

TEST(ServeIni, MachineProfiles) {
  const auto profiles = read_helix_machine_profiles(kHelix / "clusters/machine_profiles.ini");
  ASSERT_EQ(profiles.size(), 9u);  // SourceNode, SinkNode and 7 machine types
  EXPECT_DOUBLE_EQ(profiles.at("T4x4").vram_bytes, 64e9);
  EXPECT_DOUBLE_EQ(profiles.at("A100").nic_in_GBps, 10);       // "10 * gbps": 1e10 B/s
  EXPECT_DOUBLE_EQ(profiles.at("SourceNode").nic_in_GBps, 0);  // -1: unlimited
}

TEST(ServeIni, Cluster24) {
  const ServingCluster c = read_helix_cluster(kHelix / "clusters/cluster24.ini");
  ASSERT_EQ(c.size(), 24);
  int a100 = 0, l4 = 0, t4 = 0;
  for (const auto& m : c.machines()) {
    a100 += m.machine_type == "A100";
    l4 += m.machine_type == "L4";
    t4 += m.machine_type == "T4";
  }
  EXPECT_EQ(a100, 4);  // the file's header: {'A100': 4, 'T4': 12, 'L4': 8}
  EXPECT_EQ(l4, 8);
  EXPECT_EQ(t4, 12);
  EXPECT_EQ(c.machines()[0].name, "ComputeNode-0");
  EXPECT_EQ(c.machines()[0].machine_type, "L4");
  EXPECT_DOUBLE_EQ(c.machines()[0].vram_bytes, 24e9);
  EXPECT_DOUBLE_EQ(c.machines()[0].nic_in_GBps, 10);
  // [Link-0-1] bandwidth=1000 * mbps, latency=1 * MilliSec; usable both ways.
  ASSERT_TRUE(c.link(0, 1));
  EXPECT_DOUBLE_EQ(c.link(0, 1)->bandwidth_GBps, 1);
  EXPECT_DOUBLE_EQ(c.link(1, 0)->latency_s, 1e-3);
  EXPECT_TRUE(c.link(kSource, 23));
  EXPECT_TRUE(c.link(23, kSink));
  EXPECT_FALSE(c.link(kSink, 23));
  EXPECT_DOUBLE_EQ(c.source_nic_GBps, 10);
}

TEST(ServeIni, GeoDistributedClusterKeepsSlowLinks) {
  const ServingCluster c = read_helix_cluster(kHelix / "clusters/3cluster24.ini");
  // [Link-0-4] bandwidth=11.2 * mbps (a cross-region link: 89.6 Mbit/s), latency=54 * MilliSec.
  EXPECT_DOUBLE_EQ(c.link(4, 0)->bandwidth_GBps, 11.2e-3);
  EXPECT_DOUBLE_EQ(c.link(0, 4)->latency_s, 0.054);
  EXPECT_DOUBLE_EQ(c.link(4, 5)->bandwidth_GBps, 1.208);
}

TEST(ServeIni, Cluster42MultiGpuMachines) {
  const ServingCluster c = read_helix_cluster(kHelix / "clusters/cluster42.ini");
  ASSERT_EQ(c.size(), 42);
  const Machine& m = c.machines()[1];  // [ComputeNode-1] type=L4x2
  EXPECT_EQ(m.machine_type, "L4x2");
  EXPECT_EQ(m.gpu_type, "L4");
  EXPECT_EQ(m.gpus, 2);
  EXPECT_DOUBLE_EQ(m.vram_bytes, 48e9);
}

TEST(ServeIni, PrunedClusterFindsMachineProfilesAbove) {
  const ServingCluster c =
      read_helix_cluster(kHelix / "layouts/high_heterogeneity-llama70b/ilp/pruned_cluster.ini");
  ASSERT_EQ(c.size(), 42);
  int from_source = 0;
  for (int i = 0; i < c.size(); ++i) from_source += c.link(kSource, i).has_value();
  EXPECT_EQ(from_source, 12);  // [SourceNode] connected_nodes=[30, ..., 41]
  EXPECT_TRUE(c.link(kSource, 30));
  EXPECT_FALSE(c.link(kSource, 0));
}

TEST(ServeIni, SimulatorCluster) {
  const ServingCluster c =
      read_helix_cluster(kHelix / "layouts/single_cluster-llama70b/ilp/simulator_cluster.ini");
  ASSERT_EQ(c.size(), 24);
  const int n17 = c.find("compute_node_17");
  const int n16 = c.find("compute_node_16");
  ASSERT_GE(n17, 0);
  EXPECT_EQ(c.machines()[n17].machine_type, "T4");
  EXPECT_DOUBLE_EQ(c.machines()[n17].vram_bytes, 16e9);  // "16000.0 * MB"
  // Only the links listed in [Links] exist, in the listed direction.
  EXPECT_TRUE(c.link(kSource, n17));  // link_source_compute_node_17
  EXPECT_TRUE(c.link(n17, n16));      // link_compute_node_17_compute_node_16
  EXPECT_FALSE(c.link(n16, n17));
  EXPECT_DOUBLE_EQ(c.link(n17, n16)->bandwidth_GBps, 1);
}

TEST(ServeIni, HelixSolution) {
  const ServingCluster c = read_helix_cluster(kHelix / "clusters/cluster24.ini");
  const Placement p =
      read_helix_solution(kHelix / "layouts/single_cluster-llama70b/ilp/ilp_sol.ini", c, 80);
  ASSERT_EQ(p.ranges.size(), 24u);
  EXPECT_EQ(p.used_machines(), 24);
  // offset=2: compute_node_2=[7, 8, 9, 10] is ComputeNode-0.
  EXPECT_EQ(p.ranges[0], (LayerRange{7, 4}));
  EXPECT_EQ(p.ranges[6], (LayerRange{68, 9}));  // compute_node_8 (A100)
  // The same placement against its simulator cluster (names match directly).
  const ServingCluster sim =
      read_helix_cluster(kHelix / "layouts/single_cluster-llama70b/ilp/simulator_cluster.ini");
  const Placement q =
      read_helix_solution(kHelix / "layouts/single_cluster-llama70b/ilp/ilp_sol.ini", sim, 80);
  EXPECT_EQ(q.ranges[sim.find("compute_node_2")], (LayerRange{7, 4}));
}

// Writes `text` to a temporary file of this test's own folder (ctest runs tests in parallel
// processes) and returns its path.
fs::path write_temp(const std::string& name, const std::string& text) {
  const fs::path dir =
      fs::temp_directory_path() /
      ("hetplan_serve_ini_test_" +
       std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  fs::create_directories(dir);
  std::ofstream(dir / name) << text;
  return dir / name;
}

const char* kProfiles =
    "[SourceNode]\ninbound_nic_speed = -1\noutbound_nic_speed = 10 * gbps\ndisk_speed = -1\n"
    "vram_size = -1\n\n"
    "[T4]\ninbound_nic_speed = 10 * gbps\noutbound_nic_speed = 10 * gbps\n"
    "disk_speed = 1 * gbps\nvram_size = 16 * GB\n";

std::string error_of(const std::string& cluster_text) {
  const fs::path profiles = write_temp("machine_profiles.ini", kProfiles);
  const fs::path cluster = write_temp("bad_cluster.ini", cluster_text);
  try {
    read_helix_cluster(cluster, profiles);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

const char* kGoodHead =
    "[NodeNames]\ntotal_compute_nodes=2\n\n"
    "[ComputeNode-0]\ntype=T4\nconnected_nodes=[1]\n\n"
    "[ComputeNode-1]\ntype=T4\nconnected_nodes=[0]\n\n";

TEST(ServeIni, GoodSmallFileParses) {
  const fs::path profiles = write_temp("machine_profiles.ini", kProfiles);
  const fs::path cluster =
      write_temp("good.ini", std::string(kGoodHead) +
                                 "[Link-0-1]\nbandwidth=12.5 * mbps\nlatency=50 * MilliSec\n");
  const ServingCluster c = read_helix_cluster(cluster, profiles);
  EXPECT_DOUBLE_EQ(c.link(1, 0)->bandwidth_GBps, 12.5e-3);
}

TEST(ServeIni, MissingSectionNamesIt) {
  const std::string e = error_of(
      "[NodeNames]\ntotal_compute_nodes=2\n\n"
      "[ComputeNode-0]\ntype=T4\nconnected_nodes=[]\n");
  EXPECT_THAT(e, HasSubstr("bad_cluster.ini"));
  EXPECT_THAT(e, HasSubstr("[ComputeNode-1]"));
  EXPECT_THAT(e, HasSubstr("missing section"));
}

TEST(ServeIni, MissingKeyNamesSectionAndLine) {
  const std::string e = error_of(std::string(kGoodHead) + "[Link-0-1]\nbandwidth=1000 * mbps\n");
  EXPECT_THAT(e, HasSubstr("[Link-0-1] (line 12)"));
  EXPECT_THAT(e, HasSubstr("missing key 'latency'"));
}

TEST(ServeIni, BadNumberNamesKeyAndLine) {
  const std::string e = error_of(std::string(kGoodHead) +
                                 "[Link-0-1]\nbandwidth=fast * mbps\nlatency=1 * MilliSec\n");
  EXPECT_THAT(e, HasSubstr("[Link-0-1] bandwidth (line 13)"));
  EXPECT_THAT(e, HasSubstr("expected a bandwidth such as '1000 * mbps'"));
}

TEST(ServeIni, WrongUnitIsRejected) {
  const std::string e =
      error_of(std::string(kGoodHead) + "[Link-0-1]\nbandwidth=1 * GB\nlatency=1 * MilliSec\n");
  EXPECT_THAT(e, HasSubstr("found the unit 'GB'"));
}

TEST(ServeIni, UnknownMachineTypeListsKnownOnes) {
  const std::string e = error_of(
      "[NodeNames]\ntotal_compute_nodes=1\n\n"
      "[ComputeNode-0]\ntype=H200\nconnected_nodes=[]\n");
  EXPECT_THAT(e, HasSubstr("[ComputeNode-0] type (line 5)"));
  EXPECT_THAT(e, HasSubstr("unknown machine type 'H200'"));
  EXPECT_THAT(e, HasSubstr("defines: T4"));
}

TEST(ServeIni, UnknownKeyAndMalformedLines) {
  EXPECT_THAT(error_of(std::string(kGoodHead) +
                       "[Link-0-1]\nbandwith=1 * mbps\nbandwidth=1 * mbps\nlatency=1 * MilliSec\n"),
              HasSubstr("[Link-0-1] bandwith (line 13): unknown key"));
  EXPECT_THAT(error_of("[NodeNames]\ntotal_compute_nodes 2\n"),
              HasSubstr("line 2: expected 'key = value'"));
  EXPECT_THAT(error_of("[NodeNames]\ntotal_compute_nodes=two\n"),
              HasSubstr("expected a whole number, found 'two'"));
  EXPECT_THAT(error_of(std::string(kGoodHead) + "[Link-0-7]\nbandwidth=1 * mbps\nlatency=0\n"),
              HasSubstr("expected a link name"));
}

TEST(ServeIni, ConnectedNodesNeedTheirLinks) {
  // QA's cl/missing_14_15.ini: ComputeNode-14 lists 15 but [Link-14-15] was deleted; the missing
  // link went unnoticed. Either direction of a link between machines serves.
  EXPECT_THAT(error_of(std::string(kGoodHead)),
              HasSubstr("bad_cluster.ini: [ComputeNode-0] connected_nodes (line 6): lists 1, but "
                        "the file has no [Link-0-1] section (nor [Link-1-0])"));
  EXPECT_EQ(error_of(std::string(kGoodHead) + "[Link-1-0]\nbandwidth=1 * mbps\nlatency=0\n"),
            "no error");
  EXPECT_THAT(error_of("[NodeNames]\ntotal_compute_nodes=1\n\n[SourceNode]\nconnected_nodes=[0]\n"
                       "\n[ComputeNode-0]\ntype=T4\n"),
              HasSubstr("[SourceNode] connected_nodes (line 5): lists 0, but the file has no "
                        "[Link-source-0] section"));
  // A node listing itself: said so (QA: "expected node numbers 0..0, found 0" read as a
  // contradiction); a node past the last one keeps the range message.
  EXPECT_THAT(error_of("[NodeNames]\ntotal_compute_nodes=1\n\n[ComputeNode-0]\ntype=T4\n"
                       "connected_nodes=[0]\n"),
              HasSubstr("[ComputeNode-0] connected_nodes (line 6): lists 0, the node itself: "
                        "expected the other nodes it links to"));
  EXPECT_THAT(error_of("[NodeNames]\ntotal_compute_nodes=1\n\n[ComputeNode-0]\ntype=T4\n"
                       "connected_nodes=[1]\n"),
              HasSubstr("expected node numbers 0..0 (or 'source', 'sink' for a compute node), "
                        "found 1"));
  // A neighbour listed twice (QA: accepted; likely a typo for another node).
  EXPECT_THAT(error_of("[NodeNames]\ntotal_compute_nodes=2\n\n[ComputeNode-0]\ntype=T4\n"
                       "connected_nodes=[1, 1]\n\n[ComputeNode-1]\ntype=T4\n\n[Link-0-1]\n"
                       "bandwidth=1 * mbps\nlatency=0\n"),
              HasSubstr("[ComputeNode-0] connected_nodes (line 6): lists 1 twice: expected each "
                        "neighbour once"));
}

TEST(ServeIni, ByteOrderMarkIsSkipped) {
  const IniFile ini = IniFile::parse(
      "\xEF\xBB\xBF"
      "[NodeNames]\nx = 1\n",
      "bom.ini");
  EXPECT_TRUE(ini.has_section("NodeNames"));
}

TEST(ServeIni, SimulatorClusterNamesListedTwice) {
  // QA's cl/sim_dupname.ini named compute_node_2 twice and was reported as an unknown node in
  // a link section far below.
  const fs::path sim = kHelix / "layouts/single_cluster-llama70b/ilp/simulator_cluster.ini";
  std::ifstream in(sim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string first = "'compute_node_2', 'compute_node_3'";
  text.replace(text.find(first), first.size(), "'compute_node_2', 'compute_node_2'");
  try {
    read_helix_cluster(write_temp("dup_simulator_cluster.ini", text));
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("dup_simulator_cluster.ini: [ComputeNodes] names (line 11): "
                                    "lists 'compute_node_2' twice (items 1 and 2)"));
  }
}

TEST(ServeIni, MachineCountIsCapped) {
  // QA: total_compute_nodes or a count of 1e8 hung, 30000 machines took 24 GB for the link table.
  // Refused before any machine is made, naming the cap and why.
  EXPECT_THAT(error_of("[NodeNames]\ntotal_compute_nodes=100000000\n"),
              HasSubstr("[NodeNames] total_compute_nodes (line 2): 100000000 machines: hetplan "
                        "serve takes at most 2048 (the flow graph of a fully linked cluster has "
                        "an edge per pair of machines"));
}

TEST(ServeIni, BadSolutionFiles) {
  const ServingCluster c = read_helix_cluster(kHelix / "clusters/cluster24.ini");
  auto error = [&](const std::string& text) -> std::string {
    try {
      read_helix_solution(write_temp("bad_sol.ini", text), c, 80);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THAT(error("[Settings]\noffset=2\n\n[Solution]\ncompute_node_2=[1, 2, 4]\n"),
              HasSubstr("expected consecutive layers"));
  EXPECT_THAT(error("[Settings]\noffset=2\n\n[Solution]\ncompute_node_99=[1]\n"),
              HasSubstr("no machine of this name"));
  EXPECT_THAT(error("[Settings]\noffset=2\n\n[Solution]\ncompute_node_2=[80]\n"),
              HasSubstr("expected layer numbers 0..79"));
  EXPECT_THAT(error("[Solution]\ncompute_node_2=[1]\n"), HasSubstr("[Settings]: missing section"));
}

TEST(ServeIni, PlacementIsNotACluster) {
  try {
    read_helix_cluster(kHelix / "layouts/single_cluster-llama70b/ilp/ilp_sol.ini");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("pass it with --placement"));
  }
}

}  // namespace
}  // namespace hetplan::serve

namespace hetplan::serve {
namespace {

TEST(ServeClusterFile, ReadsMachinesTypesAndLinks) {
  const ServingCluster c =
      load_serving_cluster(std::filesystem::path(HETPLAN_TEST_DATA) / "serve_cluster.yaml");
  ASSERT_EQ(c.size(), 5);
  EXPECT_EQ(c.machines()[0].name, "a100-0");
  EXPECT_EQ(c.machines()[4].name, "t4pair-2");
  EXPECT_EQ(c.machines()[4].gpus, 2);
  EXPECT_DOUBLE_EQ(c.machines()[4].vram_bytes, 32e9);
  EXPECT_DOUBLE_EQ(c.machines()[4].nic_out_GBps, 5);
  // No vram_GB: 1 x the a100-40gb preset's memory.
  EXPECT_GT(c.machines()[0].vram_bytes, 39e9);
  EXPECT_LT(c.machines()[0].vram_bytes, 44e9);
  EXPECT_DOUBLE_EQ(c.link(1, 2)->bandwidth_GBps, 1);
  EXPECT_DOUBLE_EQ(c.link(kSource, 3)->latency_s, 0.002);
  EXPECT_DOUBLE_EQ(c.link(4, 0)->bandwidth_GBps, 12.5e-3);  // the pair, both ways
  EXPECT_DOUBLE_EQ(c.link(0, 4)->latency_s, 0.05);
  EXPECT_DOUBLE_EQ(c.source_nic_GBps, 10);
}

TEST(ServeClusterFile, CountsAreCappedBeforeMachinesAreMade) {
  const fs::path path = fs::temp_directory_path() / "hetplan_serve_huge_count.yaml";
  std::ofstream(path) << "machine_types:\n  A100: {gpu: a100-40gb, nic_GBps: 10}\nmachines:\n"
                         "  - {name: a, type: A100, count: 2000}\n"
                         "  - {name: b, type: A100, count: 100000000}\n"
                         "links:\n  default: {bandwidth_GBps: 1.0, latency_ms: 1}\n";
  try {
    load_serving_cluster(path);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("machines[1].count: the cluster would have 100002000 "
                                    "machines: hetplan serve takes at most 2048"));
  }
}

TEST(ServeClusterFile, ErrorsNameTheKey) {
  const auto dir = std::filesystem::temp_directory_path() / "hetplan_serve_cluster_file";
  std::filesystem::create_directories(dir);
  auto error = [&](const std::string& text) -> std::string {
    std::ofstream(dir / "c.yaml") << text;
    try {
      read_cluster_file(dir / "c.yaml");
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  const std::string types = "machine_types:\n  A: {vram_GB: 16}\n";
  EXPECT_THAT(error(types + "machines:\n  - {type: B}\nlinks:\n  default: {bandwidth_GBps: 1}\n"),
              HasSubstr("unknown machine type 'B'"));
  EXPECT_THAT(error(types + "machines:\n  - {type: A}\nlinks: {}\n"),
              HasSubstr("links.clients: missing"));
  EXPECT_THAT(error(types + "machines:\n  - {type: A, cuont: 2}\nlinks:\n  default: "
                            "{bandwidth_GBps: 1}\n"),
              HasSubstr("cuont"));
  EXPECT_THAT(error("machine_types:\n  A: {}\nmachines:\n  - {type: A}\nlinks:\n  default: "
                    "{bandwidth_GBps: 1}\n"),
              HasSubstr("vram_GB"));
  // QA's y/unknown_key.yaml: the list of known keys left out vram_GB.
  EXPECT_THAT(error("machine_types:\n  A: {gpu: a100-40gb, vram_gb: 80}\nmachines:\n  - {type: A}"
                    "\nlinks:\n  default: {bandwidth_GBps: 1}\n"),
              HasSubstr("c.yaml: machine_types.A.vram_gb: unknown key (known keys here: gpu, "
                        "gpus, nic_GBps, nic_in_GBps, nic_out_GBps, vram_GB)"));
  // QA's y/unknown_gpu.yaml: the GPU preset's error named no file or key.
  EXPECT_THAT(error("machine_types:\n  X: {gpu: h900}\nmachines:\n  - {type: X}\nlinks:\n  "
                    "default: {bandwidth_GBps: 1}\n"),
              HasSubstr("c.yaml: machine_types.X.gpu: unknown GPU type \"h900\""));
}

}  // namespace
}  // namespace hetplan::serve
