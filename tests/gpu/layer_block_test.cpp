// The per-layer benchmark's transformer blocks on a GPU: both styles run F, B and W with every
// output written and finite, keep the activation bytes worked out below, and time sensibly.
#include <gtest/gtest.h>

#include "profiler/cuda_check.h"
#include "profiler/device.h"
#include "profiler/device_check.h"
#include "profiler/layer/block.h"
#include "profiler/timing.h"
#include "tests/gpu/gpu_test_util.h"

namespace hetplan::profiler {
namespace {

LayerTimingCase small_case(const std::string& style) {
  LayerTimingCase c;
  c.model = "test";
  c.style = style;
  c.micro_batch = 1;
  c.seq_len = 256;
  c.hidden = 256;
  c.heads = style == "gpt" ? 4 : 2;  // head_dim 64 and 128: the two the attention kernel has
  c.kv_heads = c.heads;
  c.head_dim = style == "gpt" ? 64 : 128;
  c.ffn_hidden = style == "gpt" ? 1024 : 688;
  c.bias = style == "gpt";
  c.rotary = style == "llama";
  c.dropout = style == "gpt" ? 0.1 : 0.0;
  return c;
}

void run_and_check(TransformerBlock& block, cudaStream_t stream) {
  block.poison(0);
  block.forward(0);
  block.backward_input(0);
  block.backward_weight(0);
  CUDA_CHECK(cudaStreamSynchronize(stream));
  for (const auto& t : block.outputs(0)) {
    const ValueCounts v = count_values(t.data, t.count, t.dtype, stream);
    EXPECT_EQ(v.nonfinite, 0) << t.name;
    EXPECT_LT(v.zeros, v.count) << t.name;
  }
}

class LayerBlockOnGpu : public ::testing::TestWithParam<std::string> {};

TEST_P(LayerBlockOnGpu, RunsVerifiesAndTimes) {
  HETPLAN_REQUIRE_GPU();
  CUDA_CHECK(cudaSetDevice(0));
  const LayerTimingCase c = small_case(GetParam());
  if (const std::string why = TransformerBlock::unsupported_reason(c); !why.empty())
    GTEST_SKIP() << why;
  CudaStream stream;
  TransformerBlock block(c, 2, stream.get());
  run_and_check(block, stream.get());
  // Saved tensors, T = 256 tokens, h = 256: eight [T, h] bf16 tensors (x, norm output, q, k, v,
  // attention output, x2, norm output) = 8 * 131072; the MLP's activation input and output.
  const int64_t th = 256 * 256 * 2;
  if (c.style == "gpt") {
    // + mean and rstd of two LayerNorms (16 T) + lse (4 heads * 256 * 4) + 2 * [T, 1024] bf16.
    EXPECT_EQ(block.saved_bytes(), 8 * th + 16 * 256 + 4 * 256 * 4 + 2 * 256 * 1024 * 2);
  } else {
    // + rstd of two RMSNorms (8 T) + lse (2 heads) + gate/up [T, 1376] and SwiGLU out [T, 688].
    EXPECT_EQ(block.saved_bytes(), 8 * th + 8 * 256 + 2 * 256 * 4 + 256 * 1376 * 2 + 256 * 688 * 2);
  }
  EXPECT_GE(block.saved_memgetinfo_bytes(), 0);
  TimingOptions o;
  o.target_s = 5e-3;
  const Timing f = time_launches([&](int64_t i) { block.forward(int(i % 2)); }, stream.get(), o);
  const Timing b =
      time_launches([&](int64_t i) { block.backward_input(int(i % 2)); }, stream.get(), o);
  const Timing w =
      time_launches([&](int64_t i) { block.backward_weight(int(i % 2)); }, stream.get(), o);
  EXPECT_GT(f.per_launch_s.median, 1e-6);
  EXPECT_GT(b.per_launch_s.median, 1e-6);
  EXPECT_GT(w.per_launch_s.median, 1e-6);
  std::cout << c.style << " F " << f.per_launch_s.median * 1e6 << " us, B "
            << b.per_launch_s.median * 1e6 << " us, W " << w.per_launch_s.median * 1e6 << " us\n";
}

INSTANTIATE_TEST_SUITE_P(Styles, LayerBlockOnGpu, ::testing::Values("gpt", "llama"));

}  // namespace
}  // namespace hetplan::profiler
