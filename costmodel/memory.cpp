#include "costmodel/memory.h"

#include "costmodel/whole_number.h"

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

// Each part and the total rounded to the nearest byte on its own (whole_number_json): the parts
// may sum to total_bytes give or take 3 bytes.
Json to_json(const MemoryBreakdown& m) {
  return {{"weights_bytes", whole_number_json(m.weights)},
          {"gradients_bytes", whole_number_json(m.gradients)},
          {"optimizer_bytes", whole_number_json(m.optimizer)},
          {"activations_bytes", whole_number_json(m.activations)},
          {"transient_bytes", whole_number_json(m.transient)},
          {"reserve_bytes", whole_number_json(m.reserve)},
          {"total_bytes", whole_number_json(m.total())}};
}

}  // namespace hetplan
