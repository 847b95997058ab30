// Helpers of the GPU tests: skip cleanly without a GPU, run the hetplan binary.
#pragma once

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

namespace hetplan::gpu_test {

inline bool have_gpu() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  (void)cudaGetLastError();
  return ok;
}

#define HETPLAN_REQUIRE_GPU() \
  if (!::hetplan::gpu_test::have_gpu()) GTEST_SKIP() << "no GPU visible"

inline std::filesystem::path temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("hetplan_gpu_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::create_directories(dir);
  return dir;
}

struct RunResult {
  int status = -1;
  std::string output;  // stdout and stderr
};

// The hetplan executable: $HETPLAN_BINARY when set (binaries carried to a GPU machine), else the
// one this build made.
inline std::string hetplan_binary() {
  const char* env = std::getenv("HETPLAN_BINARY");
  return env != nullptr && *env != '\0' ? env : HETPLAN_BINARY;
}

// Runs `hetplan <args>` and returns its exit status and output.
inline RunResult run_hetplan(const std::string& args, const std::filesystem::path& dir) {
  const auto log = dir / "run.log";
  const std::string cmd = hetplan_binary() + " " + args + " > " + log.string() + " 2>&1";
  const int raw = std::system(cmd.c_str());
  RunResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  r.output = ss.str();
  return r;
}

}  // namespace hetplan::gpu_test
