// A small TCP rendezvous for the processes of one calibration: rank 0 listens, every other rank
// connects once, and they exchange byte strings (NCCL unique ids, GPU inventories, results) through
// rank 0. It replaces MPI, which the hetplan binary must not link. Every wait has a deadline, so a
// rank that dies or never starts turns into a RuntimeFailure naming it instead of a hang.
#pragma once

#include <string>
#include <vector>

#include "profiler/common/launcher.h"

namespace hetplan::profiler {

struct RendezvousTimeouts {
  double connect_s = 60;     // for all ranks to arrive (HETPLAN_RENDEZVOUS_CONNECT_S)
  double operation_s = 900;  // for one exchange, i.e. the slowest rank's measurement
};

// Reads HETPLAN_RENDEZVOUS_CONNECT_S and HETPLAN_RENDEZVOUS_TIMEOUT_S over the defaults.
RendezvousTimeouts rendezvous_timeouts(const Environment& env);

class Rendezvous {
 public:
  // Connects the ranks of `launch` (a no-op for a single process). Throws RuntimeFailure.
  Rendezvous(const LaunchInfo& launch, const RendezvousAddress& address,
             RendezvousTimeouts timeouts = {});
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Every rank contributes one string and receives all of them, indexed by rank.
  std::vector<std::string> all_gather(const std::string& mine);
  // Rank 0's `value` on every rank (other ranks' argument is ignored).
  std::string broadcast(const std::string& value);
  void barrier() { all_gather(""); }

 private:
  int rank_ = 0;
  int size_ = 1;
  RendezvousTimeouts timeouts_;
  int listen_fd_ = -1;
  std::vector<int> peers_;  // rank 0: fd per rank (index 0 unused); others: peers_[0] = rank 0
};

}  // namespace hetplan::profiler
