// Blackwell GPUs and the DGX / NVL72 node presets: datasheet figures, and NVL72's 72-GPU NVLink
// domain modelled as one node, so that groups of up to 72 stay on NVLink (values by hand).
#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/hardware.h"
#include "costmodel/profile.h"
#include "costmodel/topology.h"
#include "test_util.h"

namespace hetplan {
namespace {

using testing::range;

TEST(Blackwell, GpuPresetsCarryTheirDatasheetPeaks) {
  const GpuSpec b200 = load_gpu("b200");
  EXPECT_DOUBLE_EQ(b200.peak_flops(Dtype::kBf16), 2250e12);
  EXPECT_DOUBLE_EQ(b200.peak_flops(Dtype::kFp8), 4500e12);
  EXPECT_DOUBLE_EQ(b200.peak_flops(Dtype::kFp4), 9000e12);
  EXPECT_DOUBLE_EQ(b200.memory_bytes, 180.0 * (1ull << 30));
  EXPECT_EQ(b200.sm_count, 148);
  EXPECT_DOUBLE_EQ(load_gpu("gb200").peak_flops(Dtype::kFp4), 10000e12);
  EXPECT_DOUBLE_EQ(load_gpu("gb300").peak_flops(Dtype::kFp4), 15000e12);
  EXPECT_DOUBLE_EQ(load_gpu("b300").peak_flops(Dtype::kFp4), 14000e12);
  // GPUs without fp4 units have none (and run fp4 GEMMs as fp8 where they have those).
  EXPECT_FALSE(load_gpu("h100-sxm").supports(Dtype::kFp4));
  EXPECT_FALSE(load_gpu("a100-80gb").supports(Dtype::kFp4));
}

TEST(Blackwell, NodePresets) {
  const NodeSpec dgx = load_node("dgx-h100");
  EXPECT_EQ(dgx.gpus, 8);
  EXPECT_DOUBLE_EQ(dgx.network_gbit, 3200);  // 8 x 400 Gb/s InfiniBand
  EXPECT_EQ(load_node("dgx-h200").gpu.name, "h200");
  EXPECT_DOUBLE_EQ(load_node("dgx-b200").intra_GBps, 900);
  EXPECT_DOUBLE_EQ(load_node("dgx-b300").network_gbit, 6400);
  const NodeSpec nvl = load_node("gb200-nvl72");
  EXPECT_EQ(nvl.gpus, 72);
  EXPECT_EQ(nvl.fabric, Fabric::kNvswitch);
  EXPECT_DOUBLE_EQ(nvl.network_gbit, 72 * 400.0);
  EXPECT_EQ(load_node("gb300-nvl72").gpu.name, "gb300");
}

TEST(Blackwell, Nvl72KeepsGroupsOfUpTo72OnNvlink) {
  const ClusterSpec cluster = load_cluster("gb200-nvl72:2");
  EXPECT_EQ(cluster.num_gpus(), 144);
  const auto devices = cluster_devices(cluster);
  const CostModel cost(
      fit_profile({load_calibration(default_calibration_dir() / "datasheet" / "gb200.json")}),
      cluster);
  // 64 GPUs of one rack: one node, NVLink through the switch trays at 900 GB/s each way.
  const CommGroup inside = make_comm_group(cluster, devices, range(0, 64));
  EXPECT_EQ(inside.nodes, 1);
  EXPECT_EQ(inside.link(), "nvswitch");
  EXPECT_DOUBLE_EQ(inside.intra_GBps, 900);
  // The prior: a ring all-reduce of 1 GB, 2 x 63 steps of 3 us plus 1e9 x 2 x 63/64 bytes over
  // 900 GB/s x 0.8 = 126 x 3e-6 + 2.734375e-3 = 3.112375e-3 s.
  EXPECT_NEAR(cost.collective_s(CollectiveKind::kAllReduce, 1e9, inside), 3.112375e-3, 1e-9);
  // A 72-GPU expert group is still inside the rack.
  EXPECT_EQ(make_comm_group(cluster, devices, range(0, 72)).nodes, 1);
  // One GPU in each rack: across the network, 400 Gb/s per GPU and 72 per rack (3600 GB/s a
  // node). An all-reduce of 1 GB over 2 nodes moves 2 x 1/2 x 1e9 bytes through each node's
  // network at 3600e9 x 0.85 B/s, after 2 x (2 - 1) steps of 5 us: 1e-5 + 3.2679738e-4 s.
  const CommGroup across = make_comm_group(cluster, devices, {0, 72});
  EXPECT_EQ(across.nodes, 2);
  EXPECT_EQ(across.link(), "net");
  EXPECT_NEAR(cost.collective_s(CollectiveKind::kAllReduce, 1e9, across),
              2 * 5e-6 + 1e9 / (3600e9 * 0.85), 1e-12);
  // The same 16 GPUs on DGX B200s span two nodes.
  const ClusterSpec dgx = load_cluster("dgx-b200:2");
  EXPECT_EQ(make_comm_group(dgx, cluster_devices(dgx), range(0, 16)).nodes, 2);
}

}  // namespace
}  // namespace hetplan
