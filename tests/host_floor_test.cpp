// The host floor of eager training steps: kernels per layer and pass (costmodel/layer_ops.h), the
// evaluator's floor (search/evaluate.cpp) and the coefficient's way in through a calibration
// file's `host` records and the profile.
#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "costmodel/calibration.h"
#include "costmodel/cost_model.h"
#include "costmodel/errors.h"
#include "costmodel/layer_ops.h"
#include "costmodel/profile.h"
#include "search/evaluate.h"
#include "tests/framework_fixture.h"

namespace hetplan {
namespace {

Profile shipped_profile() { return load_profile_inputs({default_calibration_dir().string()}); }

LayerShape unfused(int64_t micro_batch) {
  LayerShape s;
  s.micro_batch = micro_batch;
  s.grad_accumulation_fusion = false;  // as the reference harness runs
  return s;
}

// A GPT-2 block (LayerNorm, biases, GeLU, dropout 0.1, fused attention), counted by hand:
// forward: layernorm, QKV GEMM, attention, projection GEMM, dropout, residual add, layernorm, fc1,
//   GeLU, fc2, dropout, residual add = 12;
// input gradient: 2 layernorm, 4 input-gradient GEMMs, QKV gradient concat, attention, GeLU,
//   2 dropout, 2 residual-gradient adds = 13;
// weight gradient: 4 weight-gradient GEMMs, 4 bias gradients, 2 layernorm weight gradients = 10,
//   plus one add into the fp32 main gradient per parameter tensor (4 weights, 4 biases, 2 x 2
//   layernorm gains and biases = 12) = 22.
TEST(HostFloor, AGpt2BlockLaunchesTheKernelsCountedByHand) {
  const ModelSpec model = load_model("gpt2-medium");
  const LayerSpec& block = model.layers[1];
  ASSERT_TRUE(block.block());
  const LayerWork w = layer_work(block, unfused(1));
  EXPECT_EQ(w.param_tensors, 12);
  EXPECT_EQ(w.gemm_weight_tensors, 4);
  EXPECT_EQ(w.accumulated_tensors, 12);
  const LayerKernels k = layer_kernels(w, Recompute::kNone);
  EXPECT_EQ(k.pass[0], 12);
  EXPECT_EQ(k.pass[1], 13);
  EXPECT_EQ(k.pass[2], 22);
  EXPECT_EQ(k.recompute, 0);
  EXPECT_EQ(k.total(), 47);
  // Full recomputation re-runs the 12 forward kernels; selective re-runs none with fused attention.
  EXPECT_EQ(layer_kernels(w, Recompute::kFull).recompute, 12);
  EXPECT_EQ(layer_kernels(w, Recompute::kSelective).recompute, 0);
  // The micro-batch changes the sizes, not the launches.
  EXPECT_EQ(layer_kernels(layer_work(block, unfused(8)), Recompute::kNone).total(), 47);
  // With gradient-accumulation fusion the weight-gradient GEMMs add into the main gradients
  // themselves: only the 8 biases and layernorm parameters take an add of their own.
  LayerShape fused = unfused(1);
  fused.grad_accumulation_fusion = true;
  EXPECT_EQ(layer_kernels(layer_work(block, fused), Recompute::kNone).pass[2], 18);
}

TEST(HostFloor, UnfusedAttentionCountsItsCoreOpsAndSelectiveRecomputeReRunsThem) {
  const ModelSpec model = load_model("gpt2-medium");
  LayerShape s = unfused(1);
  s.flash_attention = false;
  const LayerWork w = layer_work(model.layers[1], s);
  const LayerKernels k = layer_kernels(w, Recompute::kSelective);
  // Forward: the fused attention's one kernel becomes scores, softmax, dropout, context.
  EXPECT_EQ(k.pass[0], 15);
  EXPECT_EQ(k.recompute, 4);
}

struct OneGpuStep {
  ModelSpec model = load_model("gpt2-medium");
  ClusterSpec cluster = load_cluster("p4d.24xlarge:1");
  Strategy strategy;
  OneGpuStep() {
    strategy.micro_batch = 1;
    strategy.global_batch = 2;
    strategy.grad_accumulation_fusion = false;
  }
  Prediction predict(double host_s_per_kernel) const {
    Profile profile = shipped_profile();
    const std::string type = cluster.groups[0].node.gpu.name;
    GpuFit fit = profile.gpu(type);
    fit.host_s_per_kernel = host_s_per_kernel;
    profile.gpus[type] = fit;
    const CostModel cost(profile, cluster);
    return Evaluator(model, cluster, cost, testing::fixture_framework()).predict(strategy);
  }
};

double breakdown_sum(const Prediction& p) {
  double sum = 0;
  for (const auto& [name, s] : p.breakdown) sum += s;
  return sum;
}

double breakdown_of(const Prediction& p, const std::string& key) {
  for (const auto& [name, s] : p.breakdown)
    if (name == key) return s;
  return std::nan("");
}

TEST(HostFloor, KernelsPerIterationAreTheMicroBatchesLayersAndOptimizer) {
  const OneGpuStep s;
  const Prediction p = s.predict(0);
  ASSERT_TRUE(p.feasible) << p.reason;
  double per_micro_batch = 0;
  for (const auto& layer : s.model.layers)
    per_micro_batch += layer_kernels(layer_work(layer, unfused(1)), Recompute::kNone).total();
  // Fused AdamW over 354.8 M parameters: 5414 chunks of 65536 elements, 320 chunks per launch:
  // 17 launches, plus the step count, the copy to bf16 and the zeroing of the gradients.
  EXPECT_DOUBLE_EQ(p.kernels_per_iteration, 2 * per_micro_batch + 17 + 3);
  EXPECT_EQ(p.host_s, 0);
  EXPECT_EQ(breakdown_of(p, "host_wait"), 0);
}

TEST(HostFloor, TheSlowerOfHostAndDeviceBoundsTheStep) {
  const OneGpuStep s;
  const Prediction device = s.predict(0);
  // 1 ns per kernel: the host keeps ahead, nothing changes.
  const Prediction fast_host = s.predict(1e-9);
  EXPECT_DOUBLE_EQ(fast_host.iteration_s, device.iteration_s);
  EXPECT_DOUBLE_EQ(fast_host.host_s, 1e-9 * device.kernels_per_iteration);
  EXPECT_EQ(breakdown_of(fast_host, "host_wait"), 0);
  // 100 us per kernel: the host is slower; the step is its time, the wait is the difference.
  const Prediction slow_host = s.predict(1e-4);
  EXPECT_DOUBLE_EQ(slow_host.iteration_s, 1e-4 * device.kernels_per_iteration);
  EXPECT_GT(slow_host.iteration_s, device.iteration_s);
  EXPECT_NEAR(breakdown_of(slow_host, "host_wait"), slow_host.iteration_s - device.iteration_s,
              1e-12);
  EXPECT_NEAR(breakdown_sum(slow_host), slow_host.iteration_s, 1e-12);
  EXPECT_NEAR(slow_host.samples_per_s, 2 / slow_host.iteration_s, 1e-9);
}

CalibrationFile host_file(std::vector<double> step_ms) {
  CalibrationFile f;
  f.context.source = "measured";
  f.context.gpu_type = "h100-sxm";
  for (double ms : step_ms) {
    HostMeasurement h;
    h.config = "gpt2-medium s128 mb1 gb2 none";
    h.kernels = 2000;
    h.step_s = summarize({ms * 1e-3});
    h.device_s = 0.02;
    f.host.push_back(h);
  }
  return f;
}

TEST(HostFloor, CalibrationHostRecordsRoundTripAndFitTheMedian) {
  const auto path = std::filesystem::temp_directory_path() / "hetplan_host_floor_cal.json";
  save_calibration(host_file({50, 60, 80}), path);
  const CalibrationFile back = load_calibration(path);
  std::filesystem::remove(path);
  ASSERT_EQ(back.host.size(), 3u);
  EXPECT_EQ(back.host[0].kernels, 2000);
  EXPECT_DOUBLE_EQ(back.host[1].s_per_kernel, 60e-3 / 2000);  // derived: step / kernels
  EXPECT_EQ(per_gpu_records(back), "3 host");
  const Profile profile = fit_profile({back});
  const GpuFit fit = profile.gpu("h100-sxm");
  EXPECT_DOUBLE_EQ(fit.host_s_per_kernel, 30e-6);  // the median record's 60 ms / 2000
  EXPECT_EQ(fit.host_points, 3);
  EXPECT_EQ(fit.source, "measured");
  // Through the profile file and back.
  const auto saved = std::filesystem::temp_directory_path() / "hetplan_host_floor_profile.json";
  save_profile(profile, saved);
  const Profile reread = load_profile_inputs({saved.string()});
  std::filesystem::remove(saved);
  EXPECT_DOUBLE_EQ(reread.gpu("h100-sxm").host_s_per_kernel, 30e-6);
  // A GPU without host records has no floor.
  EXPECT_EQ(Profile{}.gpu("h100-sxm").host_s_per_kernel, 0);
}

TEST(HostFloor, AHostRecordWithoutKernelsNamesTheKey) {
  Json j = to_json(host_file({50}));
  j["host"][0]["kernels"] = 0;
  try {
    calibration_from_document({"x.json", j});
    FAIL() << "a record of 0 kernels was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "host[0].kernels");
  }
}

}  // namespace
}  // namespace hetplan
