#include <future>
#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

#include "costmodel/errors.h"
#include "profiler/common/launcher.h"
#include "profiler/common/rendezvous.h"

namespace hetplan::profiler {
namespace {

TEST(Launcher, NoLauncherIsOneProcess) {
  const LaunchInfo l = detect_launch({{"HOME", "/root"}});
  EXPECT_EQ(l.rank, 0);
  EXPECT_EQ(l.size, 1);
  EXPECT_EQ(l.launcher, "none");
}

TEST(Launcher, OpenMpiWinsOverSlurmWhenBothAreSet) {
  // mpirun inside an allocation: OpenMPI's numbering is the one the processes run under.
  const LaunchInfo l = detect_launch({{"OMPI_COMM_WORLD_RANK", "3"},
                                      {"OMPI_COMM_WORLD_SIZE", "4"},
                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                      {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                      {"OMPI_MCA_ess_base_jobid", "1234"},
                                      {"SLURM_PROCID", "0"},
                                      {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(l.launcher, "openmpi");
  EXPECT_EQ(l.rank, 3);
  EXPECT_EQ(l.size, 4);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.local_size, 2);
}

TEST(Launcher, SlurmLocalSizeFromTasksPerNode) {
  // SLURM_STEP_TASKS_PER_NODE "4(x2),3": nodes 0 and 1 run 4 tasks, node 2 runs 3.
  EXPECT_EQ(slurm_tasks_on_node("4(x2),3", 0), 4);
  EXPECT_EQ(slurm_tasks_on_node("4(x2),3", 1), 4);
  EXPECT_EQ(slurm_tasks_on_node("4(x2),3", 2), 3);
  EXPECT_EQ(slurm_tasks_on_node("4(x2),3", 3), 0);
  EXPECT_EQ(slurm_tasks_on_node("8", 0), 8);
  EXPECT_EQ(slurm_tasks_on_node("4(y2)", 0), 0);
  const LaunchInfo l = detect_launch({{"SLURM_PROCID", "10"},
                                      {"SLURM_NTASKS", "11"},
                                      {"SLURM_LOCALID", "2"},
                                      {"SLURM_NODEID", "2"},
                                      {"SLURM_STEP_TASKS_PER_NODE", "4(x2),3"},
                                      {"SLURM_JOB_ID", "77"},
                                      {"SLURM_STEP_ID", "1"}});
  EXPECT_EQ(l.launcher, "slurm");
  EXPECT_EQ(l.rank, 10);
  EXPECT_EQ(l.local_rank, 2);
  EXPECT_EQ(l.local_size, 3);
  EXPECT_EQ(l.job_id, "77.1");
}

TEST(Launcher, PmiAndTorchrun) {
  LaunchInfo l = detect_launch(
      {{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}});
  EXPECT_EQ(l.launcher, "pmi");
  EXPECT_EQ(l.local_size, 2);
  l = detect_launch(
      {{"RANK", "5"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "5"}, {"LOCAL_WORLD_SIZE", "8"}});
  EXPECT_EQ(l.launcher, "torchrun");
  EXPECT_EQ(l.rank, 5);
  EXPECT_EQ(l.local_size, 8);
}

TEST(Launcher, MalformedValuesNameTheVariable) {
  try {
    detect_launch({{"OMPI_COMM_WORLD_RANK", "two"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("OMPI_COMM_WORLD_RANK"), std::string::npos);
  }
  EXPECT_THROW(detect_launch({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}}), InputError);
  EXPECT_THROW(rendezvous_address({}, {{"HETPLAN_MASTER_PORT", "70000"}}), InputError);
}

TEST(Launcher, RendezvousAddressDefaultsAndOverrides) {
  LaunchInfo l;
  l.job_id = "42";
  const RendezvousAddress a = rendezvous_address(l, {});
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_GE(a.port, 29500);
  EXPECT_LT(a.port, 30500);
  EXPECT_EQ(rendezvous_address(l, {}).port, a.port);  // every rank derives the same port
  const RendezvousAddress b =
      rendezvous_address(l, {{"HETPLAN_MASTER_ADDR", "node7"}, {"HETPLAN_MASTER_PORT", "4000"}});
  EXPECT_EQ(b.host, "node7");
  EXPECT_EQ(b.port, 4000);
}

int test_port() { return 31000 + static_cast<int>(::getpid() % 2000); }

TEST(Rendezvous, ThreeRanksGatherAndBroadcast) {
  const RendezvousAddress addr{"127.0.0.1", test_port()};
  auto run = [&](int rank) {
    LaunchInfo l;
    l.rank = rank;
    l.size = 3;
    Rendezvous r(l, addr, {10, 10});
    auto all = r.all_gather("from " + std::to_string(rank));
    std::string id(128, '\0');  // binary payload, as an ncclUniqueId
    id[5] = '\x7f';
    id[100] = static_cast<char>(rank == 0 ? 0xAB : 0);
    const std::string got = r.broadcast(id);
    r.barrier();
    return all[0] + "|" + all[1] + "|" + all[2] + "|" + std::to_string(got.size()) + "|" +
           std::to_string(static_cast<unsigned char>(got[100]));
  };
  auto f1 = std::async(std::launch::async, run, 1);
  auto f2 = std::async(std::launch::async, run, 2);
  const std::string r0 = run(0);
  EXPECT_EQ(r0, "from 0|from 1|from 2|128|171");
  EXPECT_EQ(f1.get(), r0);
  EXPECT_EQ(f2.get(), r0);
}

TEST(Rendezvous, MissingRankTimesOutWithItsName) {
  const RendezvousAddress addr{"127.0.0.1", test_port() + 1};
  LaunchInfo l;
  l.rank = 0;
  l.size = 2;
  try {
    Rendezvous r(l, addr, {0.3, 0.3});
    FAIL();
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("only 1 of 2 ranks"), std::string::npos) << e.what();
  }
}

TEST(Rendezvous, DeadPeerIsReportedNotWaitedFor) {
  const RendezvousAddress addr{"127.0.0.1", test_port() + 2};
  auto peer = std::async(std::launch::async, [&] {
    LaunchInfo l;
    l.rank = 1;
    l.size = 2;
    Rendezvous r(l, addr, {10, 10});
    r.all_gather("x");
    // Leaves without taking part in the second exchange: its socket closes.
  });
  LaunchInfo l;
  l.rank = 0;
  l.size = 2;
  Rendezvous r(l, addr, {10, 10});
  r.all_gather("y");
  peer.get();
  try {
    r.all_gather("z");
    FAIL();
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 closed the connection"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hetplan::profiler
