// hetplan measure and hetplan model-info without a GPU: the error paths, the dry run, and (where a
// Python with torch exists) a CPU run of the harness whose measurements file the strict reader
// accepts. The harness's own Python tests are ctests of their own (python.*, tests/CMakeLists.txt).
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/document.h"
#include "costmodel/measurements.h"
#include "costmodel/model.h"

namespace hetplan {
namespace {

using testing::run_hetplan;
using testing::temp_dir;

// The source tree: where it was built, or the working directory when the tests run from a copy
// of the repository elsewhere (a GPU machine).
std::filesystem::path source_root() {
  const std::filesystem::path built = HETPLAN_SOURCE_DIR;
  if (std::filesystem::exists(built / "scripts" / "reference_train.py")) return built;
  return std::filesystem::current_path();
}
const std::filesystem::path kRoot = source_root();

std::string write(const std::filesystem::path& dir, const std::string& name,
                  const std::string& text) {
  const auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

int shell(const std::string& cmd) {
  const int status = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A Python that can import torch ($HETPLAN_PYTHON, python3, /usr/bin/python3), or "".
std::string python_with_torch() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("HETPLAN_PYTHON")) candidates.push_back(env);
  candidates.insert(candidates.end(), {"python3", "/usr/bin/python3"});
  for (const auto& p : candidates)
    if (shell(p + " -c 'import torch'") == 0) return p;
  return "";
}

TEST(ModelInfoCli, ListsEveryLayerWithItsFields) {
  auto r = run_hetplan("model-info --model llama2-7b --seq-len 1024 --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json j = Json::parse(r.output);
  EXPECT_EQ(j["format"], "hetplan-model-info");
  EXPECT_EQ(j["seq_len"], 1024);
  ASSERT_EQ(j["layers"].size(), 34u);  // embedding, 32 blocks, head
  const Json& block = j["layers"][1];
  EXPECT_EQ(block["kind"], "transformer");
  EXPECT_EQ(block["activation"], "swiglu");
  EXPECT_EQ(block["norm"], "rmsnorm");
  EXPECT_EQ(block["rotary"], true);
  EXPECT_EQ(block["bias"], false);
  EXPECT_EQ(block["ffn_hidden"], 11008);
  EXPECT_EQ(block["seq_len"], 1024);
  // 4096 x (3 x 4096) + 4096 x 4096 + 3 x 4096 x 11008 + 2 x 4096 (Touvron et al. 2023).
  EXPECT_EQ(block["parameters"], 202383360);
  EXPECT_EQ(j["layers"][33]["tied"], false);
  EXPECT_EQ(j["parameters"], load_model("llama2-7b").parameters());
  r = run_hetplan("model-info --model gpt2-medium");
  EXPECT_NE(r.output.find("1-24 block"), std::string::npos) << r.output;
}

TEST(MeasureCli, ErrorsAndDryRun) {
  const auto dir = temp_dir("measure_cli");
  const std::string strategy = write(dir, "s.json", R"({"dp": 1, "tp": 1, "pp": 1,
      "micro_batch": 2, "global_batch": 4, "recompute": "full"})");
  const auto out = (dir / "m.json").string();
  auto r = run_hetplan("measure --model gpt2-medium --strategy " + strategy + " --out " + out +
                       " --python /nonexistent/python3");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no Python with PyTorch found"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out));

  const std::string bad = write(dir, "bad.json", R"({"dp": 1, "tp": 3, "pp": 1,
      "micro_batch": 2, "global_batch": 4})");
  r = run_hetplan("measure --model gpt2-medium --strategy " + bad + " --out " + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("bad.json: tp:"), std::string::npos) << r.output;
  // What predict refuses, and what the harness cannot run, are refused before it starts.
  for (const auto& [text, message] : std::vector<std::pair<std::string, std::string>>{
           {R"({"dp": 1, "tp": 1, "pp": 30, "micro_batch": 1, "global_batch": 4})",
            "bad.json: pp: pp 30 x 1 chunks exceeds the model's 26 layers"},
           {R"({"dp": 2, "tp": 2, "pp": 1, "micro_batch": 1, "global_batch": 4})",
            "bad.json: dp: the reference harness runs one kind of parallelism at a time; this "
            "strategy has dp 2, tp 2"},
           {R"({"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 4, "zero": 3})",
            "bad.json: zero: ZeRO-3 is not supported by the reference harness"}}) {
    write(dir, "bad.json", text);
    r = run_hetplan("measure --model gpt2-medium --strategy " + bad + " --out " + out +
                    " --dry-run");
    EXPECT_EQ(r.exit_code, 2) << text << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  }

  if (shell("python3 --version") != 0) GTEST_SKIP() << "no python3";
  r = run_hetplan("measure --model gpt2-medium --strategy " + strategy + " --out " + out +
                  " --dry-run --python python3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json plan = Json::parse(r.output);
  EXPECT_EQ(plan[0]["parameters"], 354823168);  // GPT-2 medium, tied embeddings counted once
  EXPECT_EQ(plan[0]["hetplan_parameters"], 354823168);
  EXPECT_EQ(plan[0]["microbatches"], 2);
  std::filesystem::remove_all(dir);
}

// The harness end to end on the CPU (where torch exists): the file it writes is a measurements
// file that hetplan's strict reader accepts.
TEST(ReferenceHarness, CpuRunWritesAValidMeasurementsFile) {
  const std::string python = python_with_torch();
  if (python.empty()) GTEST_SKIP() << "no Python with torch";
  const auto dir = temp_dir("harness_cpu");
  auto r = run_hetplan("model-info --model " + (kRoot / "examples/models/tiny-gpt.yaml").string() +
                       " --json " + (dir / "model.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string strategy = write(dir, "s.json", R"({"dp": 1, "tp": 1, "pp": 1,
      "micro_batch": 2, "global_batch": 4, "recompute": "none"})");
  const auto out = dir / "m.json";
  const int rc = shell(python + " " + (kRoot / "scripts/reference_train.py").string() +
                       " --device cpu --warmup 1 --iters 3 --model-info " +
                       (dir / "model.json").string() + " --strategy " + strategy + " --out " +
                       out.string() + " --model-name tiny-gpt --cluster cpu");
  ASSERT_EQ(rc, 0);
  const MeasurementsFile f = load_measurements(out);
  ASSERT_EQ(f.measurements.size(), 1u);
  const Measurement& m = f.measurements[0];
  EXPECT_EQ(m.model, "tiny-gpt");
  EXPECT_EQ(m.source, "measured:pytorch");
  EXPECT_FALSE(m.oom);
  ASSERT_TRUE(m.iteration_s.has_value());
  EXPECT_EQ(m.iteration_s->count, 3);
  EXPECT_GT(m.iteration_s->median, 0);
  EXPECT_EQ(m.strategy["global_batch"], 4);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
