// Every registered kernel case at each of its test shapes (small and odd sizes) against its CPU
// reference on the GPU, with outputs poisoned first; two input seeds each. Skips where no GPU is
// visible or the device cannot run the case (bf16 attention on sm_75, say).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "kernels/registry.h"

namespace hetplan::kernels {
namespace {

bool gpu_visible() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

struct Param {
  std::string name;
  size_t shape;
};

std::vector<Param> params() {
  std::vector<Param> out;
  for (const Case& c : all_cases())
    for (size_t i = 0; i < c.test_shapes.size(); ++i) out.push_back({c.name, i});
  return out;
}

class KernelCase : public ::testing::TestWithParam<Param> {};

TEST_P(KernelCase, MatchesReference) {
  if (!gpu_visible()) GTEST_SKIP() << "no GPU visible";
  const Case* c = find_case(GetParam().name);
  ASSERT_NE(c, nullptr);
  const Shape& shape = c->test_shapes[GetParam().shape];
  if (std::string why = c->unsupported(shape); !why.empty()) GTEST_SKIP() << why;
  for (uint64_t seed : {11u, 12345u}) {
    auto inst = c->make(shape, seed);
    const CheckResult r = inst->check();
    EXPECT_TRUE(r.passed) << c->name << " " << shape_string(*c, shape) << " seed " << seed << "\n"
                          << r.detail;
    // A second check of the same instance: outputs re-poisoned, same verdict (no state leaks).
    EXPECT_TRUE(inst->check().passed) << c->name << " second check";
  }
}

INSTANTIATE_TEST_SUITE_P(All, KernelCase, ::testing::ValuesIn(params()),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return p.param.name + "_shape" + std::to_string(p.param.shape);
                         });

}  // namespace
}  // namespace hetplan::kernels
