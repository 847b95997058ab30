// GPU tests of the collective sweep (label gpu): the single-GPU paths (host-device copies, a
// 1-rank communicator, send/recv to itself) and, where more than one GPU is visible, a small
// multi-GPU sweep. Each skips cleanly without a GPU.
#include <cuda_runtime_api.h>

#include <unistd.h>
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "costmodel/calibration.h"
#include "costmodel/fit_collectives.h"
#include "costmodel/journal.h"
#include "profiler/collectives/calibrate_collectives.h"
#include "profiler/collectives/host_device.h"
#include "profiler/common/records.h"

namespace hetplan::profiler {
namespace {

int gpu_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::filesystem::path temp(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("hetplan_gpu_" + std::to_string(::getpid()) + "_" + name);
}

CollectiveOptions small_options(const std::string& name) {
  CollectiveOptions o;
  o.out_path = temp(name);
  o.quick = true;
  o.min_bytes = 4096;
  o.max_bytes = 64 << 20;
  o.timeout_s = 60;
  return o;
}

TEST(GpuCollectives, HostDeviceCopiesAreCheckedAndPlausible) {
  if (gpu_count() < 1) GTEST_SKIP() << "no GPU";
  coll::HostDeviceBench bench(0, 64 << 20);
  const coll::TimingPlan plan = coll::timing_plan(true);
  for (const char* dir : {"h2d", "d2h"}) {
    const HostDeviceMeasurement pinned = bench.measure(dir, true, 64 << 20, plan);
    const HostDeviceMeasurement pageable = bench.measure(dir, false, 64 << 20, plan);
    // PCIe 3 x16 moves ~12 GB/s, PCIe 5 x16 up to ~55 GB/s (and C2C more): a pinned copy of
    // 64 MiB slower than 2 GB/s or faster than 1000 GB/s means the timing is wrong.
    EXPECT_GT(pinned.GBps, 2) << dir;
    EXPECT_LT(pinned.GBps, 1000) << dir;
    EXPECT_GT(pageable.GBps, 0.2) << dir;
    EXPECT_EQ(pinned.time_s.count, plan.batches);
  }
}

TEST(GpuCollectives, SingleGpuSweepMeasuresEveryCollective) {
  if (gpu_count() < 1) GTEST_SKIP() << "no GPU";
  CollectiveOptions o = small_options("single.json");
  o.max_gpus = 1;
  o.keep_journal = true;
  CalibrationFile out;
  out.context.source = "measured";
  const CollectiveRunSummary s = run_collective_calibration(o, out, nullptr, {});
  EXPECT_TRUE(s.writer);
  EXPECT_EQ(s.failed, 0);
  // 6 collectives x bf16 x sizes 4 KiB, 32 KiB, 256 KiB, 2 MiB, 16 MiB, 64 MiB on a 1-rank group.
  EXPECT_EQ(out.collectives.size(), 6u * 6u);
  for (const auto& m : out.collectives) {
    EXPECT_TRUE(m.ok) << to_string(m.op) << " " << m.bytes << ": " << m.error;
    EXPECT_EQ(m.group_size, 1);
    EXPECT_EQ(m.link, "self");
    EXPECT_GT(m.time_s.median, 0);
  }
  EXPECT_FALSE(out.p2p.empty());  // send/recv to itself
  EXPECT_EQ(out.p2p[0].src, out.p2p[0].dst);
  EXPECT_FALSE(out.host_device.empty());
  // Resume repeats nothing: every measurement comes from the journal.
  CalibrationFile again;
  o.resume = true;
  const CollectiveRunSummary r = run_collective_calibration(o, again, nullptr, {});
  EXPECT_EQ(r.measured, 0);
  EXPECT_EQ(again.collectives.size(), out.collectives.size());
  // Rank 0's own journal (calibrate-collectives keeps it) is the file on any machine.
  const auto journal = Journal::read_only(o.out_path.string() + ".journal");
  const Assembly a = assemble_from_journal(*journal, "hetplan calibrate --from-journal");
  EXPECT_TRUE(a.last_run_finished);
  EXPECT_EQ(a.file.collectives.size(), out.collectives.size());
  EXPECT_EQ(a.file.p2p.size(), out.p2p.size());
  EXPECT_EQ(a.file.host_device.size(), out.host_device.size());
  EXPECT_EQ(a.file.context.gpu_type, out.context.gpu_type);
  EXPECT_FALSE(a.file.context.nccl.empty());
  const CommunicationFit fit = fit_communication(out);
  EXPECT_FALSE(fit.collectives.empty());
}

TEST(GpuCollectives, MultiGpuSweepWithinTheNode) {
  const int n = gpu_count();
  if (n < 2) GTEST_SKIP() << "needs 2 or more GPUs, found " << n;
  CollectiveOptions o = small_options("multi.json");
  o.ops = {CollectiveKind::kAllReduce, CollectiveKind::kAllGather};
  o.max_bytes = 16 << 20;
  CalibrationFile out;
  out.context.source = "measured";
  const CollectiveRunSummary s = run_collective_calibration(o, out, nullptr, {});
  EXPECT_EQ(s.failed, 0);
  bool widest = false;
  for (const auto& m : out.collectives) {
    EXPECT_TRUE(m.ok) << m.error;
    widest = widest || m.group_size == n;
    // busbw follows the nccl-tests factor from the measured algbw.
    EXPECT_NEAR(m.busbw_GBps, m.algbw_GBps * bus_bandwidth_factor(m.op, m.group_size), 1e-9);
  }
  EXPECT_TRUE(widest);
  EXPECT_EQ(out.p2p.size(), static_cast<size_t>(n * (n - 1)) * p2p_sizes(o).size());
}

}  // namespace
}  // namespace hetplan::profiler
