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
  // A --tp the model's widths do not divide names the model's file (the fuzzer's seed 33).
  r = run_hetplan("model-info --model llama2-7b --work --tp 3 --json -");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("presets/models/llama2-7b.yaml: --tp 3 does not divide the 32 heads of "
                          "block0"),
            std::string::npos)
      << r.output;
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
            "bad.json: zero: reference runs ZeRO stages 0, 1, 2, not ZeRO-3"}}) {
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

// A stand-in for a Python with PyTorch and a GPU, so that what hetplan measure does around the
// harness runs without either: it answers the torch check with `check_rc`; as the harness it
// records its arguments (one per line) and a copy of the model list it was given in `dir`, writes
// `measurements` (unless empty) where --out says, and exits with `rc`.
std::string fake_python(const std::filesystem::path& dir, int check_rc, int rc,
                        const std::string& measurements) {
  const std::string body = write(dir, "harness-writes.json", measurements);
  const auto path = dir / "fake-python";
  std::ofstream(path) << "#!/bin/sh\n"
                      << "if [ \"$1\" = -c ]; then exit " << check_rc << "; fi\n"
                      << "printf '%s\\n' \"$@\" > '" << (dir / "args.txt").string() << "'\n"
                      << "out=\n"
                      << "while [ $# -gt 0 ]; do\n"
                      << "  [ \"$1\" = --out ] && out=$2\n"
                      << "  [ \"$1\" = --model-info ] && cp \"$2\" '"
                      << (dir / "model-info-seen.json").string() << "'\n"
                      << "  shift\n"
                      << "done\n"
                      << (measurements.empty() ? "" : "cp '" + body + "' \"$out\"\n") << "exit "
                      << rc << "\n";
  std::filesystem::permissions(path, std::filesystem::perms::owner_all);
  return path.string();
}

std::vector<std::string> lines_of(const std::filesystem::path& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// What follows `flag` in the harness's arguments ("" when it is not there).
std::string argument(const std::vector<std::string>& args, const std::string& flag) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == flag) return args[i + 1];
  return "";
}

const char* const kMeasured = R"({"format": "hetplan-measurements", "schema_version": 1,
  "context": {"host": "gpu-node", "date": "2026-11-24T10:00:00Z", "gpu_type": "h100-sxm"},
  "measurements": [
    {"model": "gpt2-medium", "strategy": {"dp": 1, "tp": 1, "pp": 1, "micro_batch": 2,
     "global_batch": 4}, "source": "measured:pytorch", "oom": false,
     "iteration_s": {"count": 8, "median_s": 0.06514}, "peak_memory_bytes": [7628994048]},
    {"model": "gpt2-medium", "strategy": {"dp": 1, "tp": 1, "pp": 1, "micro_batch": 8,
     "global_batch": 8}, "source": "measured:pytorch", "oom": true},
    {"model": "gpt2-medium", "strategy": {"dp": 1, "tp": 1, "pp": 1, "micro_batch": 4,
     "global_batch": 8}, "source": "measured:pytorch", "error": "CUDA error: an illegal memory access"}]})";

// Everything hetplan measure does around the harness, with a stand-in interpreter: the arguments
// it passes, what it prints of the file, the exit status of each way the harness can end, and
// that --out only ever holds a file of this run that the strict reader accepts.
TEST(MeasureCli, RunsTheHarnessAndKeepsOnlyWhatThisRunWrote) {
  const auto dir = temp_dir("measure_fake");
  const std::string strategy = write(dir, "s.json", R"({"dp": 1, "tp": 1, "pp": 1,
      "micro_batch": 2, "global_batch": 4})");
  const auto out = dir / "m.json";
  const std::string base =
      "measure --model gpt2-medium --strategy " + strategy + " --out " + out.string();

  auto r = run_hetplan(base + " --python " + fake_python(dir, 3, 0, kMeasured));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("sees no CUDA GPU: hetplan measure needs one"), std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "args.txt"));  // the harness never started

  r = run_hetplan(base + " --warmup 2 --iters 5 --budget-s 7 --cluster p5.48xlarge:1 " +
                  "--gpu-type h100-sxm --python " + fake_python(dir, 0, 0, kMeasured));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("gpt2-medium: iteration 65.14 ms (median of 8), peak allocated 7.1 GiB"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("gpt2-medium: out of memory"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("gpt2-medium: failed: CUDA error: an illegal memory access"),
            std::string::npos)
      << r.output;
  const auto args = lines_of(dir / "args.txt");
  ASSERT_FALSE(args.empty());
  EXPECT_TRUE(args[0].ends_with("scripts/reference_train.py")) << args[0];  // no torchrun
  EXPECT_EQ(argument(args, "--model-name"), "gpt2-medium");
  EXPECT_EQ(argument(args, "--warmup"), "2");
  EXPECT_EQ(argument(args, "--iters"), "5");
  EXPECT_EQ(argument(args, "--budget-s"), "7");
  EXPECT_EQ(argument(args, "--cluster"), "p5.48xlarge:1");
  EXPECT_EQ(argument(args, "--gpu-type"), "h100-sxm");
  EXPECT_FALSE(argument(args, "--hetplan-version").empty());
  // The whole command line, options included, is what the file records.
  const std::string command = argument(args, "--command");
  EXPECT_NE(command.find("measure --model gpt2-medium"), std::string::npos) << command;
  EXPECT_NE(command.find("--budget-s 7"), std::string::npos) << command;
  // The harness wrote into a scratch folder, gone now; --out holds exactly its file.
  const std::filesystem::path written = argument(args, "--out");
  EXPECT_NE(written, out);
  EXPECT_FALSE(std::filesystem::exists(written.parent_path())) << written;
  EXPECT_EQ(load_measurements(out).measurements.size(), 3u);
  EXPECT_EQ(lines_of(out), lines_of(dir / "harness-writes.json"));
  // The model list it was given is hetplan's: GPT-2 medium's 24 blocks between embedding and head.
  EXPECT_EQ(Json::parse(std::ifstream(dir / "model-info-seen.json"))["layers"].size(), 26u);

  // Failures. --out keeps the earlier run's file whenever this run wrote none it can keep.
  const auto before = lines_of(out);
  std::filesystem::remove(dir / "args.txt");
  r = run_hetplan(base + " --python " + fake_python(dir, 0, 1, ""));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("the reference harness failed (exit 1) before it measured anything; " +
                          out.string() + " was not written"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(lines_of(out), before);

  r = run_hetplan(base + " --python " + fake_python(dir, 0, 2, ""));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("the reference harness rejected its input"), std::string::npos)
      << r.output;

  const std::string unreadable = R"({"format": "hetplan-measurements", "schema_version": 1,
      "context": {}, "measurements": [{"model": "gpt2-medium", "strategy": {},
      "source": "measured:pytorch"}]})";
  r = run_hetplan(base + " --python " + fake_python(dir, 0, 0, unreadable));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("wrote a measurements file hetplan cannot read, kept as " + out.string() +
                          ".rejected"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("iteration_s: missing"), std::string::npos) << r.output;
  EXPECT_EQ(lines_of(out), before);
  EXPECT_EQ(lines_of(out.string() + ".rejected"), lines_of(dir / "harness-writes.json"));

  // A harness that measured and then failed: the file is kept, and the exit status says so.
  r = run_hetplan(base + " --python " + fake_python(dir, 0, 1, kMeasured));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("gpt2-medium: iteration 65.14 ms"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the reference harness failed (exit 1); " + out.string() +
                          " keeps what it measured"),
            std::string::npos)
      << r.output;

  // Two data-parallel GPUs: torchrun starts one process per GPU.
  const std::string dp2 = write(dir, "dp2.json", R"({"dp": 2, "tp": 1, "pp": 1,
      "micro_batch": 2, "global_batch": 4})");
  r = run_hetplan("measure --model gpt2-medium --strategy " + dp2 + " --out " + out.string() +
                  " --python " + fake_python(dir, 0, 0, kMeasured));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto launched = lines_of(dir / "args.txt");
  ASSERT_GE(launched.size(), 4u);
  EXPECT_EQ(launched[0], "-m");
  EXPECT_EQ(launched[1], "torch.distributed.run");
  EXPECT_EQ(launched[2], "--standalone");
  EXPECT_EQ(launched[3], "--nproc_per_node=2");
  std::filesystem::remove_all(dir);
}

// The harness end to end on the CPU (where torch exists): the file it writes is a measurements
// file that hetplan's strict reader accepts.
// The framework names the harness's style (its `harness` key): reference by default, pytorch for
// the plain-PyTorch style (one GPU); a framework without one is refused.
TEST(MeasureCli, TheFrameworkChoosesTheHarnessStyle) {
  const auto dir = temp_dir("measure_style");
  const std::string strategy = write(dir, "s.json", R"({"dp": 1, "tp": 1, "pp": 1,
      "micro_batch": 2, "global_batch": 4})");
  const std::string base = "measure --model gpt2-medium --strategy " + strategy + " --out " +
                           (dir / "m.json").string() + " --python " +
                           fake_python(dir, 0, 0, kMeasured);
  auto r = run_hetplan(base);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(argument(lines_of(dir / "args.txt"), "--style"), "reference");
  r = run_hetplan(base + " --framework pytorch");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(argument(lines_of(dir / "args.txt"), "--style"), "pytorch");
  r = run_hetplan(base + " --framework megatron-core");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("one with a `harness` style), found \"megatron-core\""),
            std::string::npos)
      << r.output;
  write(dir, "s.json", R"({"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 4})");
  r = run_hetplan(base + " --framework pytorch");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("s.json: dp: the harness runs the pytorch framework's style on one GPU"),
            std::string::npos)
      << r.output;
  std::filesystem::remove_all(dir);
}

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
