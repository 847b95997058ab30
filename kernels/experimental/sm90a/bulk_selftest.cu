// The mbarrier / bulk-copy known-answer test (kernels/experimental/bulk_selftest.h) on the GPU,
// sm_90a only. No wgmma here, so a wait that gives up may print which barrier it was
// (mbarrier_watchdog.h).
#define HETPLAN_MBARRIER_WATCHDOG 2
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/experimental/attention_hopper.h"
#include "kernels/experimental/bulk_selftest.h"

namespace hetplan::kernels {
namespace {

__global__ void __launch_bounds__(kBulkSelftestThreads)
    bulk_selftest_kernel(const float* src, float* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  bulk_selftest_block<kBulkMutationNone>(src, out);
#endif
}

}  // namespace

std::vector<float> bulk_selftest_run() {
  DeviceBuffer<float> src(kBulkSelftestSrcFloats);
  src.upload(bulk_selftest_source());
  DeviceBuffer<float> out(kBulkSelftestOutFloats);
  out.upload(std::vector<float>(kBulkSelftestOutFloats, kBulkSelftestBase));
  bulk_selftest_kernel<<<kBulkSelftestBlocks, kBulkSelftestThreads, kBulkSelftestSmem>>>(src.get(),
                                                                                         out.get());
  HETPLAN_CHECK_LAUNCH();
  HETPLAN_CUDA_CHECK(cudaDeviceSynchronize());
  return out.download();
}

}  // namespace hetplan::kernels
