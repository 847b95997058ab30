#include "profiler/common/collective_plan.h"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "costmodel/errors.h"
#include "test_util.h"

namespace hetplan::profiler {
namespace {

ProcessInfo process(int rank, const std::string& host, int gpus, const std::string& name) {
  ProcessInfo p;
  p.rank = rank;
  p.host = host;
  for (int i = 0; i < gpus; ++i)
    p.gpus.push_back({name, "0000:" + std::to_string(i) + ":00.0", int64_t{80} << 30});
  return p;
}

TEST(CollectivePlan, SizesFollowTheSweepSteps) {
  CollectiveOptions o;
  const auto full = collective_sizes(o);
  ASSERT_EQ(full.size(), 21u);  // 2^10 .. 2^30
  EXPECT_DOUBLE_EQ(full.front(), 1024);
  EXPECT_DOUBLE_EQ(full.back(), std::ldexp(1.0, 30));
  o.quick = true;
  const auto quick = collective_sizes(o);
  // 2^10, 2^13, ..., 2^28 (x8), then 1 GiB itself: the largest size is always measured.
  ASSERT_EQ(quick.size(), 8u);
  EXPECT_DOUBLE_EQ(quick[6], std::ldexp(1.0, 28));
  EXPECT_DOUBLE_EQ(quick[7], std::ldexp(1.0, 30));
  EXPECT_EQ(planned_dtypes(o).size(), 1u);
  EXPECT_EQ(planned_ops(o).size(), 6u);
  o.quick = false;
  // p2p and host-device: 4 KiB .. 128 MiB in x8 steps, then 256 MiB.
  EXPECT_EQ(p2p_sizes(o).size(), 7u);
  o.quick = true;
  EXPECT_EQ(p2p_sizes(o), (std::vector<double>{4096, 262144, 16777216, 268435456}));
}

TEST(CollectivePlan, OneNodeOfEightGpus) {
  const Layout layout = make_layout({process(0, "a", 8, "NVIDIA H100 80GB HBM3")});
  CollectiveOptions o;
  auto groups = plan_groups(layout, o, "nvswitch");
  ASSERT_EQ(groups.size(), 7u);  // 2..8 GPUs
  EXPECT_EQ(groups[0].members, (std::vector<int>{0, 1}));
  EXPECT_EQ(groups[6].gpus_per_node, 8);
  EXPECT_EQ(groups[6].link, "nvswitch");
  EXPECT_EQ(groups[6].gpus, std::vector<std::string>{"NVIDIA H100 80GB HBM3"});
  o.quick = true;
  groups = plan_groups(layout, o, "nvswitch");
  ASSERT_EQ(groups.size(), 3u);  // 2, 4, 8
  EXPECT_EQ(groups[1].members.size(), 4u);
  EXPECT_EQ(plan_p2p_pairs(layout).size(), 56u);  // 8 x 7 ordered pairs
}

TEST(CollectivePlan, SingleGpuMeasuresItself) {
  const Layout layout = make_layout({process(0, "a", 1, "H100")});
  const auto groups = plan_groups(layout, {}, "self");
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].shape, "self");
  EXPECT_EQ(plan_p2p_pairs(layout), (std::vector<std::pair<int, int>>{{0, 0}}));
}

TEST(CollectivePlan, TwoNodesOfDifferentKinds) {
  // mpirun --map-by node: ranks alternate between hosts; nodes still group by host.
  const Layout layout = make_layout({process(0, "a", 4, "A100"), process(1, "b", 4, "H100")});
  EXPECT_EQ(layout.hosts.size(), 2u);
  const auto groups = plan_groups(layout, {}, "ignored");
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].shape, "one_per_node");
  EXPECT_EQ(groups[0].members, (std::vector<int>{0, 4}));
  EXPECT_EQ(groups[0].link, "net");
  EXPECT_EQ(groups[1].members.size(), 8u);
  EXPECT_EQ(groups[1].nodes, 2);
  EXPECT_EQ(groups[1].gpus_per_node, 4);
  EXPECT_EQ(groups[1].gpus, (std::vector<std::string>{"A100", "H100"}));
  EXPECT_EQ(plan_p2p_pairs(layout), (std::vector<std::pair<int, int>>{{0, 4}, {4, 0}}));
}

// Rank 0 knows the file's provenance before it measures (what its journal's context record holds).
TEST(CollectivePlan, TheRunIsDescribedByItsFirstGpuAndItsNodes) {
  const Layout layout = make_layout(
      {process(0, "a", 1, "NVIDIA H100 80GB HBM3"), process(1, "b", 1, "NVIDIA A100-SXM4-80GB")});
  Provenance p;
  p.command = "hetplan calibrate-collectives --out net.json";
  describe_collective_run(layout, "unknown", p);
  EXPECT_EQ(p.source, "measured");
  EXPECT_EQ(p.gpu_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(p.gpu_type, "h100-sxm");
  EXPECT_EQ(p.memory_bytes, int64_t{80} << 30);
  EXPECT_EQ(p.gpu_count, 2);
  EXPECT_EQ(p.host, "a");
  EXPECT_EQ(p.date.size(), 20u) << p.date;  // 2026-11-24T10:00:00Z
  EXPECT_FALSE(p.hetplan_version.empty());
  EXPECT_EQ(p.notes, "collectives: 2 processes, 2 GPUs on 2 nodes (a, b); intra-node link unknown");
  // What was set already stays (calibrate --collectives fills its own), and notes add up.
  Provenance set;
  set.date = "2026-11-24T10:00:00Z";
  set.host = "login";
  set.notes = "first";
  describe_collective_run(layout, "nvswitch", set);
  EXPECT_EQ(set.date, "2026-11-24T10:00:00Z");
  EXPECT_EQ(set.host, "login");
  EXPECT_EQ(set.notes.rfind("first; collectives: 2 processes", 0), 0u) << set.notes;
}

TEST(CollectivePlan, NoGpuAndSharedGpuAreClearFailures) {
  ProcessInfo empty = process(1, "b", 0, "");
  empty.error = "cudaGetDeviceCount: no CUDA-capable device is detected";
  try {
    make_layout({process(0, "a", 1, "H100"), empty});
    FAIL();
  } catch (const RuntimeFailure& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("no GPU: 1 of 2 processes"), std::string::npos) << what;
    EXPECT_NE(what.find("rank 1 on b: cudaGetDeviceCount"), std::string::npos) << what;
  }
  EXPECT_THROW(make_layout({process(0, "a", 1, "H100"), process(1, "a", 1, "H100")}),
               RuntimeFailure);
}

TEST(CollectivePlan, RanksCombineSlowestPerBatch) {
  const Layout layout = make_layout({process(0, "a", 1, "A100"), process(1, "b", 1, "A100")});
  const GroupSpec g = plan_groups(layout, {}, "")[0];
  RankRecord r0{true, "", 1 << 20, {1e-3, 2e-3, 3e-3}};
  RankRecord r1{true, "", 1 << 20, {1.5e-3, 1e-3, 3.5e-3}};
  const CollectiveMeasurement m =
      combine_collective(CollectiveKind::kAllReduce, Dtype::kBf16, g, {r0, r1}, {});
  ASSERT_TRUE(m.ok);
  EXPECT_EQ(m.time_s.count, 3);
  EXPECT_DOUBLE_EQ(m.time_s.median, 2e-3);  // batches: max(1, 1.5), max(2, 1), max(3, 3.5) ms
  EXPECT_DOUBLE_EQ(m.time_s.max, 3.5e-3);
  // algbw 1 MiB / 2 ms = 0.524288 GB/s; all-reduce busbw x 2(n-1)/n = 1 for n = 2.
  EXPECT_DOUBLE_EQ(m.algbw_GBps, 0.524288);
  EXPECT_DOUBLE_EQ(m.busbw_GBps, 0.524288);
  EXPECT_EQ(m.nodes, 2);
  EXPECT_EQ(m.link, "net");
  RankRecord bad{false, "NCCL error: remote process exited", 1 << 20, {}};
  const CollectiveMeasurement f =
      combine_collective(CollectiveKind::kAllReduce, Dtype::kBf16, g, {r0, bad}, {});
  EXPECT_FALSE(f.ok);
  EXPECT_EQ(f.error, "rank 1: NCCL error: remote process exited");
  // Round trip through the per-rank journal form.
  const RankRecord back = rank_record_from_json(to_json(r1));
  EXPECT_EQ(back.samples_s, r1.samples_s);
  EXPECT_TRUE(back.ok);
}

TEST(CollectivePlan, PairsCombineSlowestPerBatchAndAFailedRankIsNamed) {
  RankRecord sender{true, "", 1 << 26, {2e-3, 1e-3, 1e-3}};
  RankRecord receiver{true, "", 1 << 26, {1e-3, 1.5e-3, 1e-3}};
  const P2pMeasurement m = combine_p2p(0, 9, "net", {"H100"}, {sender, receiver});
  EXPECT_EQ(m.src, 0);
  EXPECT_EQ(m.dst, 9);
  EXPECT_EQ(m.link, "net");
  EXPECT_EQ(m.time_s.count, 3);
  EXPECT_DOUBLE_EQ(m.time_s.median, 1.5e-3);  // batches: max(2, 1), max(1, 1.5), max(1, 1) ms
  EXPECT_DOUBLE_EQ(m.GBps, 67108864 / 1.5e-3 / 1e9);
  // A process with no GPU in the pair times nothing and does not count.
  EXPECT_DOUBLE_EQ(combine_p2p(0, 9, "net", {"H100"}, {sender, RankRecord{}, receiver}).GBps,
                   m.GBps);
  const RankRecord lost{false, "NCCL error: unhandled system error", 1 << 26, {}};
  const RankRecord short_run{true, "", 1 << 26, {1e-3}};
  const std::string failed = testing::error_of<RuntimeFailure>([&] {
    combine_p2p(0, 9, "net", {"H100"}, {sender, lost, short_run});
  });
  EXPECT_EQ(failed,
            "p2p 0 -> 9: rank 1: NCCL error: unhandled system error; rank 2 timed 1 batches, "
            "others 3");
  EXPECT_EQ(testing::error_of<RuntimeFailure>(
                [&] { combine_p2p(1, 1, "self", {"H100"}, {RankRecord{}}); }),
            "p2p 1 -> 1: no rank timed this measurement");
}

TEST(CollectivePlan, ProcessesDescribeThemselvesThroughTheRendezvousAsJson) {
  ProcessInfo p = process(3, "node-b", 2, "NVIDIA H100 80GB HBM3");
  ProcessInfo back = process_info_from_json(Json::parse(to_json(p).dump()));
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.host, "node-b");
  ASSERT_EQ(back.gpus.size(), 2u);
  EXPECT_EQ(back.gpus[1].bus_id, "0000:1:00.0");
  EXPECT_EQ(back.gpus[1].memory_bytes, int64_t{80} << 30);
  EXPECT_EQ(back.error, "");
  p = process(1, "node-c", 0, "");
  p.error = "cudaGetDeviceCount: no CUDA-capable device is detected";
  back = process_info_from_json(Json::parse(to_json(p).dump()));
  EXPECT_TRUE(back.gpus.empty());
  EXPECT_EQ(back.error, p.error);
}

TEST(CollectivePlan, GroupsAreLabelledByTheirShape) {
  const Layout one = make_layout({process(0, "a", 8, "H100")});
  CollectiveOptions quick;
  quick.quick = true;
  const auto inside = plan_groups(one, quick, "nvswitch");
  EXPECT_EQ(inside[0].label(), "intra 2 GPUs");
  EXPECT_EQ(plan_groups(make_layout({process(0, "a", 1, "H100")}), {}, "self")[0].label(),
            "self 1 GPU");
  const auto across = plan_groups(
      make_layout({process(0, "a", 2, "H100"), process(1, "b", 2, "H100")}), quick, "nvlink");
  std::vector<std::string> labels;
  for (const auto& g : across) labels.push_back(g.label());
  EXPECT_NE(std::find(labels.begin(), labels.end(), "2 nodes x 1 GPU"), labels.end());
  EXPECT_NE(std::find(labels.begin(), labels.end(), "2 nodes x 2 GPUs"), labels.end());
}

TEST(CollectivePlan, KeysAreStableAcrossRanks) {
  const Layout layout = make_layout({process(0, "a", 2, "H100")});
  const GroupSpec g = plan_groups(layout, {}, "nvlink")[0];
  EXPECT_EQ(collective_key(CollectiveKind::kAllGather, Dtype::kFp32, g, 4096),
            "collective/all_gather/fp32/intra/n1x2/g2/4096");
  EXPECT_EQ(p2p_key(0, 1, 65536), "p2p/0-1/65536");
  EXPECT_EQ(host_device_key("d2h", false, 4096), "host_device/d2h/pageable/4096");
}

}  // namespace
}  // namespace hetplan::profiler
