// What `hetplan calibrate --collectives` measures, decided on the CPU: the processes' GPUs laid
// out as nodes, the groups (shapes) to measure, message sizes, and how the per-rank results of one
// measurement combine into the calibration file. The CUDA half is profiler/collectives/.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/document.h"

namespace hetplan::profiler {

// Options of the collective sweep (the calibrate command's --collectives flags).
struct CollectiveOptions {
  std::filesystem::path out_path;  // the calibration file; per-rank journals live beside it
  bool resume = false;
  bool quick = false;
  std::vector<CollectiveKind> ops;  // empty: all six
  std::vector<Dtype> dtypes;        // empty: bf16 and fp32 (bf16 only with quick)
  double min_bytes = 1024;
  double max_bytes = double(1 << 30);
  std::string intra_link;   // link name for groups inside a node; empty: detected
  bool p2p = true;          // the pairwise p2p matrix
  bool host_device = true;  // host-device copies (process 0, GPU 0)
  double timeout_s = 120;   // a communicator init or one measurement longer than this is a hang
  int max_gpus = 0;         // use at most this many GPUs per process; 0: all visible
  // Rank 0 also journals the combined measurements to `<out_path>.journal`, with the run's
  // provenance and, once it has measured all it planned, its end: the journal `calibrate
  // --from-journal` turns into the file on any machine (calibrate-collectives). `calibrate
  // --collectives` passes its own run's journal instead.
  bool keep_journal = false;
};

// One GPU as its process sees it.
struct GpuInfo {
  std::string name;
  std::string bus_id;
  int64_t memory_bytes = 0;
};

// What each process reports about itself before the sweep.
struct ProcessInfo {
  int rank = 0;
  std::string host;
  std::vector<GpuInfo> gpus;
  std::string error;  // why it has no GPU, when it has none
};
Json to_json(const ProcessInfo& p);
ProcessInfo process_info_from_json(const Json& j);

// The job's GPUs in global rank order (process by process), grouped into nodes by host.
struct Layout {
  struct Gpu {
    int process = 0;
    int local = 0;  // index among its process's GPUs
    int node = 0;
    std::string name;
  };
  std::vector<ProcessInfo> processes;
  std::vector<Gpu> gpus;
  std::vector<std::string> hosts;  // node index -> host name
  int gpus_on_node(int node) const;
};
// Builds the layout. Throws RuntimeFailure when a process has no GPU (naming every such process
// and why) or two processes on one host claim the same GPU.
Layout make_layout(const std::vector<ProcessInfo>& processes);

// Completes the provenance of a sweep over `layout`, as rank 0 knows it before it measures: the
// GPU kind, name and memory of the first GPU (the file's kind), the GPU count, the first host,
// the date and hetplan's version where they are not set yet, and a note naming the processes,
// nodes and the intra-node link. NCCL's version is the caller's (this half has no NCCL).
void describe_collective_run(const Layout& layout, const std::string& intra_link, Provenance& p);

// A group of GPUs measured together.
struct GroupSpec {
  std::string shape;         // "self", "intra", "one_per_node", "whole_nodes"
  std::vector<int> members;  // global GPU indices; NCCL rank i is members[i]
  int64_t nodes = 1;
  int64_t gpus_per_node = 1;
  std::string link;
  std::vector<std::string> gpus;  // sorted unique GPU names
  std::string label() const;      // "intra 4 GPUs", "2 nodes x 8 GPUs"
};

// Message sizes from `min_bytes` to `max_bytes` in steps of `factor` (max included).
std::vector<double> sweep_sizes(double min_bytes, double max_bytes, double factor);
// The sizes of the collective sweep: x2 steps, or x8 with quick.
std::vector<double> collective_sizes(const CollectiveOptions& options);
// Sizes of the p2p matrix and host-device copies (latency end, bandwidth end).
std::vector<double> p2p_sizes(const CollectiveOptions& options);
std::vector<CollectiveKind> planned_ops(const CollectiveOptions& options);
std::vector<Dtype> planned_dtypes(const CollectiveOptions& options);

// Groups to measure: inside one node every size 2..G (quick: powers of two and G) on the first
// GPUs; a single GPU alone ("self"); across nodes one GPU per node and whole nodes.
std::vector<GroupSpec> plan_groups(const Layout& layout, const CollectiveOptions& options,
                                   const std::string& intra_link);
// Ordered pairs of the p2p matrix: every pair inside a single node; GPU 0 of every node pair across
// nodes; (0, 0) for a single GPU.
std::vector<std::pair<int, int>> plan_p2p_pairs(const Layout& layout);

// Journal keys, identical on every rank.
std::string collective_key(CollectiveKind op, Dtype dtype, const GroupSpec& group, double bytes);
std::string p2p_key(int src, int dst, double bytes);
std::string host_device_key(const std::string& direction, bool pinned, double bytes);

// One process's result for one measurement (journalled by that process).
struct RankRecord {
  bool ok = true;
  std::string error;
  double bytes = 0;               // bytes actually moved (rounded to whole elements per rank)
  std::vector<double> samples_s;  // per timed batch: the slowest of this process's GPUs
};
Json to_json(const RankRecord& r);
RankRecord rank_record_from_json(const Json& j);
// Combines the processes' records: per batch the slowest rank counts (as nccl-tests takes the
// maximum over ranks); any failed rank fails the measurement, naming the rank and its error.
CollectiveMeasurement combine_collective(CollectiveKind op, Dtype dtype, const GroupSpec& group,
                                         const std::vector<RankRecord>& records,
                                         const std::vector<int>& ranks);
P2pMeasurement combine_p2p(int src, int dst, const std::string& link,
                           const std::vector<std::string>& gpus,
                           const std::vector<RankRecord>& records);

// Progress callback: measurements done, total, what runs now.
using CollectiveProgressFn =
    std::function<void(size_t done, size_t total, const std::string& what)>;

}  // namespace hetplan::profiler
