// Helix's placement files: the published ones read and written back byte for byte, and hetplan's
// placements written and read back.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "costmodel/errors.h"
#include "serve/helix_import.h"
#include "serve/helix_solution.h"
#include "serve_test_util.h"

namespace hetplan::serve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::kHelix;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ServeHelixSolution, PublishedRoundTrip) {
  // Every published placement, against the topology it was made for and against its own
  // simulator_cluster.ini (which names nodes compute_node_N).
  for (const char* setup : {"single_cluster", "high_heterogeneity"}) {
    const fs::path topology =
        kHelix / "clusters" /
        (std::string(setup) == "single_cluster" ? "cluster24.ini" : "cluster42.ini");
    for (const char* method : {"ilp", "petals", "swarm"}) {
      const fs::path dir = kHelix / "layouts" / (std::string(setup) + "-llama70b") / method;
      const fs::path sol = dir / (std::string(method) + "_sol.ini");
      for (const fs::path& cluster_file : {topology, dir / "simulator_cluster.ini"}) {
        const ServingCluster cluster = read_helix_cluster(cluster_file);
        const Placement placement = read_helix_solution(sol, cluster, 80);
        EXPECT_EQ(placement.used_machines(), cluster.size()) << sol;
        EXPECT_EQ(helix_solution_text(placement, cluster), read_file(sol))
            << sol << " with " << cluster_file;
      }
    }
  }
}

TEST(ServeHelixSolution, WriteThenRead) {
  // A hetplan placement on a hetplan cluster whose machines Helix would not name: written with
  // compute_node_(i + 2), an unused machine as [], and read back the same.
  const ServingProblem p = testing::toy_problem(6, {10, 10, 10, 10}, 4);
  const Placement placement = testing::ranges({{0, 4}, {}, {4, 2}, {2, 4}});
  const std::string text = helix_solution_text(placement, p.cluster);
  EXPECT_EQ(text,
            "[Settings]\noffset=2\n\n[Solution]\ncompute_node_2=[0, 1, 2, 3]\ncompute_node_3=[]\n"
            "compute_node_4=[4, 5]\ncompute_node_5=[2, 3, 4, 5]\n");
  const fs::path file = fs::temp_directory_path() / "hetplan_write_sol.ini";
  write_helix_solution(file, placement, p.cluster);
  EXPECT_EQ(read_file(file), text);
  EXPECT_EQ(read_helix_solution(file, p.cluster, 6), placement);
  fs::remove(file);
}

TEST(ServeHelixSolution, ForeignNodeIsAnError) {
  // compute_node_9 on a cluster of 4 machines: no machine of that index.
  const ServingProblem p = testing::toy_problem(6, {10, 10, 10, 10}, 4);
  const fs::path file = fs::temp_directory_path() / "hetplan_foreign_sol.ini";
  std::ofstream(file) << "[Settings]\noffset=2\n\n[Solution]\ncompute_node_9=[0, 1]\n";
  try {
    read_helix_solution(file, p.cluster, 6);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("compute_node_9"));
  }
  fs::remove(file);
}

}  // namespace
}  // namespace hetplan::serve
