// The wgmma known-answer test (kernels/experimental/wgmma_selftest.h) on the GPU, sm_90a only.
#include <vector>

#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/experimental/attention_hopper.h"
#include "kernels/experimental/wgmma_selftest.h"

namespace hetplan::kernels {
namespace {

template <int kVariant>
__global__ void __launch_bounds__(128) wgmma_selftest_kernel(const uint16_t* image, float* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  wgmma_selftest_block<kVariant>(image, out);
#endif
}

template <int kVariant>
void launch(const uint16_t* image, float* out) {
  wgmma_selftest_kernel<kVariant><<<1, 128, kWgmmaSelftestSmem>>>(image, out);
  HETPLAN_CHECK_LAUNCH();
}

}  // namespace

std::vector<float> wgmma_selftest_run(int variant) {
  const std::vector<uint16_t> host_image = wgmma_selftest_image();
  DeviceBuffer<uint16_t> image(host_image.size());
  image.upload(host_image);
  DeviceBuffer<float> out(kWgmmaSelftestOutFloats);
  out.fill_bytes(0xff);
  switch (variant) {
    case 0:
      launch<0>(image.get(), out.get());
      break;
    case 1:
      launch<1>(image.get(), out.get());
      break;
    case 2:
      launch<2>(image.get(), out.get());
      break;
    default:
      launch<3>(image.get(), out.get());
      break;
  }
  HETPLAN_CUDA_CHECK(cudaDeviceSynchronize());
  return out.download();
}

}  // namespace hetplan::kernels
