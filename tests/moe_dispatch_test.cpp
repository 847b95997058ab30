// The experts' token exchange: the all-to-all as NCCL runs it (every peer at once, so the busier of
// the GPUs' links and the node's network bounds it), the flex dispatcher's one copy of a token
// per destination node and GPU (DeepEP, HybridEP), and the host sync of an MoE layer's forward.
// Values by hand in the comments.
#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/hardware.h"
#include "costmodel/layer_ops.h"
#include "costmodel/profile.h"
#include "costmodel/topology.h"
#include "search/eval/steps.h"
#include "test_util.h"

namespace hetplan {
namespace {

using testing::range;

TEST(MoeDispatch, TouchedGroupsOfATokensTopK) {
  // 8 experts in 2 groups of 4, top-2: a group holds neither pick with probability
  // (4/8)(3/7) = 3/14, so 2 x 11/14 = 11/7 groups are touched.
  EXPECT_NEAR(touched_groups({8, 2}, 2), 11.0 / 7.0, 1e-12);
  // In 4 groups of 2: (6/8)(5/7) = 15/28 untouched, 4 x 13/28 = 13/7 touched.
  EXPECT_NEAR(touched_groups({8, 2}, 4), 13.0 / 7.0, 1e-12);
  // One group is always touched; one pick touches one group.
  EXPECT_DOUBLE_EQ(touched_groups({8, 2}, 1), 1.0);
  EXPECT_NEAR(touched_groups({8, 1}, 4), 1.0, 1e-12);
  // Every group holds a pick when k reaches past the other groups' experts.
  EXPECT_NEAR(touched_groups({8, 5}, 2), 2.0, 1e-12);
}

TEST(MoeDispatch, AllToAllTrafficOverLinksAndNetwork) {
  const ClusterSpec cluster = load_cluster("dgx-h100:2");
  const CommGroup g = make_comm_group(cluster, cluster_devices(cluster), range(0, 16));
  ASSERT_EQ(g.nodes, 2);
  ASSERT_EQ(g.per_node, 8);
  // Every copy sent: each GPU sends 7/16 of its 1 GB to its node's other GPUs; each node's 8 GPUs
  // send 8/16 of theirs to the other node, 8 x 0.5 GB = 4 GB.
  const AllToAllTraffic plain = all_to_all_traffic(1e9, g, nullptr);
  EXPECT_DOUBLE_EQ(plain.gpu_link_bytes, 1e9 * 7 / 16);
  EXPECT_DOUBLE_EQ(plain.node_network_bytes, 4e9);
  // 8 experts, top-2: 1 GB of copies is 0.5 GB of tokens. Each token reaches 11/7 nodes, half of
  // them the other one: 8 x 0.5e9 x 11/7 x 1/2 bytes leave a node. Over GPUs (16 groups of half
  // an expert: each pick its own GPU, 2 GPUs touched), 7/8 of them are not the entry GPU.
  const TokenRouting routing{8, 2};
  const AllToAllTraffic dedup = all_to_all_traffic(1e9, g, &routing);
  EXPECT_NEAR(dedup.node_network_bytes, 8 * 0.5e9 * (11.0 / 7.0) / 2, 1);
  EXPECT_NEAR(dedup.gpu_link_bytes, 0.5e9 * touched_groups({8, 2}, 16) * 7 / 8, 1);
}

TEST(MoeDispatch, AllToAllAcrossNodesIsTheBusierResourceNotTheSum) {
  const ClusterSpec cluster = load_cluster("dgx-h100:2");
  const auto devices = cluster_devices(cluster);
  const CostModel cost(
      fit_profile({load_calibration(default_calibration_dir() / "datasheet" / "h100-sxm.json")}),
      cluster);
  const CommGroup across = make_comm_group(cluster, devices, range(0, 16));
  // The network: one step of 5 us and 4 GB through 3200 Gb/s (400 GB/s) x 0.85; the NVLink part,
  // 2 us and 4.375e8 B at 450 GB/s x 0.8 (1.2 ms), runs beside it.
  EXPECT_NEAR(cost.collective_s(CollectiveKind::kAllToAll, 1e9, across), 5e-6 + 4e9 / 340e9, 1e-12);
  // Inside one node: 7/8 of 1 GB over the GPU's NVLink.
  const CommGroup inside = make_comm_group(cluster, devices, range(0, 8));
  EXPECT_NEAR(cost.collective_s(CollectiveKind::kAllToAll, 1e9, inside), 2e-6 + 0.875e9 / 360e9,
              1e-12);
}

TEST(MoeDispatch, FlexSendsATokenOncePerDestination) {
  const LayerSpec moe = testing::moe_block(8, 2);
  TransformerLayer b = *moe.block();
  LayerShape s;
  s.ep = 4;
  s.dispatcher = MoeDispatcher::kAllToAll;
  const LayerWork plain = layer_work(moe, s);
  s.dispatcher = MoeDispatcher::kFlex;
  const LayerWork flex = layer_work(moe, s);
  for (const char* name :
       {"moe_dispatch_a2a", "moe_dispatch_a2a_grad", "moe_combine_a2a", "moe_combine_a2a_grad"}) {
    const auto find = [&](const LayerWork& w) -> const CommOp* {
      for (const auto& c : w.comms)
        if (c.name == name) return &c;
      return nullptr;
    };
    ASSERT_NE(find(plain), nullptr) << name;
    ASSERT_NE(find(flex), nullptr) << name;
    // The same copies; flex's carry the routing that deduplicates them.
    EXPECT_DOUBLE_EQ(find(flex)->bytes, find(plain)->bytes);
    EXPECT_EQ(find(plain)->dedup_experts, 0);
    EXPECT_EQ(find(flex)->dedup_experts, 8);
    EXPECT_EQ(find(flex)->dedup_top_k, 2);
  }
  // One host sync in the forward of an MoE layer (the experts' token counts), none in a dense one.
  EXPECT_EQ(plain.host_syncs, 1);
  b.experts = 1;
  b.top_k = 1;
  EXPECT_EQ(layer_work(LayerSpec{"dense", 1024, 1024, b}, LayerShape{}).host_syncs, 0);
}

TEST(MoeDispatch, HostSyncStallsTheForwardForTheHostsExcess) {
  LayerWork w;
  w.memory_ops.push_back({"layernorm_fwd", Pass::kForward, 1e6});
  w.memory_ops.push_back({"layernorm_fwd", Pass::kForward, 1e6});
  w.memory_ops.push_back({"layernorm_bwd", Pass::kBackwardInput, 1e6});
  w.host_syncs = 1;
  // Two forward kernels at 30 us of host each: 60 us against the device's 50 us forward.
  LayerTimes t;
  t.pass_s[0] = 50e-6;
  t.pass_s[1] = 100e-6;
  eval::host_sync_stall(w, Recompute::kNone, 30e-6, t);
  EXPECT_NEAR(t.host_sync_s, 10e-6, 1e-15);
  EXPECT_NEAR(t.pass_s[0], 60e-6, 1e-15);
  EXPECT_DOUBLE_EQ(t.pass_s[1], 100e-6);
  // A device slower than its host waits for nothing; no sync, no stall.
  LayerTimes slow;
  slow.pass_s[0] = 80e-6;
  eval::host_sync_stall(w, Recompute::kNone, 30e-6, slow);
  EXPECT_EQ(slow.host_sync_s, 0);
  w.host_syncs = 0;
  LayerTimes none;
  eval::host_sync_stall(w, Recompute::kNone, 30e-6, none);
  EXPECT_EQ(none.host_sync_s, 0);
}

}  // namespace
}  // namespace hetplan
