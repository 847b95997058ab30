// `hetplan calibrate` where there is no GPU (CUDA_VISIBLE_DEVICES empty hides any): a clear
// message and exit status 1, never a crash; bad options are input errors (2) before that.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace hetplan {
namespace {

struct CliRun {
  int status = -1;
  std::string output;
};

CliRun run(const std::string& args) {
  const std::string cmd =
      std::string("CUDA_VISIBLE_DEVICES= ") + HETPLAN_BINARY + " calibrate " + args + " 2>&1";
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

}  // namespace
}  // namespace hetplan
