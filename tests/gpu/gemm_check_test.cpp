// The GEMM path of the profiler on a real GPU: every dtype and layout agrees with the fp64
// reference, and the check catches wrong or unwritten outputs.
#include <gtest/gtest.h>

#include "profiler/cuda_check.h"
#include "profiler/device.h"
#include "profiler/device_fill.h"
#include "profiler/gemm/lt_gemm.h"
#include "profiler/gemm/reference.h"
#include "tests/gpu/gpu_test_util.h"

namespace hetplan::profiler {
namespace {

struct Case {
  Dtype dtype;
  GemmShape shape;
};

class GemmOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    HETPLAN_REQUIRE_GPU();
    info_ = query_device(0);
    CUDA_CHECK(cudaSetDevice(0));
  }

  bool supported(Dtype d) const {
    const int cc = info_.cc_major * 10 + info_.cc_minor;
    if (d == Dtype::kFp8) return cc >= 89;
    if (d == Dtype::kBf16 || d == Dtype::kTf32) return cc >= 80;
    return true;
  }

  // Runs one GEMM on random data; returns the check (or throws).
  GemmCheck run(const Case& c, bool corrupt) {
    const GemmShape& s = c.shape;
    LtHandle handle;
    DeviceBuffer one(sizeof(float), "scale");
    const float f1 = 1.0f;
    CUDA_CHECK(cudaMemcpy(one.get(), &f1, sizeof(f1), cudaMemcpyHostToDevice));
    LtGemm gemm(handle.get(), c.dtype, s, one.as<float>());
    const int64_t a_elems = s.m * s.k * s.batch, b_elems = s.k * s.n * s.batch;
    const int64_t c_elems = s.m * s.n * s.batch;
    DeviceBuffer a(a_elems * gemm_input_bytes(c.dtype) + 256, "A");
    DeviceBuffer b(b_elems * gemm_input_bytes(c.dtype) + 256, "B");
    DeviceBuffer out(c_elems * gemm_output_bytes(c.dtype), "C");
    DeviceBuffer ws(kGemmWorkspaceBytes, "workspace");
    CudaStream stream;
    fill_uniform(a.get(), a_elems, c.dtype, 11, 1.0f, stream.get());
    fill_uniform(b.get(), b_elems, c.dtype, 12, 1.0f, stream.get());
    CUDA_CHECK(cudaMemsetAsync(out.get(), 0xFF, out.bytes(), stream.get()));
    gemm.run(a.get(), b.get(), out.get(), ws.get(), stream.get());
    if (corrupt) {
      // Overwrite the first column with other random numbers: a wrong result.
      fill_uniform(out.get(), s.m, c.dtype == Dtype::kFp8 ? Dtype::kBf16 : c.dtype, 99, 50.0f,
                   stream.get());
    }
    return check_gemm(c.dtype, GemmDims{s.m, s.n, s.k, s.batch, s.trans_a, s.trans_b}, a.get(),
                      b.get(), out.get(), stream.get(), /*max_samples=*/100000);
  }

  DeviceInfo info_;
};

TEST_F(GemmOnGpu, EveryDtypeAndLayoutMatchesTheReference) {
  std::vector<Case> cases;
  for (Dtype d : {Dtype::kFp32, Dtype::kTf32, Dtype::kFp16, Dtype::kBf16}) {
    cases.push_back({d, {128, 96, 64, 1, true, false}});    // TN (forward)
    cases.push_back({d, {96, 128, 256, 1, false, false}});  // NN (input gradient)
    cases.push_back({d, {64, 96, 512, 1, false, true}});    // NT (weight gradient)
    cases.push_back({d, {32, 48, 64, 3, true, false}});     // batched
    cases.push_back({d, {24, 8, 4096, 1, true, false}});    // skinny, long k
  }
  cases.push_back({Dtype::kFp8, {128, 96, 64, 1, true, false}});
  cases.push_back({Dtype::kFp8, {256, 64, 4096, 1, true, false}});
  int ran = 0;
  for (const auto& c : cases) {
    if (!supported(c.dtype)) continue;
    const GemmCheck check = run(c, false);
    EXPECT_TRUE(check.passed) << to_string(c.dtype) << " " << c.shape.m << "x" << c.shape.n << "x"
                              << c.shape.k << " b" << c.shape.batch << " ta" << c.shape.trans_a
                              << " tb" << c.shape.trans_b << ": relative error "
                              << check.relative_error;
    EXPECT_EQ(check.samples, c.shape.m * c.shape.n * c.shape.batch);  // small: every element
    ++ran;
  }
  EXPECT_GE(ran, 10);
}

TEST_F(GemmOnGpu, CheckCatchesAWrongResult) {
  const GemmCheck check = run({Dtype::kFp32, {128, 96, 64, 1, true, false}}, true);
  EXPECT_FALSE(check.passed);
  EXPECT_GT(check.relative_error, 1e-2);
}

TEST_F(GemmOnGpu, Fp8NeedsTheTnLayout) {
  if (!supported(Dtype::kFp8)) GTEST_SKIP() << "no fp8 on this GPU";
  LtHandle handle;
  DeviceBuffer one(sizeof(float), "scale");
  EXPECT_THROW(LtGemm(handle.get(), Dtype::kFp8, {64, 64, 64, 1, false, false}, one.as<float>()),
               GemmNotSupported);
}

}  // namespace
}  // namespace hetplan::profiler
