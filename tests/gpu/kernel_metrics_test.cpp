// hetplan_kernel_metrics on the GPU: the copy probe at 1 GiB must move its 2 GiB through DRAM
// (within 10%: at most the 50 MB L2 of an H100 can hold part of it), at a plausible SM clock and
// with a kernel time close to its event time. Skips without a GPU, without the executable, and
// when the machine restricts hardware counters (the tool's message says so).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/gpu/gpu_test_util.h"

namespace hetplan::gpu_test {
namespace {

// $HETPLAN_KERNEL_METRICS, else beside $HETPLAN_BINARY (the GPU bundle's bin/), else this build's.
std::string kernel_metrics_binary() {
  if (const char* env = std::getenv("HETPLAN_KERNEL_METRICS"); env != nullptr && *env != '\0')
    return env;
  const auto beside =
      std::filesystem::path(hetplan_binary()).parent_path() / "hetplan_kernel_metrics";
  if (std::filesystem::exists(beside)) return beside.string();
  return HETPLAN_KERNEL_METRICS_BINARY;
}

TEST(KernelMetricsTool, CopyProbeMovesItsBytesThroughDram) {
  HETPLAN_REQUIRE_GPU();
  const std::string binary = kernel_metrics_binary();
  if (!std::filesystem::exists(binary)) GTEST_SKIP() << binary << " not built";
  const auto dir = temp_dir("kernel_metrics");
  const auto json_path = dir / "metrics.json";
  // The CUPTI libraries the GPU session chose for it (scripts/gpu_session.sh), if any.
  std::string prefix;
  if (const char* libs = std::getenv("HETPLAN_KERNEL_METRICS_LIBS"); libs != nullptr && *libs)
    prefix = std::string("LD_LIBRARY_PATH=") + libs + ":${LD_LIBRARY_PATH:-} ";
  const auto log = dir / "run.log";
  const std::string cmd = prefix + binary +
                          " --filter copy_probe --shapes last --metrics time,memory --runs 3"
                          " --json " +
                          json_path.string() + " > " + log.string() + " 2>&1";
  const int raw = std::system(cmd.c_str());
  const int status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream log_in(log);
  const std::string output((std::istreambuf_iterator<char>(log_in)),
                           std::istreambuf_iterator<char>());
  ASSERT_TRUE(status == 0 || status == 3) << "exit " << status << "\n" << output;
  std::ifstream in(json_path);
  ASSERT_TRUE(in) << output;
  const nlohmann::json j = nlohmann::json::parse(in);
  if (status == 3) GTEST_SKIP() << j["counters"]["message"].get<std::string>();

  ASSERT_EQ(j["cases"].size(), 1u) << output;
  const auto& c = j["cases"][0];
  ASSERT_EQ(c["status"], "ok") << output;
  ASSERT_EQ(c["launches"].size(), 1u) << output;  // one copy kernel
  const auto& v = c["launches"][0]["values"];
  const double must_move = c["work_bytes"].get<double>();
  ASSERT_DOUBLE_EQ(must_move, 2.0 * 1024 * 1024 * 1024);
  ASSERT_TRUE(v.contains("dram_read_bytes") && v.contains("dram_write_bytes")) << output;
  const double read = v["dram_read_bytes"].get<double>(),
               write = v["dram_write_bytes"].get<double>();
  EXPECT_NEAR(read, must_move / 2, 0.1 * must_move / 2) << output;
  EXPECT_NEAR(write, must_move / 2, 0.1 * must_move / 2) << output;
  EXPECT_NEAR(read + write, must_move, 0.1 * must_move) << output;
  if (v.contains("sm_clock_hz")) {
    EXPECT_GT(v["sm_clock_hz"].get<double>(), 3e8) << output;
    EXPECT_LT(v["sm_clock_hz"].get<double>(), 3.5e9) << output;
  }
  if (v.contains("duration_ns")) {
    const double event_ns = 1e3 * c["event_us_median"].get<double>();
    EXPECT_GT(v["duration_ns"].get<double>(), 0.5 * event_ns) << output;
    EXPECT_LT(v["duration_ns"].get<double>(), 2.0 * event_ns) << output;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hetplan::gpu_test
