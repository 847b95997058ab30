// Step 9 of a prediction: the host floor. In eager mode the host issues every kernel (dispatch,
// autograd, launch) while the GPU runs the ones before: the two overlap, and the slower bounds the
// step. A device's iteration cannot be shorter than its host's time to issue the kernels of its
// stages' micro-batches and of its optimizer step. Small configurations are host-bound
// (docs/measure.md). The host's cost per kernel is the framework's for the strategy's host mode,
// or a profile's measured one in eager mode (Evaluator::host_s_per_kernel).
#include <cmath>

#include "search/eval/steps.h"

namespace hetplan::eval {
namespace {

// Kernels of the optimizer step over one device's `params` (the reference harness's, as Megatron-LM
// runs it): fused AdamW over one flat fp32 buffer is launched in chunks of 65536 elements, at most
// 320 chunks per launch (kChunkSize and depth_to_max_blocks of PyTorch's
// aten/src/ATen/native/cuda/MultiTensorApply.cuh; where the large kernel-argument path applies,
// CUDA 12.1 and later on Volta and newer, up to 4044 chunks at depth 4, so fewer launches: a few
// kernels out of the thousands a step issues), plus its step count, the copy to the bf16 weights
// and the zeroing of the main gradients.
double optimizer_kernels(double params) {
  constexpr double kElementsPerLaunch = 65536.0 * 320.0;
  return std::ceil(params / kElementsPerLaunch) + 3;
}

}  // namespace

HostFloor host_floor(const Evaluator& ev, const Strategy& s, const Placement& p,
                     const std::vector<Rank>& ranks, const std::vector<LayerRange>& ranges,
                     const StageTimes& t) {
  const double m = static_cast<double>(s.microbatches());
  std::vector<double> kernels(ranks.size(), 0), host_s(ranks.size(), 0);
  for (size_t j = 0; j < p.rank_of_stage.size(); ++j) {
    const int64_t d = p.rank_of_stage[j];
    for (int64_t i = ranges[j].first; i <= ranges[j].second; ++i) {
      kernels[d] += m * ranks[d].costs()[i].kernel_launches;
      host_s[d] += m * ranks[d].costs()[i].host_s;
    }
  }
  HostFloor floor;
  for (size_t d = 0; d < ranks.size(); ++d) {
    // The optimizer step is no part torch.compile covers (compiled_parts): eager where the
    // framework lists what it compiles, in the strategy's mode where it compiles all.
    const double optimizer = optimizer_kernels(optimizer_params(s, t, d));
    kernels[d] += optimizer;
    host_s[d] += optimizer * ev.host_s_per_kernel(
                                 *ranks[d].gpu, ev.framework().mode_for("optimizer", s.host_mode));
    if (host_s[d] > floor.host_s || (floor.host_s == 0 && kernels[d] > floor.kernels)) {
      floor.host_s = host_s[d];
      floor.kernels = kernels[d];
    }
  }
  return floor;
}

}  // namespace hetplan::eval
