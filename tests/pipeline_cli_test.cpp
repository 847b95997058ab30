// Output test of `hetplan simulate`: the JSON fields of the command-line contract and the exit
// status for bad arguments.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

int run(const std::string& args, const fs::path& out = "/dev/null") {
  const std::string cmd =
      std::string(HETPLAN_BINARY) + " simulate " + args + " > " + out.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class SimulateCli : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("hetplan_simulate_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }
};

TEST_F(SimulateCli, JsonHasTheContractFields) {
  const fs::path json = dir / "r.json", text = dir / "out.txt";
  ASSERT_EQ(run("--schedule 1f1b --stages 4 --microbatches 8 --forward 1 --backward-input 1 "
                "--backward-weight 1 --json " +
                    json.string(),
                text),
            0)
      << slurp(text);
  const auto j = nlohmann::json::parse(slurp(json));
  // 1F1B, p = 4, m = 8, F + B + W = 3: makespan (m + p - 1) * 3, bubble (p-1)/(m+p-1).
  EXPECT_DOUBLE_EQ(j.at("makespan").get<double>(), 33.0);
  EXPECT_NEAR(j.at("bubble_rate").get<double>(), 3.0 / 11.0, 1e-12);
  EXPECT_EQ(j.at("peak_activation"), (nlohmann::json{4, 3, 2, 1}));
  const auto& timeline = j.at("timeline");
  ASSERT_EQ(timeline.size(), 4u);
  for (const auto& device : timeline) {
    ASSERT_EQ(device.size(), 16u);  // 8 forwards and 8 backwards (B+W together for 1f1b)
    for (const auto& pass : device) {
      for (const char* key : {"op", "microbatch", "chunk", "start", "end"})
        EXPECT_TRUE(pass.contains(key)) << key;
      EXPECT_LE(pass.at("start").get<double>(), pass.at("end").get<double>());
    }
  }
  EXPECT_EQ(timeline[0][0].at("op"), "F");
  // The terminal gets a summary and, for a problem this small, the ASCII timeline.
  const std::string out = slurp(text);
  EXPECT_NE(out.find("bubble rate 27.27%"), std::string::npos) << out;
  EXPECT_NE(out.find("d0 |FFFF"), std::string::npos) << out;
}

// --interleaved-order pytorch runs torch.distributed.pipelining's rounds (torchtitan's schedule):
// at m == p the last devices warm up with fewer forwards than Megatron-LM's all-forward case.
TEST_F(SimulateCli, InterleavedInPyTorchsRounds) {
  const fs::path json = dir / "pt.json", text = dir / "pt.txt";
  ASSERT_EQ(run("--schedule interleaved --stages 4 --microbatches 4 --forward 1 "
                "--backward-input 1 --backward-weight 1 --interleaved-order pytorch --json " +
                    json.string(),
                text),
            0)
      << slurp(text);
  const auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j.at("interleaved_order"), "pytorch");
  EXPECT_EQ(j.at("peak_activation"), (nlohmann::json{8, 8, 7, 5}));
  // Another schedule does not take it.
  EXPECT_EQ(run("--schedule 1f1b --stages 4 --microbatches 4 --forward 1 --backward-input 1 "
                "--backward-weight 1 --interleaved-order pytorch",
                text),
            2);
  EXPECT_NE(slurp(text).find("only schedule interleaved takes it"), std::string::npos)
      << slurp(text);
}

// Peak activation bytes are held activations x --activation-bytes, to the nearest whole byte.
TEST_F(SimulateCli, PeakActivationBytesAreWhole) {
  const fs::path json = dir / "b.json", text = dir / "b.txt";
  ASSERT_EQ(run("--schedule 1f1b --stages 4 --microbatches 8 --forward 1 --backward-input 1 "
                "--backward-weight 1 --activation-limit 3 --activation-bytes "
                "1000.5,2000,3000,4000 --json " +
                    json.string(),
                text),
            0)
      << slurp(text);
  const auto j = nlohmann::json::parse(slurp(json));
  // Limit 3: stage 0 holds 3 (3001.5 bytes, rounded half away from zero), stage 1 3, 2 2, 3 1.
  EXPECT_EQ(j.at("peak_activation"), (nlohmann::json{3, 3, 2, 1}));
  EXPECT_EQ(j.at("peak_activation_bytes"), (nlohmann::json{3002, 6000, 6000, 4000}));
  for (const auto& b : j.at("peak_activation_bytes")) EXPECT_TRUE(b.is_number_integer());
}

TEST_F(SimulateCli, JsonToStdoutIsTheJsonAlone) {
  const fs::path text = dir / "out.txt";
  ASSERT_EQ(run("--schedule 1f1b --stages 4 --microbatches 8 --forward 1 --backward-input 1 "
                "--backward-weight 1 --json -",
                text),
            0);
  const auto j = nlohmann::json::parse(slurp(text));  // no summary around it
  EXPECT_DOUBLE_EQ(j.at("makespan").get<double>(), 33.0);
  EXPECT_FALSE(fs::exists("-"));
}

TEST_F(SimulateCli, ActivationLimitShowsInThePeaks) {
  const fs::path json = dir / "v.json";
  ASSERT_EQ(run("--schedule v-zb --stages 4 --microbatches 16 --forward 1 --backward-input 1 "
                "--backward-weight 1 --p2p 0.01 --activation-limit 6 --json " +
                json.string()),
            0);
  const auto j = nlohmann::json::parse(slurp(json));
  for (int peak : j.at("peak_activation")) EXPECT_LE(peak, 6);
  EXPECT_EQ(j.at("activation_limit"), 6);
  EXPECT_EQ(j.at("timeline").size(), 4u);
  EXPECT_EQ(j.at("timeline")[0].size(), 16u * 6);  // two chunks, F, B and W each
}

TEST_F(SimulateCli, BadArgumentsExitTwo) {
  const std::string times = " --forward 1 --backward-input 1 --backward-weight 1";
  const fs::path text = dir / "err.txt";
  EXPECT_EQ(run("--schedule 1f1b --stages 0 --microbatches 8" + times, text), 2);
  EXPECT_NE(slurp(text).find("--stages: expected a number > 0, got 0"), std::string::npos);
  EXPECT_EQ(run("--schedule nope --stages 4 --microbatches 8" + times, text), 2);
  EXPECT_NE(slurp(text).find("unknown schedule 'nope'"), std::string::npos);
  EXPECT_EQ(run("--schedule 1f1b --stages 2 --microbatches 4 --forward 1e308 --backward-input "
                "1e308 --backward-weight 1",
                text),
            2);
  EXPECT_NE(slurp(text).find("the makespan overflows (inf)"), std::string::npos);
  EXPECT_EQ(run("--schedule 1f1b --stages 4 --microbatches 8 --forward -1 --backward-input 1 "
                "--backward-weight 1",
                text),
            2);
  EXPECT_NE(slurp(text).find("not a finite non-negative number"), std::string::npos);
  EXPECT_EQ(run("--schedule v-min --stages 4 --microbatches 8 --activation-limit 1" + times, text),
            2);
  EXPECT_NE(slurp(text).find("below 2"), std::string::npos);
  EXPECT_EQ(run("--schedule 1f1b --stages 4 --microbatches 8 --forward 1", text), 2);
}

// QA: interleaved with --chunks 1 ran as 1f1b and printed "interleaved (1 chunk = 1f1b)"; a
// strategy file with it is exit 2 (search/strategy.cpp), and so is simulate now.
TEST_F(SimulateCli, ChunksAreCheckedAsStrategyFilesAre) {
  const std::string times = " --forward 1 --backward-input 1 --backward-weight 1";
  const fs::path text = dir / "err.txt";
  EXPECT_EQ(run("--schedule interleaved --stages 2 --microbatches 4 --chunks 1" + times, text), 2);
  EXPECT_EQ(slurp(text),
            "hetplan: error: --chunks 1: schedule interleaved runs 2 or more chunks per device "
            "(one chunk is schedule 1f1b)\n");
  EXPECT_EQ(run("--schedule 1f1b --stages 2 --microbatches 4 --chunks 3" + times, text), 2);
  EXPECT_EQ(slurp(text),
            "hetplan: error: --chunks 3: schedule 1f1b runs 1 chunk per device (only interleaved "
            "takes --chunks)\n");
  EXPECT_EQ(run("--schedule v-zb --stages 2 --microbatches 4 --chunks 3" + times, text), 2);
  EXPECT_EQ(slurp(text),
            "hetplan: error: --chunks 3: schedule v-zb runs 2 chunks per device (only interleaved "
            "takes --chunks)\n");
  // The schedule's own count, given or not, runs.
  const fs::path json = dir / "v.json";
  EXPECT_EQ(run("--schedule v-zb --stages 2 --microbatches 4 --chunks 2" + times, text), 0);
  EXPECT_EQ(run("--schedule interleaved --stages 2 --microbatches 4 --chunks 3 --json " +
                json.string() + times),
            0);
  const auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j.at("chunks"), 3);
  EXPECT_EQ(j.at("variant"), "interleaved, 3 chunks");
}

}  // namespace
