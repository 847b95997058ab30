// The wgmma known-answer test (kernels/wgmma_selftest.h) on the GPU, sm_90a only.
#include <vector>

#include "kernels/attention_hopper.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/wgmma_selftest.h"

namespace hetplan::kernels {
namespace {

__global__ void __launch_bounds__(128) wgmma_selftest_kernel(float* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  wgmma_selftest_block(out);
#endif
}

}  // namespace

std::vector<float> wgmma_selftest_run() {
  const size_t n = size_t{kWgmmaSelftestForms} * 128 * kWgmmaSelftestFloats;
  DeviceBuffer<float> out(n);
  out.fill_bytes(0xff);
  wgmma_selftest_kernel<<<1, 128, kWgmmaSelftestSmem>>>(out.get());
  HETPLAN_CHECK_LAUNCH();
  HETPLAN_CUDA_CHECK(cudaDeviceSynchronize());
  return out.download();
}

}  // namespace hetplan::kernels
