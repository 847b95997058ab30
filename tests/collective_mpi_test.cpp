// Start-up of the multi-process collective calibration on a machine without a GPU: two processes
// under mpirun meet through the TCP rendezvous and both end with a clear "no GPU" message and exit
// status 1; a rank that never arrives ends the other with a message, not a hang.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

namespace {

struct CommandResult {
  int status = -1;
  std::string output;
};

CommandResult run(const std::string& command) {
  CommandResult r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

bool have_mpirun() { return std::system("command -v mpirun > /dev/null 2>&1") == 0; }

std::string port() { return std::to_string(33000 + ::getpid() % 2000); }

std::string out_file() {
  return (std::filesystem::temp_directory_path() /
          ("hetplan_mpi_" + std::to_string(::getpid()) + ".json"))
      .string();
}

TEST(CollectiveMpi, TwoProcessesWithoutGpuReportNoGpu) {
  if (!have_mpirun()) GTEST_SKIP() << "mpirun not installed";
  // `timeout` is the hard limit: a hang fails the test with status 124 instead of blocking ctest.
  // OMPI_MCA_plm_rsh_agent= and the tcp/self transports keep OpenMPI inside a sandbox.
  const CommandResult r =
      run("OMPI_MCA_plm_rsh_agent= OMPI_MCA_btl=self,tcp OMPI_MCA_btl_vader_single_copy_"
          "mechanism=none timeout -k 5 90 mpirun --allow-run-as-root --oversubscribe "
          "-np 2 -x HETPLAN_MASTER_PORT=" +
          port() + " -x HETPLAN_RENDEZVOUS_CONNECT_S=30 " + HETPLAN_BINARY +
          " calibrate-collectives --out " + out_file());
  if (r.output.find("rank 1") == std::string::npos &&
      (r.output.find("ORTE") != std::string::npos || r.output.find("PMIx") != std::string::npos))
    GTEST_SKIP() << "mpirun cannot start processes here:\n" << r.output;
  EXPECT_NE(r.status, 124) << "hung:\n" << r.output;
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("no GPU"), std::string::npos) << r.output;
#if HETPLAN_HAVE_CUDA
  // Both ranks reached each other: rank 0's message names both processes.
  EXPECT_NE(r.output.find("2 of 2 processes have no usable GPU"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("rank 1 on"), std::string::npos) << r.output;
#endif
  EXPECT_FALSE(std::filesystem::exists(out_file()));
}

TEST(CollectiveMpi, MissingRankEndsWithAMessageNotAHang) {
  // Rank 0 of a job of 2 whose rank 1 never starts (no mpirun needed: the launcher's variables
  // are set by hand).
  const CommandResult r =
      run("OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=2 HETPLAN_MASTER_PORT=" + port() +
          " HETPLAN_RENDEZVOUS_CONNECT_S=1 timeout -k 5 60 " + HETPLAN_BINARY +
          " calibrate-collectives --out " + out_file());
  EXPECT_EQ(r.status, 1) << r.output;
#if HETPLAN_HAVE_CUDA
  EXPECT_NE(r.output.find("only 1 of 2 ranks reached rank 0"), std::string::npos) << r.output;
#else
  EXPECT_NE(r.output.find("no GPU"), std::string::npos) << r.output;
#endif
}

}  // namespace
