// `hetplan serve`: the JSON contract, evaluating Helix's placement, a short search, bad input.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "serve_test_util.h"

namespace hetplan::serve {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::kHelix;

struct CliRun {
  int status = 0;
  std::string output;
};

CliRun run(const std::string& args) {
  // One log per test: ctest runs the tests in parallel processes.
  const fs::path log =
      fs::temp_directory_path() /
      ("hetplan_serve_cli_" +
       std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".log");
  const std::string cmd =
      std::string(HETPLAN_BINARY) + " serve " + args + " > " + log.string() + " 2>&1";
  const int raw = std::system(cmd.c_str());
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, ss.str()};
}

std::string common_args(const std::string& cluster) {
  return "--model llama2-70b --cluster " + (kHelix / cluster).string() + " --profiles " +
         (kHelix / "profiles/llama2_70b").string();
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(ServeCli, EvaluatesHelixPlacementWithJsonContract) {
  const fs::path out = fs::temp_directory_path() / "hetplan_serve_ilp.json";
  const CliRun r = run(common_args("clusters/cluster24.ini") + " --placement " +
                       (kHelix / "layouts/single_cluster-llama70b/ilp/ilp_sol.ini").string() +
                       " --requests 40 --json " + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("ilp_sol: max flow 1104.4 tokens/s"));
  const auto j = read_json(out);
  EXPECT_NEAR(j["max_flow_tokens_per_s"].get<double>(), 1104.35, 0.01);  // see serve_search_test
  ASSERT_EQ(j["placement"].size(), 24u);
  EXPECT_EQ(j["placement"][0]["machine"], "ComputeNode-0");
  EXPECT_EQ(j["placement"][0]["layers"], nlohmann::json({7, 10}));  // compute_node_2=[7..10]
  EXPECT_FALSE(j["routing"].empty());
  double from_source = 0;
  for (const auto& e : j["routing"])
    if (e["from"] == "source") from_source += e["flow_tokens_per_s"].get<double>();
  EXPECT_NEAR(from_source, 1104.35, 0.01);
  ASSERT_EQ(j["baselines"].size(), 3u);
  EXPECT_EQ(j["baselines"][0]["name"], "petals");
  EXPECT_EQ(j["simulation"]["completed"], 40);
  EXPECT_GT(j["simulation"]["prompt_latency_s"]["mean"].get<double>(), 0);
  EXPECT_FALSE(j.contains("search"));
}

TEST(ServeCli, ShortSearchBeatsHelixIlpAndItsOutputIsAPlacementFile) {
  const fs::path out = fs::temp_directory_path() / "hetplan_serve_search.json";
  const CliRun r =
      run(common_args("clusters/cluster24.ini") +
          " --time-limit 10 --evaluations 1000 --requests 20 --quiet --json " + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = read_json(out);
  EXPECT_GE(j["max_flow_tokens_per_s"].get<double>(), 1104.35);
  EXPECT_TRUE(j["valid"].get<bool>());
  EXPECT_TRUE(j.contains("search"));
  // The JSON output can be evaluated again with --placement: same max flow.
  const fs::path again = fs::temp_directory_path() / "hetplan_serve_again.json";
  const CliRun r2 = run(common_args("clusters/cluster24.ini") + " --placement " + out.string() +
                        " --no-simulation --json " + again.string());
  ASSERT_EQ(r2.status, 0) << r2.output;
  EXPECT_DOUBLE_EQ(read_json(again)["max_flow_tokens_per_s"].get<double>(),
                   j["max_flow_tokens_per_s"].get<double>());
}

TEST(ServeCli, BadInputExitsWithStatus2) {
  const fs::path bad = fs::temp_directory_path() / "hetplan_serve_bad" / "cluster.ini";
  fs::create_directories(bad.parent_path());
  fs::copy_file(kHelix / "clusters/machine_profiles.ini",
                bad.parent_path() / "machine_profiles.ini", fs::copy_options::overwrite_existing);
  std::ofstream(bad) << "[NodeNames]\ntotal_compute_nodes=1\n\n[ComputeNode-0]\ntype=H200\n"
                        "connected_nodes=[]\n";
  CliRun r = run("--model llama2-70b --cluster " + bad.string() + " --profiles " +
                 (kHelix / "profiles/llama2_70b").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("[ComputeNode-0] type (line 5): unknown machine type 'H200'"));
  r = run("--model llama2-70b --cluster " + (kHelix / "clusters/cluster24.ini").string() +
          " --profiles /nonexistent-profiles");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("/nonexistent-profiles: expected a directory"));
}

}  // namespace
}  // namespace hetplan::serve
