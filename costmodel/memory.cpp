#include "costmodel/memory.h"

namespace hetplan {

MemoryBreakdown device_memory(const MemoryInput& in) {
  const bool fp32 = in.dtype == Dtype::kFp32 || in.dtype == Dtype::kTf32;
  const double weight_b = fp32 ? 4 : dtype_bytes(in.dtype) == 1 ? 2 : dtype_bytes(in.dtype);
  const double grad_b = 4;
  const double optim_b = fp32 ? 8 : 12;
  const double dp = static_cast<double>(in.dp > 0 ? in.dp : 1);
  MemoryBreakdown m;
  m.weights = in.params * weight_b / (in.zero >= 3 ? dp : 1);
  m.gradients = in.params * grad_b / (in.zero >= 2 ? dp : 1);
  m.optimizer = in.params * optim_b / (in.zero >= 1 ? dp : 1);
  m.activations = in.activations;
  m.transient = in.transient;
  m.reserve = in.reserve;
  return m;
}

Json to_json(const MemoryBreakdown& m) {
  return {{"weights_bytes", m.weights},     {"gradients_bytes", m.gradients},
          {"optimizer_bytes", m.optimizer}, {"activations_bytes", m.activations},
          {"transient_bytes", m.transient}, {"reserve_bytes", m.reserve},
          {"total_bytes", m.total()}};
}

}  // namespace hetplan
