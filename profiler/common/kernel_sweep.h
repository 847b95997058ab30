// Sizes of the kernels/ registry sweep: each benchmark shape of a case and smaller copies of it,
// so that the fit sees a kernel from launch-bound to bandwidth-bound. The size dimension scaled is
// the first of rows, tokens, elements, params, bytes, seq, batch the case has; it is divided by 4
// per step (by 2 for seq, whose cost is quadratic), down to a floor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetplan::profiler {

using KernelShape = std::vector<int64_t>;

// Index of the dimension to scale, or -1 when the case has none of the size dimensions.
int size_dimension(const std::vector<std::string>& dims);
// The shapes to measure for a case with `dims` and benchmark shapes `bench` (deduplicated):
// full: the first bench shape, up to 4 smaller steps of it (1/4 each, 1/2 for seq), then the
// other bench shapes; quick: the first bench shape and one step at 1/64 (1/8 for seq).
std::vector<KernelShape> kernel_sweep_shapes(const std::vector<std::string>& dims,
                                             const std::vector<KernelShape>& bench, bool quick);
// "rows=16384,cols=4096".
std::string kernel_shape_text(const std::vector<std::string>& dims, const KernelShape& shape);

}  // namespace hetplan::profiler
