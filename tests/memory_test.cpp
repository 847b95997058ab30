// device_memory (costmodel/memory.h) part by part, every ZeRO stage, in each training precision.
// Sources: Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
// Models", section 5 and figure 1 (mixed-precision Adam keeps 2 + 2 + K bytes per parameter,
// K = 12; P_os shards the K, P_os+g also the gradients, P_os+g+p also the parameters; their 7.5B
// model on N_d = 64: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB), and Megatron-LM's distributed optimizer
// notes (docs/source/api-guide/dist_optimizer.md: fp32 gradient buffer, 4 + 2 + 12 = 18 bytes per
// parameter; distributed optimizer 6 + 12 / d). The whole-sum figures are also in
// framework_test.cpp; here each state is checked on its own, and what that test leaves out.
#include "costmodel/memory.h"

#include <gtest/gtest.h>

#include "costmodel/framework.h"

namespace hetplan {
namespace {

constexpr double kPsi = 7.5e9;  // the ZeRO paper's model
constexpr int64_t kNd = 64;     // its data-parallel degree

MemoryBreakdown states_of(const MemoryLayout* layout, int zero, Dtype dtype) {
  MemoryInput in;
  in.param_count = kPsi;
  in.dp = kNd;
  in.zero = zero;
  in.dtype = dtype;
  in.reserve_bytes = 0;
  in.layout = layout;
  return device_memory(in);
}

double states_GB(const MemoryBreakdown& m) { return (m.weights + m.gradients + m.optimizer) / 1e9; }

TEST(DeviceMemoryZero, ThePapersFigureOneInGigabytes) {
  const FrameworkSpec ds = load_framework("deepspeed");
  // The paper's figures, rounded as it prints them: 120, 31.4, 16.6, 1.9 GB.
  EXPECT_NEAR(states_GB(states_of(&ds.memory, 0, Dtype::kFp16)), 120, 0.05);
  EXPECT_NEAR(states_GB(states_of(&ds.memory, 1, Dtype::kFp16)), 31.4, 0.05);  // 31.406
  EXPECT_NEAR(states_GB(states_of(&ds.memory, 2, Dtype::kFp16)), 16.6, 0.05);  // 16.641
  EXPECT_NEAR(states_GB(states_of(&ds.memory, 3, Dtype::kFp16)), 1.9, 0.05);   // 1.875
}

TEST(DeviceMemoryZero, EachStageShardsItsStatesAndNoOther) {
  const FrameworkSpec ds = load_framework("deepspeed");
  const double nd = kNd;
  // Stage 0: fp16 weights 2, fp16 gradients 2, fp32 master 4 + moments 8 (K = 12).
  const MemoryBreakdown z0 = states_of(&ds.memory, 0, Dtype::kFp16);
  EXPECT_DOUBLE_EQ(z0.weights, 2 * kPsi);
  EXPECT_DOUBLE_EQ(z0.gradients, 2 * kPsi);
  EXPECT_DOUBLE_EQ(z0.optimizer, 12 * kPsi);
  const MemoryBreakdown z1 = states_of(&ds.memory, 1, Dtype::kFp16);
  EXPECT_DOUBLE_EQ(z1.weights, 2 * kPsi);
  EXPECT_DOUBLE_EQ(z1.gradients, 2 * kPsi);
  EXPECT_DOUBLE_EQ(z1.optimizer, 12 * kPsi / nd);
  const MemoryBreakdown z2 = states_of(&ds.memory, 2, Dtype::kFp16);
  EXPECT_DOUBLE_EQ(z2.weights, 2 * kPsi);
  EXPECT_DOUBLE_EQ(z2.gradients, 2 * kPsi / nd);
  EXPECT_DOUBLE_EQ(z2.optimizer, 12 * kPsi / nd);
  const MemoryBreakdown z3 = states_of(&ds.memory, 3, Dtype::kFp16);
  EXPECT_DOUBLE_EQ(z3.weights, 2 * kPsi / nd);
  EXPECT_DOUBLE_EQ(z3.gradients, 2 * kPsi / nd);
  EXPECT_DOUBLE_EQ(z3.optimizer, 12 * kPsi / nd);
}

TEST(DeviceMemoryZero, MegatronsEighteenBytesAreZerosSixteenPlusTwoOfFp32Gradients) {
  const FrameworkSpec ds = load_framework("deepspeed");
  const double nd = kNd;
  // Megatron-LM (the default layout): the same weights and optimizer, gradients in fp32 (4, not
  // 2): 2 bytes per parameter more at every stage that keeps them whole, 2 / N_d where sharded.
  for (int zero : {0, 1, 2, 3}) {
    const MemoryBreakdown mega = states_of(nullptr, zero, Dtype::kBf16);
    const MemoryBreakdown zero_paper = states_of(&ds.memory, zero, Dtype::kFp16);
    EXPECT_DOUBLE_EQ(mega.weights, zero_paper.weights) << "ZeRO-" << zero;
    EXPECT_DOUBLE_EQ(mega.optimizer, zero_paper.optimizer) << "ZeRO-" << zero;
    EXPECT_DOUBLE_EQ(mega.gradients - zero_paper.gradients, (zero >= 2 ? 2 / nd : 2) * kPsi)
        << "ZeRO-" << zero;
  }
  EXPECT_DOUBLE_EQ(states_GB(states_of(nullptr, 0, Dtype::kBf16)), 18 * 7.5);  // 135 GB
  // The distributed optimizer (ZeRO-1): 6 + 12 / d.
  EXPECT_DOUBLE_EQ(states_GB(states_of(nullptr, 1, Dtype::kBf16)), (6 + 12 / nd) * 7.5);
  EXPECT_DOUBLE_EQ(states_GB(states_of(nullptr, 2, Dtype::kBf16)), (2 + 16 / nd) * 7.5);
  EXPECT_DOUBLE_EQ(states_GB(states_of(nullptr, 3, Dtype::kBf16)), 18 / nd * 7.5);
}

TEST(DeviceMemoryZero, Fp32TrainingKeepsNoMasterCopy) {
  // fp32 weights 4 and gradients 4, two fp32 moments 8, no master copy: 16 bytes per parameter;
  // tf32 trains with the same states.
  const double nd = kNd;
  for (Dtype d : {Dtype::kFp32, Dtype::kTf32}) {
    EXPECT_DOUBLE_EQ(states_GB(states_of(nullptr, 0, d)), 16 * 7.5);
    EXPECT_DOUBLE_EQ(states_GB(states_of(nullptr, 1, d)), (8 + 8 / nd) * 7.5);
    EXPECT_DOUBLE_EQ(states_GB(states_of(nullptr, 2, d)), (4 + 12 / nd) * 7.5);
    EXPECT_DOUBLE_EQ(states_GB(states_of(nullptr, 3, d)), 16 / nd * 7.5);
  }
}

TEST(DeviceMemoryZero, Fp8KeepsBf16StatesPlusItsCopies) {
  // fp8 trains with bf16's 18 bytes; the recipe's fp8 copy of the weights (1 byte each) comes on
  // top, sharded with the weights under ZeRO-3 only.
  MemoryInput in;
  in.param_count = 1e9;
  in.dp = 8;
  in.dtype = Dtype::kFp8;
  in.reserve_bytes = 0;
  in.low_precision_weight_bytes = 1e9;
  for (int zero : {0, 1, 2}) {
    in.zero = zero;
    EXPECT_DOUBLE_EQ(device_memory(in).weights, 2e9 + 1e9) << "ZeRO-" << zero;
  }
  in.zero = 3;
  EXPECT_DOUBLE_EQ(device_memory(in).weights, (2e9 + 1e9) / 8);
  // Held in fp8 alone (--fp8-param-gather), 6e8 of them: their 2-byte bf16 copy is not kept,
  // weights 2 x 1e9 + 1e9 - 2 x 6e8.
  in.zero = 1;
  in.low_precision_only_param_count = 6e8;
  EXPECT_DOUBLE_EQ(device_memory(in).weights, 1.8e9);
  EXPECT_DOUBLE_EQ(device_memory(in).gradients, 4e9);
  EXPECT_DOUBLE_EQ(device_memory(in).optimizer, 12e9 / 8);
}

TEST(DeviceMemoryZero, ExpertsShardOverTheirOwnReplicas) {
  // 1e9 parameters of which 6e8 are routed experts: ZeRO-2, the dense 4e8 over dp = 8, the
  // experts over expert_dp = 2. Gradients 4 x (4e8 / 8 + 6e8 / 2), optimizer 12 x the same.
  MemoryInput in;
  in.param_count = 1e9;
  in.expert_param_count = 6e8;
  in.dp = 8;
  in.expert_dp = 2;
  in.zero = 2;
  in.reserve_bytes = 0;
  const MemoryBreakdown m = device_memory(in);
  EXPECT_DOUBLE_EQ(m.weights, 2e9);
  EXPECT_DOUBLE_EQ(m.gradients, 4 * (5e7 + 3e8));
  EXPECT_DOUBLE_EQ(m.optimizer, 12 * (5e7 + 3e8));
  // No data parallelism given (dp 0) counts as one replica: nothing shards.
  in.dp = 0;
  in.expert_dp = 0;
  EXPECT_DOUBLE_EQ(device_memory(in).total(), 18e9);
}

TEST(DeviceMemoryZero, ExpertsWeightCopiesShardWithTheExperts) {
  // fp8 under ZeRO-3: 1e9 parameters of which 6e8 routed experts, a 1-byte copy of each. The
  // dense weights and copies over dp = 8, the experts' over expert_dp = 2:
  // (2 + 1) x 4e8 / 8 + (2 + 1) x 6e8 / 2.
  MemoryInput in;
  in.param_count = 1e9;
  in.expert_param_count = 6e8;
  in.dp = 8;
  in.expert_dp = 2;
  in.zero = 3;
  in.dtype = Dtype::kFp8;
  in.reserve_bytes = 0;
  in.low_precision_weight_bytes = 1e9;
  in.expert_low_precision_weight_bytes = 6e8;
  EXPECT_DOUBLE_EQ(device_memory(in).weights, 3 * 4e8 / 8 + 3 * 6e8 / 2);
  // Held in fp8 alone: no bf16 copy of either part, each sharded as its copies are.
  in.low_precision_only_param_count = 1e9;
  in.expert_low_precision_only_param_count = 6e8;
  EXPECT_DOUBLE_EQ(device_memory(in).weights, 4e8 / 8 + 6e8 / 2);
}

}  // namespace
}  // namespace hetplan
