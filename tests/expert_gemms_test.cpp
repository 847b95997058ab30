// How a framework runs the routed experts' GEMMs (FrameworkSpec::expert_gemms, docs/frameworks.md):
// one grouped kernel, or one GEMM per local expert over a few streams, with what each costs in
// device time and in kernels the host issues.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/framework.h"
#include "costmodel/hardware.h"
#include "costmodel/layer_ops.h"
#include "costmodel/profile.h"
#include "test_util.h"

namespace hetplan {
namespace {

using testing::contains;
using testing::error_of;

// An MoE block of 16 experts, top-2, over 1024 tokens, with one shared expert.
LayerSpec moe_block() {
  const LayerSpec l = testing::moe_block(16, 2);
  TransformerLayer b = *l.block();
  b.shared_experts = 1;
  b.shared_ffn_hidden = 512;
  return {"block0", 1024, 1024, b};
}

const GemmOp* find_gemm(const LayerWork& w, const std::string& name, Pass pass) {
  for (const auto& g : w.gemms)
    if (g.name == name && g.pass == pass) return &g;
  return nullptr;
}

TEST(ExpertGemms, PresetsSayHowTheirFrameworksRunThem) {
  const FrameworkSpec mc = load_framework("megatron-core");
  EXPECT_EQ(mc.expert_gemms.kernels, ExpertGemmKernels::kPerExpert);
  EXPECT_EQ(mc.expert_gemms.streams, 4);
  const FrameworkSpec ds = load_framework("deepspeed");
  EXPECT_EQ(ds.expert_gemms.kernels, ExpertGemmKernels::kPerExpert);
  EXPECT_EQ(ds.expert_gemms.streams, 1);
  EXPECT_EQ(load_framework("torchtitan").expert_gemms.kernels, ExpertGemmKernels::kGrouped);
  // Absent: grouped (the test fixture's and the reference harness's).
  EXPECT_EQ(load_framework("reference").expert_gemms.kernels, ExpertGemmKernels::kGrouped);
}

TEST(ExpertGemms, BadValuesNameTheKey) {
  std::ifstream in(std::string(HETPLAN_TEST_DATA) + "/framework_fixture.yaml");
  const std::string fixture((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto with = [&](const std::string& block) {
    std::string text = fixture;
    const size_t at = text.find("\nmemory:\n");
    EXPECT_NE(at, std::string::npos);
    text.insert(at + 1, block);
    text += "  expert_gemms: \"test\"\n";
    const auto path = std::filesystem::temp_directory_path() / "expert_gemms_bad.yaml";
    std::ofstream(path) << text;
    const std::string e = error_of([&] { load_framework(path.string()); });
    std::filesystem::remove(path);
    return e;
  };
  const std::string loop = with("expert_gemms: {kernels: loop}\n");
  EXPECT_TRUE(contains(loop, "expert_gemms.kernels")) << loop;
  EXPECT_TRUE(contains(loop, "per_expert")) << loop;
  const std::string streams = with("expert_gemms: {kernels: per_expert}\n");
  EXPECT_TRUE(contains(streams, "expert_gemms.streams")) << streams;
  const std::string zero = with("expert_gemms: {kernels: per_expert, streams: 0}\n");
  EXPECT_TRUE(contains(zero, "expert_gemms.streams")) << zero;
}

TEST(ExpertGemms, PerExpertGemmsAreKernelsOfTheirOwn) {
  const FrameworkSpec mc = load_framework("megatron-core");
  LayerShape s;
  s.ep = 2;  // 8 local experts
  s.dispatcher = MoeDispatcher::kAllToAll;
  const LayerWork grouped = layer_work(moe_block(), s);
  s.framework = &mc;
  const LayerWork per_expert = layer_work(moe_block(), s);
  for (Pass p : {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight}) {
    for (const char* name : {"fc1", "fc2"}) {
      const GemmOp* g = find_gemm(grouped, name, p);
      const GemmOp* e = find_gemm(per_expert, name, p);
      ASSERT_NE(g, nullptr) << name;
      ASSERT_NE(e, nullptr) << name;
      EXPECT_EQ(g->shape, e->shape);  // the same work, the same FLOPs
      EXPECT_EQ(g->shape.batch, 8);
      EXPECT_EQ(g->streams, 0);
      EXPECT_EQ(e->streams, 4);
    }
    // The shared experts and the router are one GEMM each, whoever runs them.
    EXPECT_EQ(find_gemm(per_expert, "shared_fc1", p)->streams, 0);
  }
  EXPECT_EQ(find_gemm(per_expert, "router", Pass::kForward)->streams, 0);
  // Each pass launches 7 more kernels for each of fc1 and fc2 (8 GEMMs for 1).
  const LayerKernels kg = layer_kernels(grouped, Recompute::kNone);
  const LayerKernels ke = layer_kernels(per_expert, Recompute::kNone);
  for (int p = 0; p < kNumPasses; ++p) EXPECT_DOUBLE_EQ(ke.pass[p] - kg.pass[p], 2 * 7.0) << p;
}

TEST(ExpertGemmsCost, NeverFasterThanTheBatchedKernelNorThanTheStreamsSideBySide) {
  const ClusterSpec cluster = load_cluster("dgx-h100:1");
  const GpuSpec& gpu = cluster.groups.front().node.gpu;
  const CostModel cost(
      fit_profile({load_calibration(default_calibration_dir() / "datasheet" / "h100-sxm.json")}),
      cluster);
  const auto op = [](GemmShape shape, int64_t streams) {
    GemmOp g{"fc1", Pass::kForward, shape};
    g.streams = streams;
    return g;
  };
  // Small experts: 16 GEMMs of 64 tokens each. One alone is far from filling 132 SMs, so four
  // streams side by side take a quarter of the 16 in a row, and that is above the batched kernel.
  const GemmShape small{1024, 64, 1024, 16, true, false};
  GemmShape one = small;
  one.batch = 1;
  const double batched_s = cost.gemm_s(gpu, Dtype::kBf16, small);
  const double one_s = cost.gemm_s(gpu, Dtype::kBf16, one);
  ASSERT_GT(16 * one_s / 4, batched_s);
  EXPECT_DOUBLE_EQ(cost.gemm_op_s(gpu, Dtype::kBf16, op(small, 4)), 16 * one_s / 4);
  EXPECT_DOUBLE_EQ(cost.gemm_op_s(gpu, Dtype::kBf16, op(small, 1)), 16 * one_s);
  EXPECT_DOUBLE_EQ(cost.gemm_op_s(gpu, Dtype::kBf16, op(small, 0)), batched_s);
  // More streams than GEMMs: the GEMMs all run at once, no faster than the batched kernel.
  const GemmShape two{1024, 64, 1024, 2, true, false};
  EXPECT_DOUBLE_EQ(cost.gemm_op_s(gpu, Dtype::kBf16, op(two, 4)),
                   std::max(cost.gemm_s(gpu, Dtype::kBf16, two), 2 * one_s / 2));
  // Large experts (8192 tokens each): each fills the GPU many waves over, so running them four
  // at a time gains nothing over the batched kernel, and it binds.
  const GemmShape large{4096, 8192, 4096, 4, true, false};
  GemmShape large_one = large;
  large_one.batch = 1;
  const double large_batched_s = cost.gemm_s(gpu, Dtype::kBf16, large);
  ASSERT_LT(4 * cost.gemm_s(gpu, Dtype::kBf16, large_one) / 4, large_batched_s);
  EXPECT_DOUBLE_EQ(cost.gemm_op_s(gpu, Dtype::kBf16, op(large, 4)), large_batched_s);
}

}  // namespace
}  // namespace hetplan
