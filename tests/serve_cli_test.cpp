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

#include "costmodel/version.h"
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

// The same under hetplan's capacity model (whose numbers serve_search_test pins).
std::string hetplan_args(const std::string& cluster) {
  return common_args(cluster) + " --capacity-model hetplan";
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(ServeCli, EvaluatesHelixPlacementWithJsonContract) {
  const fs::path out = fs::temp_directory_path() / "hetplan_serve_ilp.json";
  const CliRun r = run(hetplan_args("clusters/cluster24.ini") + " --placement " +
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
  EXPECT_EQ(j["context"]["hetplan_version"], version());
  EXPECT_THAT(j["context"]["command"].get<std::string>(),
              HasSubstr("serve --model llama2-70b --cluster"));  // the command as it was given
  // Llama-2-70B's sizes in whole bytes (fp16): a block's weights, K and V of one token in one
  // block (8 KV heads x 128 x 2 x 2 B), one token's hidden state (8192 x 2 B).
  for (const char* key :
       {"layer_weight_bytes", "kv_bytes_per_token_layer", "activation_bytes_per_token"})
    EXPECT_TRUE(j["model"][key].is_number_integer()) << key;
  EXPECT_EQ(j["model"]["kv_bytes_per_token_layer"], 4096);
  EXPECT_EQ(j["model"]["activation_bytes_per_token"], 16384);
}

TEST(ServeCli, ShortSearchBeatsHelixIlpAndItsOutputIsAPlacementFile) {
  const fs::path out = fs::temp_directory_path() / "hetplan_serve_search.json";
  const CliRun r =
      run(hetplan_args("clusters/cluster24.ini") +
          " --time-limit 10 --evaluations 1000 --requests 20 --quiet --json " + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const auto j = read_json(out);
  EXPECT_GE(j["max_flow_tokens_per_s"].get<double>(), 1104.35);
  EXPECT_TRUE(j["valid"].get<bool>());
  EXPECT_TRUE(j.contains("search"));
  // The JSON output can be evaluated again with --placement: same max flow.
  const fs::path again = fs::temp_directory_path() / "hetplan_serve_again.json";
  const CliRun r2 = run(hetplan_args("clusters/cluster24.ini") + " --placement " + out.string() +
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

// A file under a fresh temporary folder for this test.
fs::path temp_file(const std::string& name, const std::string& text) {
  const fs::path dir =
      fs::temp_directory_path() /
      ("hetplan_serve_cli_" +
       std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  fs::create_directories(dir);
  std::ofstream(dir / name) << text;
  return dir / name;
}

std::string profiles_arg() { return " --profiles " + (kHelix / "profiles/llama2_70b").string(); }

TEST(ServeCli, ClusterThatCannotHoldTheModelIsExit2) {
  // QA's t4_19.yaml printed max flow 0 with "upper bound 1039.6"; tinykv.yaml (KV cache for one
  // request only up to 7 layers per T4) had a max flow of 70.6 while the simulation rejected all.
  const std::string t4 =
      "machine_types:\n  T4: {gpu: T4, vram_GB: {}, nic_GBps: 10}\nmachines:\n"
      "  - {name: t, type: T4, count: {}}\nlinks:\n  default: "
      "{bandwidth_GBps: 1.0, latency_ms: 1}\n";
  auto cluster = [&](const std::string& vram, const std::string& count) {
    std::string text = t4;
    text.replace(text.find("{}"), 2, vram);
    text.replace(text.find("{}"), 2, count);
    return temp_file("c" + count + ".yaml", text).string();
  };
  CliRun r = run("--model llama2-70b --cluster " + cluster("16", "19") + profiles_arg());
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("c19.yaml: cannot serve llama2-70b: the cluster's machines "
                                  "hold at most 76 of the model's 80 layers (19 x T4: 4 layers "
                                  "each;"));
  // hetplan's memory model (Helix's tables hold a T4 to 4 layers whatever its VRAM).
  r = run("--model llama2-70b --cluster " + cluster("17.12", "10") + profiles_arg() +
          " --kv-reserve 0 --capacity-model hetplan");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("hold at most 70 of the model's 80 layers (10 x T4: 7 layers "
                                  "each (with 8 its KV cache would hold 169 tokens per layer, "
                                  "less than one request of 990)"));
}

TEST(ServeCli, GivenPlacementLeavingLayersUnheldIsInvalid) {
  // QA's pl/j_partial.json and j_emptylist.json reported valid: true, errors: [].
  const fs::path out = fs::temp_directory_path() / "hetplan_serve_partial.json";
  const fs::path placement = temp_file(
      "partial.json", R"({"placement": [{"machine": "ComputeNode-6", "layers": [0, 11]}]})");
  const CliRun r = run(common_args("clusters/cluster24.ini") + " --placement " +
                       placement.string() + " --no-simulation --json " + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("invalid: layers 12..79 are held by no machine"));
  EXPECT_THAT(r.output, HasSubstr("no flow: layers 12..79 held by no machine with capacity"));
  const auto j = read_json(out);
  EXPECT_FALSE(j["valid"].get<bool>());
  EXPECT_EQ(j["errors"], nlohmann::json({"layers 12..79 are held by no machine"}));
  EXPECT_EQ(j["no_flow_reason"], "layers 12..79 held by no machine with capacity");
}

TEST(ServeCli, InconsistentOptionsAndInputsAreExit2BeforeTheSearch) {
  const std::string c24 = common_args("clusters/cluster24.ini") + " --time-limit 1 --no-simulation";
  // LLaMA-1 30B's profile folder for LLaMA-2 70B (QA: silently used).
  CliRun r = run("--model llama2-70b --cluster " + (kHelix / "clusters/cluster24.ini").string() +
                 " --profiles " + (kHelix / "profiles/llama1_30b").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("llama1_30b: the folder holds Helix's per-layer times of "
                                  "llama1-30b (60 layers of 1.07 GB), but --model llama2-70b has "
                                  "80 layers of 1.71 GB"));
  // Requests longer than the model's context (QA: a 60000-token prompt raised the capacity).
  r = run(c24 + " --prompt-tokens 60000");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("--prompt-tokens 60000 + --output-tokens 240 = 60240 tokens: "
                                  "expected at most llama2-70b's context of 4096 tokens"));
  r = run(c24 + " --output-tokens 1e308");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("expected at most llama2-70b's context of 4096 tokens"));
  // --seed -1 (QA: accepted).
  r = run(c24 + " --seed -1");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("--seed: expected a number >= 0, got -1"));
  // --json into a folder that does not exist: refused before the search, not after it.
  r = run(c24 + " --json /nonexistent-hetplan-folder/x.json");
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("--json /nonexistent-hetplan-folder/x.json: no folder "
                                  "/nonexistent-hetplan-folder; create it first"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("max flow")));
  // --machine-profiles with a YAML cluster (QA: read the YAML as INI).
  const fs::path yaml =
      temp_file("one.yaml",
                "machine_types:\n  A100: {gpu: a100-40gb}\nmachines:\n  - "
                "{name: a, type: A100}\nlinks:\n  default: {bandwidth_GBps: 1}\n");
  r = run("--model llama2-70b --cluster " + yaml.string() + " --machine-profiles " +
          (kHelix / "clusters/machine_profiles.ini").string() + profiles_arg());
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("one.yaml: --machine-profiles applies only to Helix cluster "
                                  "topologies"));
  // A placement whose machine types are not the cluster's (QA's pl/j_typemismatch.json).
  const fs::path typed = temp_file(
      "typed.json",
      R"({"placement": [{"machine": "ComputeNode-0", "machine_type": "T4", "layers": [0, 3]}]})");
  r = run(common_args("clusters/cluster24.ini") + " --placement " + typed.string());
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("typed.json: placement[0].machine_type: the placement says T4 "
                                  "for 'ComputeNode-0', but"));
  EXPECT_THAT(r.output, HasSubstr("cluster24.ini makes it L4"));
  // Unused machines as `serve --json` writes them (machine_type, layers null) are read back.
  const fs::path unused = temp_file(
      "unused.json", R"({"placement": [{"machine": "ComputeNode-1", "machine_type": "T4", )"
                     R"("layers": null}, {"machine": "ComputeNode-0", "layers": [0, 3]}]})");
  r = run(common_args("clusters/cluster24.ini") + " --placement " + unused.string() +
          " --no-simulation");
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST(ServeCli, NoMilpLeavesTheBoundOut) {
  // QA: --no-milp reported "MILP LP bound 0.0" and milp_lp_bound_tokens_per_s 0.0.
  const fs::path out = fs::temp_directory_path() / "hetplan_serve_nomilp.json";
  const CliRun r = run(common_args("clusters/cluster24.ini") +
                       " --time-limit 1 --evaluations 200 --no-milp --no-simulation --quiet "
                       "--json " +
                       out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("MILP LP bound")));
  EXPECT_TRUE(read_json(out)["search"]["milp_lp_bound_tokens_per_s"].is_null());
}

TEST(ServeCli, WritesHelixSolutionFiles) {
  // --write-sol writes the placement evaluated, byte for byte as Helix's own file...
  const fs::path helix_sol = kHelix / "layouts/single_cluster-llama70b/ilp/ilp_sol.ini";
  const fs::path sol = fs::temp_directory_path() / "hetplan_serve_written_sol.ini";
  CliRun r = run(common_args("clusters/cluster24.ini") + " --placement " + helix_sol.string() +
                 " --no-simulation --quiet --write-sol " + sol.string());
  ASSERT_EQ(r.status, 0) << r.output;
  auto text = [](const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  EXPECT_EQ(text(sol), text(helix_sol));
  // ... and a searched placement, which --placement reads back at the same max flow.
  const fs::path out = fs::temp_directory_path() / "hetplan_serve_written.json";
  r = run(common_args("clusters/cluster24.ini") +
          " --time-limit 2 --evaluations 300 --no-simulation --quiet --json " + out.string() +
          " --write-sol " + sol.string());
  ASSERT_EQ(r.status, 0) << r.output;
  const fs::path again = fs::temp_directory_path() / "hetplan_serve_written_again.json";
  r = run(common_args("clusters/cluster24.ini") + " --placement " + sol.string() +
          " --no-simulation --quiet --json " + again.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_DOUBLE_EQ(read_json(again)["max_flow_tokens_per_s"].get<double>(),
                   read_json(out)["max_flow_tokens_per_s"].get<double>());
  EXPECT_EQ(read_json(again)["placement"], read_json(out)["placement"]);
}

TEST(ServeCli, CapacityModels) {
  // Helix's published MILP placement: Helix's recorded objective under Helix's model (the
  // default), 1104.35 under hetplan's (serve_search_test).
  const std::string placement =
      " --placement " + (kHelix / "layouts/single_cluster-llama70b/ilp/ilp_sol.ini").string() +
      " --no-simulation --quiet --json ";
  const fs::path out = fs::temp_directory_path() / "hetplan_serve_models.json";
  CliRun r = run(common_args("clusters/cluster24.ini") + placement + out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NEAR(read_json(out)["max_flow_tokens_per_s"].get<double>(), 1289.556, 2e-3);
  EXPECT_EQ(read_json(out)["capacity_model"]["name"], "helix");
  r = run(common_args("clusters/cluster24.ini") + " --capacity-model hetplan" + placement +
          out.string());
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NEAR(read_json(out)["max_flow_tokens_per_s"].get<double>(), 1104.35, 0.01);
  r = run(common_args("clusters/cluster24.ini") + " --capacity-model vllm" + placement +
          out.string());
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("--capacity-model"));
}

TEST(ServeCli, HelixTraceNeedsBothFiles) {
  const CliRun r = run(common_args("clusters/cluster24.ini") + " --time-limit 1 --trace-lengths " +
                       (kHelix / "traces/azure_conv_lengths.csv").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.output, HasSubstr("--trace-lengths without --trace-arrivals"));
}

}  // namespace
}  // namespace hetplan::serve
