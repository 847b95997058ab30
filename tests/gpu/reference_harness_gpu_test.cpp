// The PyTorch reference harness on a real GPU (label gpu): hetplan measure on the tiny example
// models writes a measurements file with a sane time and a peak memory at least the 18 bytes per
// parameter of the mixed-precision layout. Skips where no GPU is visible to PyTorch.
#include <sys/wait.h>
#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "costmodel/measurements.h"
#include "costmodel/model.h"
#include "tests/gpu/gpu_test_util.h"

namespace hetplan {
namespace {

// The source tree: where it was built, or the working directory when the tests run from a copy
// of the repository elsewhere (a GPU machine).
std::filesystem::path source_root() {
  const std::filesystem::path built = HETPLAN_SOURCE_DIR;
  if (std::filesystem::exists(built / "scripts" / "reference_train.py")) return built;
  return std::filesystem::current_path();
}
const std::filesystem::path kRoot = source_root();

int shell(const std::string& cmd) {
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string python() {
  const char* env = std::getenv("HETPLAN_PYTHON");
  return env ? env : "python3";
}

TEST(ReferenceHarnessGpu, TinyModelsTrainAndReport) {
  if (shell(python() + " -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'"
                       " >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no GPU visible to PyTorch";
  const auto dir = std::filesystem::temp_directory_path() /
                   ("hetplan_harness_gpu_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const char* name : {"tiny-gpt", "tiny-llama"}) {
    for (const char* recompute : {"none", "full"}) {
      const auto strategy = dir / "s.json";
      std::ofstream(strategy) << R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 4,
          "global_batch": 8, "recompute": ")"
                              << recompute << "\"}";
      const auto out = dir / (std::string(name) + "_" + recompute + ".json");
      const std::string model =
          (kRoot / "examples/models" / (std::string(name) + ".yaml")).string();
      // $HETPLAN_BINARY on a GPU machine, where the build's path does not exist.
      const int rc = shell(gpu_test::hetplan_binary() + " measure --model " + model +
                           " --strategy " + strategy.string() + " --out " + out.string() +
                           " --warmup 2 --iters 5 --python " + python());
      ASSERT_EQ(rc, 0) << name << " " << recompute;
      const MeasurementsFile f = load_measurements(out);
      ASSERT_EQ(f.measurements.size(), 1u);
      const Measurement& m = f.measurements[0];
      ASSERT_TRUE(m.iteration_s.has_value());
      EXPECT_GT(m.iteration_s->median, 1e-5);
      EXPECT_LT(m.iteration_s->median, 1.0);
      ASSERT_EQ(m.peak_memory_bytes.size(), 1u);
      const double params = static_cast<double>(load_model(model).parameters());
      EXPECT_GE(m.peak_memory_bytes[0], 18 * params) << name;
      EXPECT_EQ(f.context.framework, "pytorch");
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
