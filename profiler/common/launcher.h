// Which process of a multi-process calibration this is, read from the launcher's environment. The
// hetplan binary never links an MPI library (GPU machines often have none): mpirun, srun and
// torchrun-style launchers all export the rank and size, and the processes then meet through the
// TCP rendezvous (profiler/common/rendezvous.h). See docs/collectives.md.
#pragma once

#include <map>
#include <string>

namespace hetplan::profiler {

// Rank and size of this process, and its place on its host.
struct LaunchInfo {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;             // processes on this host; 1 when the launcher does not say
  std::string launcher = "none";  // "openmpi", "pmi", "slurm", "torchrun" or "none"
  std::string job_id;             // identical on every rank of one launch; may be empty
};

// Where rank 0 listens for the others.
struct RendezvousAddress {
  std::string host;
  int port = 0;
};

using Environment = std::map<std::string, std::string>;

// The process's environment as a map.
Environment process_environment();
// Reads, in this order, OpenMPI (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE), PMI (PMI_RANK/
// PMI_SIZE, MPI_LOCALRANKID/MPI_LOCALNRANKS), Slurm (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID,
// SLURM_STEP_TASKS_PER_NODE with SLURM_NODEID) and torchrun (RANK/WORLD_SIZE/LOCAL_RANK/
// LOCAL_WORLD_SIZE). Throws InputError naming the variable when a value is malformed or the rank is
// out of range.
LaunchInfo detect_launch(const Environment& env);
// HETPLAN_MASTER_ADDR (default 127.0.0.1) and HETPLAN_MASTER_PORT (default 29500 + a number
// derived from the job id, so that two jobs on one host do not collide).
RendezvousAddress rendezvous_address(const LaunchInfo& launch, const Environment& env);
// Tasks on node `node_id` from Slurm's "2(x3),1" notation; 0 when it cannot be read.
int slurm_tasks_on_node(const std::string& tasks_per_node, int node_id);

}  // namespace hetplan::profiler
