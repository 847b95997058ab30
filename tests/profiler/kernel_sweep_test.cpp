// Sizes of the kernels/ registry sweep.
#include "profiler/common/kernel_sweep.h"

#include <gtest/gtest.h>

namespace hetplan::profiler {
namespace {

TEST(KernelSweep, RowsShrinkByFourFromTheFirstBenchShape) {
  const auto shapes = kernel_sweep_shapes({"rows", "cols"}, {{16384, 4096}, {16384, 8192}}, false);
  // 16384 / 4^k for k = 0..4 (16384 .. 64), then the second bench shape as it is.
  ASSERT_EQ(shapes.size(), 6u);
  EXPECT_EQ(shapes[0], (KernelShape{16384, 4096}));
  EXPECT_EQ(shapes[1], (KernelShape{4096, 4096}));
  EXPECT_EQ(shapes[4], (KernelShape{64, 4096}));
  EXPECT_EQ(shapes[5], (KernelShape{16384, 8192}));
}

TEST(KernelSweep, QuickTakesTheFirstShapeAndOneSmallerStep) {
  EXPECT_EQ(kernel_sweep_shapes({"rows", "cols"}, {{16384, 4096}, {16384, 8192}}, true),
            (std::vector<KernelShape>{{16384, 4096}, {256, 4096}}));
  // Attention: seq halves (cost ~ seq^2); quick divides it by 8.
  EXPECT_EQ(kernel_sweep_shapes({"batch", "heads", "seq", "head_dim", "causal"},
                                {{4, 16, 4096, 128, 1}}, true),
            (std::vector<KernelShape>{{4, 16, 4096, 128, 1}, {4, 16, 512, 128, 1}}));
}

TEST(KernelSweep, FloorsStopTheScaling) {
  // bytes: 64 KiB / 4^k with a 4 KiB floor: 64K, 16K, 4K.
  EXPECT_EQ(kernel_sweep_shapes({"bytes"}, {{int64_t{64} << 10}}, false).size(), 3u);
  // seq: 1024 -> 512 -> 256 -> 128, then the floor.
  EXPECT_EQ(kernel_sweep_shapes({"batch", "heads", "seq", "head_dim", "causal"},
                                {{1, 1, 1024, 64, 1}}, false)
                .size(),
            4u);
  // No size dimension: the bench shapes only.
  EXPECT_EQ(size_dimension({"vocab", "hidden"}), -1);
  EXPECT_EQ(kernel_sweep_shapes({"vocab", "hidden"}, {{1, 2}}, false).size(), 1u);
  EXPECT_EQ(kernel_shape_text({"rows", "cols"}, {8, 4096}), "rows=8,cols=4096");
}

}  // namespace
}  // namespace hetplan::profiler
