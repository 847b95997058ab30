// `hetplan calibrate` where there is no GPU (CUDA_VISIBLE_DEVICES empty hides any): a clear
// message and exit status 1, never a crash; bad options are input errors (2) before that.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "costmodel/calibration.h"

namespace hetplan {
namespace {

struct CliRun {
  int status = -1;
  std::string output;
};

CliRun run(const std::string& args, const std::string& env = "") {
  const std::string cmd =
      "CUDA_VISIBLE_DEVICES= " + env + " " + HETPLAN_BINARY + " calibrate " + args + " 2>&1";
  CliRun r;
  std::FILE* pipe = ::popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) r.output.append(buf, n);
  const int raw = ::pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

TEST(CalibrateCli, NoGpuIsARunTimeFailureWithAPlainMessage) {
  const CliRun r = run("--quick --gemm --out /tmp/hetplan_no_gpu.json");
  EXPECT_EQ(r.status, 1) << r.output;
#ifdef HETPLAN_HAVE_CUDA
  EXPECT_NE(r.output.find("no usable NVIDIA GPU"), std::string::npos) << r.output;
#else
  EXPECT_NE(r.output.find("no CUDA profiler"), std::string::npos) << r.output;
#endif
  EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
}

TEST(CalibrateCli, BadOptionsAreInputErrors) {
  EXPECT_EQ(run("--out /tmp/x.json --dtypes bf16,int8").status, 2);
  EXPECT_EQ(run("--out /tmp/x.json --micro-batches 0").status, 2);
  EXPECT_EQ(run("--quick").status, 2);  // --out is required
#ifdef HETPLAN_HAVE_CUDA
  const CliRun r = run("--out /tmp/x.json --layers no-such-model");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("no-such-model"), std::string::npos) << r.output;
  EXPECT_EQ(run("--out /no/such/folder/x.json").status, 2);
#endif
}

// --from-journal writes the file of a journal alone, with no GPU (CUDA_VISIBLE_DEVICES is empty):
// the run was killed before it wrote its file, or its machine is gone.
TEST(CalibrateCli, AJournalAloneBecomesTheFileWithoutAGpu) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("hetplan_from_journal_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "h100.json").string();
  {
    std::ofstream j(out + ".journal");
    j << R"({"key":"context/2026-11-24T10:00:00Z/77","record":{"source":"measured",)"
         R"("gpu_name":"NVIDIA H100 80GB HBM3","gpu_type":"h100-sxm","host":"gpu1",)"
         R"("date":"2026-11-24T10:00:00Z"}})"
      << "\n"
      << R"({"key":"kernel/d2d_copy/1000000000","record":{"kernel":"d2d_copy","dtype":"fp32",)"
         R"("bytes":2000000000,"time":{"count":1,"median_s":0.001,"p10_s":0.001,"p90_s":0.001,)"
         R"("min_s":0.001,"max_s":0.001,"mean_s":0.001,"stddev_s":0}}})"
      << "\n"
      << R"({"key":"gemm/bf16/1x2x3)";  // torn: the run was killed mid-write
  }
  CliRun r = run("--out " + out + " --from-journal");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("1 torn or malformed journal line(s) ignored"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("1 measurements from the journal"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("the journal's last run (2026-11-24T10:00:00Z on gpu1) may not have "
                          "finished: the file may be partial; `hetplan calibrate --out " +
                          out + " --resume` with its options, on that GPU, completes it"),
            std::string::npos)
      << r.output;
  const CalibrationFile f = load_calibration(out);
  ASSERT_EQ(f.kernels.size(), 1u);
  EXPECT_DOUBLE_EQ(f.kernels[0].time_s.median, 1e-3);
  EXPECT_EQ(f.context.gpu_type, "h100-sxm");
  EXPECT_NE(f.context.notes.find("assembled from the journal"), std::string::npos)
      << f.context.notes;
  // No finished/ record: the run was killed.
  EXPECT_NE(f.context.notes.find("its last run may not have finished"), std::string::npos)
      << f.context.notes;

  // Measuring options make no sense without measuring; a missing journal is named.
  r = run("--out " + out + " --from-journal --gemm");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--from-journal writes the file from its journal alone; --gemm is for "
                          "measuring"),
            std::string::npos)
      << r.output;
  const std::string none = (dir / "none.json").string();
  r = run("--out " + none + " --from-journal");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--from-journal: " + none + ".journal does not exist"), std::string::npos)
      << r.output;
  // calibrate-collectives' journals are per rank: the message says which command resumes them.
  std::ofstream(none + ".collectives.rank0.jsonl") << "\n";
  r = run("--out " + none + " --from-journal");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("is calibrate-collectives' journal of rank 0: `hetplan "
                          "calibrate-collectives --out " +
                          none + " --resume` on the GPUs completes it"),
            std::string::npos)
      << r.output;
  std::filesystem::remove_all(dir);
}

#ifdef HETPLAN_HAVE_CUDA
// The CUDA half is a module loaded at run time (profiler/common/gpu_module.h): a missing or
// foreign module is a run-time failure that says which file and why.
TEST(CalibrateCli, GpuModuleProblemsAreNamed) {
  CliRun r =
      run("--quick --gemm --out /tmp/x.json", "HETPLAN_GPU_MODULE=/no/such/libhetplan_gpu.so");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("GPU module libhetplan_gpu.so was not found"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("/no/such/libhetplan_gpu.so: not there"), std::string::npos) << r.output;
  // A shared library that is not the module (the C library is on every machine).
  r = run("--quick --gemm --out /tmp/x.json", "HETPLAN_GPU_MODULE=libc.so.6");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("libc.so.6 is not a hetplan GPU module"), std::string::npos) << r.output;
}
#endif

}  // namespace
}  // namespace hetplan
