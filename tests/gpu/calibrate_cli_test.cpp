// `hetplan calibrate` end to end on a GPU: a quick GEMM calibration, the copy probe, and an
// interrupted run resumed without measuring anything twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>

#include "costmodel/calibration.h"
#include "costmodel/document.h"
#include "tests/gpu/gpu_test_util.h"

namespace hetplan {
namespace {

using gpu_test::run_hetplan;

// Measurement keys in the order the journal holds them (every line, repeats included).
std::vector<std::string> journal_keys(const std::filesystem::path& journal) {
  std::vector<std::string> keys;
  std::ifstream in(journal);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const Json j = Json::parse(line);
    const std::string key = j["key"].get<std::string>();
    if (key.rfind("context/", 0) != 0 && key.rfind("finished/", 0) != 0) keys.push_back(key);
  }
  return keys;
}

// A provenance's notes, one by one.
std::vector<std::string> notes_of(const Provenance& p) {
  std::vector<std::string> notes;
  for (size_t from = 0; from < p.notes.size();) {
    const size_t end = std::min(p.notes.find("; ", from), p.notes.size());
    notes.push_back(p.notes.substr(from, end - from));
    from = end + 2;
  }
  return notes;
}

TEST(CalibrateOnGpu, QuickGemmCalibrationWritesAFullFile) {
  HETPLAN_REQUIRE_GPU();
  const auto dir = gpu_test::temp_dir("quick");
  const auto out = dir / "cal.json";
  const auto r = run_hetplan("calibrate --quick --gemm --out " + out.string(), dir);
  ASSERT_EQ(r.status, 0) << r.output;
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  const int cc = major * 10 + minor;
  const CalibrationFile f = load_calibration(out);
  EXPECT_EQ(f.context.source, "measured");
  EXPECT_FALSE(f.context.gpu_name.empty());
  EXPECT_FALSE(f.context.gpu_type.empty());
  EXPECT_GT(f.context.sm_count, 0);
  EXPECT_GT(f.context.l2_bytes, 0);
  EXPECT_FALSE(f.context.cublas.empty());
  EXPECT_FALSE(f.context.driver.empty());
  EXPECT_NE(f.context.command.find("--quick"), std::string::npos);
  // Quick grid: fp32 and fp16 {128, 1024, 8192}^3 (27 each) everywhere; bf16 {16, 128, 1024,
  // 8192}^3 (64) and tf32 (27) from sm_80; fp8 (27) from sm_89.
  const size_t planned = 27 + 27 + (cc >= 80 ? 64 + 27 : 0) + (cc >= 89 ? 27 : 0);
  EXPECT_EQ(f.gemm.size() + f.failures.size(), planned);
  EXPECT_GE(f.gemm.size(), planned - 2) << "failures: " << f.failures.size();
  size_t tensor_core = 0;
  // The clock monitor read NVML (where it could: the notes say so) during every timing.
  const bool clocks = f.context.notes.find("clocks read through NVML") != std::string::npos;
  std::cout << "clocks: " << (clocks ? "read" : f.context.notes) << "\n";
  for (const auto& g : f.gemm) {
    EXPECT_GT(g.time_s.median, 0);
    if (clocks) {
      ASSERT_TRUE(g.method.contains("clocks")) << g.method.dump();
      EXPECT_GE(g.method["clocks"]["samples"].get<int>(), 1);
      EXPECT_GT(g.method["clocks"]["sm_mhz_median"].get<double>(), 200);
    }
    EXPECT_GE(g.time_s.count, 5);
    ASSERT_TRUE(g.method.contains("check"));
    EXPECT_LE(g.method["check"]["relative_error"].get<double>(),
              g.method["check"]["threshold"].get<double>());
    EXPECT_FALSE(g.algo.is_null());
    if (g.dtype == Dtype::kBf16 && g.shape.m == 8192 && g.shape.n == 8192 && g.shape.k == 8192) {
      if (!f.context.cupti.empty()) {  // CUPTI worked: the kernels are known
        EXPECT_TRUE(g.tensor_cores) << (g.kernels.empty() ? "no kernels traced" : g.kernels[0]);
      }
      std::cout << "bf16 8192^3: " << g.shape.flops() / g.time_s.median / 1e12 << " TFLOP/s\n";
    }
    tensor_core += g.tensor_cores;
  }
  std::cout << tensor_core << " of " << f.gemm.size() << " GEMMs on tensor cores\n";
  std::cout << r.output;
}

TEST(CalibrateOnGpu, CopyProbeMeasuresBandwidth) {
  HETPLAN_REQUIRE_GPU();
  const auto dir = gpu_test::temp_dir("copy");
  const auto out = dir / "cal.json";
  const auto r = run_hetplan("calibrate --quick --kernels --out " + out.string(), dir);
  ASSERT_EQ(r.status, 0) << r.output;
  const CalibrationFile f = load_calibration(out);
  double best_GBps = 0;
  for (const auto& k : f.kernels)
    if (k.kernel == "d2d_copy") best_GBps = std::max(best_GBps, k.bytes / k.time_s.median / 1e9);
  EXPECT_GT(best_GBps, 100.0);  // any datacenter GPU copies well above 100 GB/s
  std::cout << "best device copy: " << best_GBps << " GB/s\n";
}

TEST(CalibrateOnGpu, InterruptedRunResumesWithoutRepeats) {
  HETPLAN_REQUIRE_GPU();
  const auto dir = gpu_test::temp_dir("resume");
  const auto out = dir / "cal.json";
  const std::string args = "calibrate --quick --gemm --dtypes fp32 --out " + out.string();
  const auto first = run_hetplan(args + " --stop-after 5", dir);
  EXPECT_EQ(first.status, 1) << first.output;  // interrupted: partial file, status 1
  EXPECT_NE(first.output.find("--resume"), std::string::npos) << first.output;
  const auto journal = std::filesystem::path(out.string() + ".journal");
  EXPECT_EQ(journal_keys(journal).size(), 5u);
  const CalibrationFile partial = load_calibration(out);
  EXPECT_EQ(partial.gemm.size() + partial.failures.size(), 5u);

  const auto second = run_hetplan(args + " --resume", dir);
  ASSERT_EQ(second.status, 0) << second.output;
  const auto keys = journal_keys(journal);
  std::map<std::string, int> seen;
  for (const auto& k : keys) EXPECT_EQ(++seen[k], 1) << "measured twice: " << k;
  EXPECT_EQ(keys.size(), 27u);
  const CalibrationFile full = load_calibration(out);
  EXPECT_EQ(full.gemm.size() + full.failures.size(), 27u);
  EXPECT_NE(full.context.notes.find("earlier run"), std::string::npos) << full.context.notes;
  // Only the resumed run finished, and its end is journalled for --from-journal.
  std::ifstream in(journal);
  int finished = 0;
  for (std::string line; std::getline(in, line);)
    finished += line.find("\"key\":\"finished/") != std::string::npos;
  EXPECT_EQ(finished, 1);

  // The journal alone gives the same file, notes included (the tracer's and the clocks').
  const auto rebuilt = dir / "rebuilt.json";
  std::filesystem::copy_file(journal, rebuilt.string() + ".journal");
  const auto assembled = run_hetplan("calibrate --from-journal --out " + rebuilt.string(), dir);
  ASSERT_EQ(assembled.status, 0) << assembled.output;
  const CalibrationFile again = load_calibration(rebuilt);
  EXPECT_EQ(again.gemm.size(), full.gemm.size());
  EXPECT_EQ(again.failures.size(), full.failures.size());
  EXPECT_NE(again.context.notes.find("its last run finished"), std::string::npos);
  for (const std::string& note : notes_of(full.context))
    EXPECT_NE(again.context.notes.find(note), std::string::npos)
        << "the file's note \"" << note << "\" is not in the journal's: " << again.context.notes;
}

TEST(CalibrateOnGpu, ResumeRefusesAnotherGpusJournal) {
  HETPLAN_REQUIRE_GPU();
  const auto dir = gpu_test::temp_dir("other_gpu");
  const auto out = dir / "cal.json";
  {
    std::ofstream j(out.string() + ".journal");
    j << R"({"key":"context/2026-01-01T00:00:00Z","record":{"source":"measured","gpu_name":"Some Other GPU"}})"
      << "\n";
  }
  const auto r = run_hetplan("calibrate --quick --gemm --resume --out " + out.string(), dir);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("Some Other GPU"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace hetplan
