// The fused attention kernel a framework runs on a GPU (FrameworkSpec::attention_kernels,
// docs/frameworks.md): Megatron-Core's Transformer Engine runs cuDNN's on Hopper, faster than the
// FlashAttention-2 that the calibration times; elsewhere, and under other frameworks, the
// calibrated kernel's time stands.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/cost_model.h"
#include "costmodel/framework.h"
#include "costmodel/hardware.h"
#include "costmodel/profile.h"
#include "search/eval/steps.h"
#include "search/strategy.h"
#include "test_util.h"

namespace hetplan {
namespace {

TEST(AttentionKernels, SpeedIsInterpolatedInLogHeadSize) {
  AttentionKernel k;
  k.forward_speed = {{64, 1.27}, {128, 1.62}};
  k.backward_speed = {{128, 1.61}};
  EXPECT_DOUBLE_EQ(k.speed(true, 64), 1.27);
  EXPECT_DOUBLE_EQ(k.speed(true, 128), 1.62);
  // 90 is log2(90/64) / log2(2) of the way from 64 to 128.
  EXPECT_NEAR(k.speed(true, 90), 1.27 + std::log2(90.0 / 64) * 0.35, 1e-12);
  // Outside the points, the nearest point's; one point is every head size's.
  EXPECT_DOUBLE_EQ(k.speed(true, 32), 1.27);
  EXPECT_DOUBLE_EQ(k.speed(true, 256), 1.62);
  EXPECT_DOUBLE_EQ(k.speed(false, 64), 1.61);
}

TEST(AttentionKernels, MegatronCoreRunsCudnnOnHopperOnly) {
  const FrameworkSpec mc = load_framework("megatron-core");
  const AttentionKernel* hopper = mc.attention_kernel(load_gpu("h100-sxm").compute_capability);
  ASSERT_NE(hopper, nullptr);
  EXPECT_EQ(hopper->kernel, "cudnn");
  EXPECT_DOUBLE_EQ(hopper->speed(true, 128), 1.62);
  EXPECT_DOUBLE_EQ(hopper->speed(false, 128), 1.61);
  EXPECT_EQ(mc.attention_kernel(load_gpu("a100-80gb").compute_capability), nullptr);
  EXPECT_EQ(mc.attention_kernel(load_gpu("b200").compute_capability), nullptr);
  EXPECT_EQ(load_framework("torchtitan").attention_kernel(9.0), nullptr);
}

TEST(AttentionKernels, CudnnShortensTheFusedAttentionByItsSpeed) {
  const FrameworkSpec mc = load_framework("megatron-core");
  const ClusterSpec h100 = load_cluster("dgx-h100:1");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), h100);
  const GpuSpec& gpu = h100.groups.front().node.gpu;
  ASSERT_EQ(cost.fit(gpu).attention_source, "torch sdpa, FLASH_ATTENTION backend");
  const LayerSpec block = testing::llama_block(4096);
  LayerShape shape;
  const LayerWork flash2 = layer_work(block, shape);
  shape.attention_kernel = mc.attention_kernel(gpu.compute_capability);
  const LayerWork cudnn = layer_work(block, shape);
  ASSERT_EQ(flash2.attention.size(), 2u);
  ASSERT_EQ(cudnn.attention.size(), 2u);
  const int64_t hd = flash2.attention[0].head_dim;
  for (size_t i = 0; i < 2; ++i) {
    const bool forward = i == 0;
    const double launch = cost.fit(gpu).launch_s;
    const double a = cost.attention_s(gpu, Dtype::kBf16, flash2.attention[i]) - launch;
    const double b = cost.attention_s(gpu, Dtype::kBf16, cudnn.attention[i]) - launch;
    EXPECT_NEAR(b, a / shape.attention_kernel->speed(forward, hd), 1e-12 * a);
  }
}

TEST(AttentionKernels, TheLayerCostTakesTheFrameworksKernelOnItsGpu) {
  // Megatron-Core against itself without its attention kernels, on one block on an H100: the
  // forward differs by (1 - 1 / speed) of the attention's.
  const FrameworkSpec mc = load_framework("megatron-core");
  FrameworkSpec tt = mc;
  tt.attention_kernels.clear();
  const ClusterSpec h100 = load_cluster("dgx-h100:1");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), h100);
  const GpuSpec& gpu = h100.groups.front().node.gpu;
  Strategy s;
  const LayerSpec block = testing::llama_block(4096);
  const LayerGroups groups{CommGroup{}};
  const LayerCost t = eval::cost_layer(block, s, gpu, groups, cost, Dtype::kBf16, tt, HostCosts{});
  const LayerCost m = eval::cost_layer(block, s, gpu, groups, cost, Dtype::kBf16, mc, HostCosts{});
  LayerShape shape;
  const LayerWork w = layer_work(block, shape);
  const double launch = cost.fit(gpu).launch_s;
  const double fwd = cost.attention_s(gpu, Dtype::kBf16, w.attention[0]) - launch;
  const int64_t hd = w.attention[0].head_dim;
  const double saved = fwd * (1 - 1 / mc.attention_kernel(9.0)->speed(true, hd));
  EXPECT_GT(saved, 0);
  EXPECT_NEAR(t.times.pass_s[0] - m.times.pass_s[0], saved, 1e-3 * saved);
}

TEST(AttentionKernels, FrameworksShowsTheKernelsAndTheExpertGemms) {
  const auto mc = testing::run_hetplan("frameworks megatron-core");
  ASSERT_EQ(mc.exit_code, 0) << mc.output;
  EXPECT_TRUE(
      testing::contains(mc.output, "  experts' GEMMs: one GEMM per local expert over 4 streams\n"))
      << mc.output;
  EXPECT_TRUE(testing::contains(mc.output,
                                "  fused attention: cudnn on compute capability 9.0 (1.62x / "
                                "1.61x FlashAttention-2 at head size 128); elsewhere "
                                "FlashAttention-2\n"))
      << mc.output;
  const auto tt = testing::run_hetplan("frameworks torchtitan --json");
  ASSERT_EQ(tt.exit_code, 0) << tt.output;
  const Json j = Json::parse(tt.output);
  EXPECT_EQ(j["expert_gemms"], Json::parse(R"({"kernels": "grouped"})"));
  EXPECT_TRUE(j["attention_kernels"].empty());
}

TEST(AttentionKernels, BadEntriesNameTheKey) {
  std::ifstream in(std::string(HETPLAN_TEST_DATA) + "/framework_fixture.yaml");
  const std::string fixture((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto error_with = [&](const std::string& entry) {
    std::string text = fixture;
    text.insert(text.find("\nmemory:\n") + 1, "attention_kernels:\n  - " + entry + "\n");
    text += "  attention_kernels: \"test\"\n";
    const auto path = std::filesystem::temp_directory_path() / "attention_kernels_bad.yaml";
    std::ofstream(path) << text;
    const std::string e = testing::error_of([&] { load_framework(path.string()); });
    std::filesystem::remove(path);
    return e;
  };
  const std::string head =
      error_with("{kernel: cudnn, speed_vs_flash2: {forward: {wide: 1.5}, backward: {128: 1.6}}}");
  EXPECT_TRUE(testing::contains(head, "speed_vs_flash2.forward.wide")) << head;
  EXPECT_TRUE(testing::contains(head, "head size")) << head;
  const std::string none = error_with("{kernel: cudnn}");
  EXPECT_TRUE(testing::contains(none, "speed_vs_flash2")) << none;
}

}  // namespace
}  // namespace hetplan
