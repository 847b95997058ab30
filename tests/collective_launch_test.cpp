#include <cerrno>
#include <cstring>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

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

// An IPv4 socket address: `host` as INADDR_LOOPBACK or INADDR_ANY, and `port` (0: any free one).
sockaddr_in ipv4(uint32_t host, int port) {
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(static_cast<uint16_t>(port));
  at.sin_addr.s_addr = htonl(host);
  return at;
}

// Rank `rank` of a launch of `size` processes.
LaunchInfo rank_of(int rank, int size) {
  LaunchInfo l;
  l.rank = rank;
  l.size = size;
  return l;
}

// A port the kernel just gave out and took back: free, and unlike a port derived from the process
// id, not the one a test running beside this one (ctest -j) derives from its neighbouring pid.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in at = ipv4(INADDR_LOOPBACK, 0);
  socklen_t size = sizeof at;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&at), &size) != 0)
    throw std::runtime_error(std::string("free_port: ") + std::strerror(errno));
  ::close(fd);
  return ntohs(at.sin_port);
}

TEST(Rendezvous, ThreeRanksGatherAndBroadcast) {
  const RendezvousAddress addr{"127.0.0.1", free_port()};
  auto run = [&](int rank) {
    const LaunchInfo l = rank_of(rank, 3);
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
  const RendezvousAddress addr{"127.0.0.1", free_port()};
  const LaunchInfo l = rank_of(0, 2);
  try {
    Rendezvous r(l, addr, {0.3, 0.3});
    FAIL();
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("only 1 of 2 ranks"), std::string::npos) << e.what();
  }
}

TEST(Rendezvous, DeadPeerIsReportedNotWaitedFor) {
  const RendezvousAddress addr{"127.0.0.1", free_port()};
  auto peer = std::async(std::launch::async, [&] {
    const LaunchInfo l = rank_of(1, 2);
    Rendezvous r(l, addr, {10, 10});
    r.all_gather("x");
    // Leaves without taking part in the second exchange: its socket closes.
  });
  const LaunchInfo l = rank_of(0, 2);
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

TEST(Rendezvous, TimeoutsFromTheEnvironmentAreSecondsAboveZero) {
  const RendezvousTimeouts defaults = rendezvous_timeouts({});
  EXPECT_DOUBLE_EQ(defaults.connect_s, 60);
  EXPECT_DOUBLE_EQ(defaults.operation_s, 900);
  const RendezvousTimeouts set = rendezvous_timeouts(
      {{"HETPLAN_RENDEZVOUS_CONNECT_S", "2.5"}, {"HETPLAN_RENDEZVOUS_TIMEOUT_S", "30"}});
  EXPECT_DOUBLE_EQ(set.connect_s, 2.5);
  EXPECT_DOUBLE_EQ(set.operation_s, 30);
  EXPECT_DOUBLE_EQ(rendezvous_timeouts({{"HETPLAN_RENDEZVOUS_CONNECT_S", ""}}).connect_s, 60);
  for (const char* bad : {"0", "-1", "5s", "abc", "nan"}) {
    try {
      rendezvous_timeouts({{"HETPLAN_RENDEZVOUS_TIMEOUT_S", bad}});
      ADD_FAILURE() << bad << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("environment variable HETPLAN_RENDEZVOUS_TIMEOUT_S: expected seconds "
                            "> 0, found \"") +
                    bad + "\"");
    }
  }
}

// A socket on the rendezvous port that is not a rank (a port scanner, a health check) is closed
// and ignored; the ranks still meet.
TEST(Rendezvous, AStrayConnectionIsIgnored) {
  const RendezvousAddress addr{"127.0.0.1", free_port()};
  auto stray_then_rank = std::async(std::launch::async, [&] {
    const sockaddr_in to = ipv4(INADDR_LOOPBACK, addr.port);  // addr.host
    for (int tries = 0; tries < 100; ++tries) {               // until rank 0 listens
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0) {
        const char junk[16] = "GET / HTTP/1.0";
        (void)!::write(fd, junk, sizeof junk);
        ::close(fd);
        break;
      }
      ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const LaunchInfo l = rank_of(1, 2);
    Rendezvous r(l, addr, {10, 10});
    return r.all_gather("one")[0];
  });
  const LaunchInfo l = rank_of(0, 2);
  Rendezvous r(l, addr, {10, 10});
  EXPECT_EQ(r.all_gather("zero"), (std::vector<std::string>{"zero", "one"}));
  EXPECT_EQ(stray_then_rank.get(), "zero");
}

// A rank of another job on the same port says how many ranks it has: rank 0 names the clash.
TEST(Rendezvous, ARankOfAnotherJobSizeIsNamed) {
  const RendezvousAddress addr{"127.0.0.1", free_port()};
  auto other = std::async(std::launch::async, [&] {
    const LaunchInfo l = rank_of(1, 3);
    try {
      Rendezvous r(l, addr, {5, 1});
      r.barrier();  // rank 0 has closed the connection
    } catch (const RuntimeFailure&) {
    }
  });
  const LaunchInfo l = rank_of(0, 2);
  try {
    Rendezvous r(l, addr, {5, 5});
    ADD_FAILURE() << "accepted a rank of a 3-rank job";
  } catch (const RuntimeFailure& e) {
    EXPECT_EQ(std::string(e.what()),
              "rendezvous: a rank announced itself as 1 of 3, but this job has 2 ranks (two jobs "
              "on one port?)");
  }
  other.get();
}

TEST(Rendezvous, APortInUseAndAnAbsentRankZeroAreNamed) {
  const RendezvousAddress addr{"127.0.0.1", free_port()};
  // Rank 1 alone: nobody listens.
  try {
    Rendezvous r(rank_of(1, 2), addr, {1, 1});
    ADD_FAILURE() << "reached a rank 0 that does not exist";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(
        std::string(e.what()).find(fmt::format(
            "rendezvous: rank 1 could not reach rank 0 at 127.0.0.1:{} within 1 s (", addr.port)),
        std::string::npos)
        << e.what();
  }
  // The port taken by another program.
  const int taken = ::socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in at = ipv4(INADDR_ANY, addr.port);
  ASSERT_EQ(::bind(taken, reinterpret_cast<const sockaddr*>(&at), sizeof at), 0)
      << std::strerror(errno);
  ASSERT_EQ(::listen(taken, 1), 0);
  try {
    Rendezvous r(rank_of(0, 2), addr, {1, 1});
    ADD_FAILURE() << "listened on a port in use";
  } catch (const RuntimeFailure& e) {
    EXPECT_EQ(std::string(e.what()),
              fmt::format("rendezvous: rank 0 cannot listen on port {} (Address already in use); "
                          "set HETPLAN_MASTER_PORT to a free port",
                          addr.port));
  }
  ::close(taken);
}

}  // namespace
}  // namespace hetplan::profiler
