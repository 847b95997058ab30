// Step 8 of a prediction: the memory of each pipeline rank's devices at the schedule's peak.
#include <algorithm>

#include <fmt/format.h>

#include "search/eval/steps.h"

namespace hetplan::eval {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string overflow_reason(int64_t d, const GpuSpec& gpu, const MemoryBreakdown& m,
                            int peak_activations) {
  return fmt::format(
      "pipeline rank {} ({}) needs {:.1f} GiB per GPU, it has {:.1f} GiB (weights+grads+"
      "optimizer {:.1f}, activations {:.1f} for a peak of {} chunk activations, transient "
      "{:.1f}, {}reserve {:.1f})",
      d, gpu.name, m.total() / kGiB, gpu.memory_bytes / kGiB,
      (m.weights + m.gradients + m.optimizer) / kGiB, m.activations / kGiB, peak_activations,
      m.transient / kGiB,
      m.fragmentation > 0 ? fmt::format("fragmentation {:.1f}, ", m.fragmentation / kGiB) : "",
      m.reserve / kGiB);
}

}  // namespace

HeldParameters held_by(const LayerCost& c) {
  return {c.param_count,
          c.expert_param_count,
          c.frozen_param_count,
          c.expert_frozen_param_count,
          c.low_precision_weight_bytes,
          c.expert_low_precision_weight_bytes,
          c.quantized_param_count,
          c.expert_quantized_param_count};
}

HeldParameters held_by(const StageTimes& t, size_t d) {
  return {t.params[d],
          t.expert_params[d],
          t.frozen_params[d],
          t.expert_frozen_params[d],
          t.low_precision_bytes[d],
          t.expert_low_precision_bytes[d],
          t.quantized_params[d],
          t.expert_quantized_params[d]};
}

MemoryInput parameter_states(const Evaluator& ev, const Strategy& s, Dtype dtype,
                             const HeldParameters& held) {
  MemoryInput mem;
  mem.param_count = held.params;
  mem.dp = s.grad_replicas();
  mem.expert_param_count = held.expert_params;
  mem.expert_dp = s.expert_dp();
  mem.frozen_param_count = held.frozen_params;
  mem.expert_frozen_param_count = held.expert_frozen_params;
  mem.low_precision_weight_bytes = held.low_precision_bytes;
  mem.expert_low_precision_weight_bytes = held.expert_low_precision_bytes;
  if (s.low_precision_params && is_quantized(s.precision)) {
    mem.low_precision_only_param_count = held.quantized_params;
    mem.expert_low_precision_only_param_count = held.expert_quantized_params;
  }
  mem.zero = s.zero;
  // FSDP2 without a reduce between micro-batches (the pipeline schedule's no-sync backward) adds
  // each one's gradients into a whole gradient, in the reduce dtype where it differs from the
  // parameters' (FSDPParam.to_accumulated_grad_if_needed: unsharded_accumulated_grad).
  mem.weights_gathered = weights_stay_gathered(ev.framework(), s);
  mem.accumulated_grad_bytes = s.fp32_grad_reduce ? 4.0 : dtype_bytes(dtype);
  if (ev.framework().memory.gradients_in_reduce_dtype && !s.fp32_grad_reduce)
    mem.gradient_bytes = dtype_bytes(dtype);
  mem.dtype = dtype;
  mem.layout = &ev.framework().memory;
  return mem;
}

MemoryBreakdown rank_memory_of(const Evaluator& ev, const Strategy& s, const Rank& rank,
                               const StageTimes& t, const pipeline::PipelineResult& pipe, size_t d,
                               std::string& overflow) {
  const GpuSpec& gpu = *rank.mem_gpu;
  MemoryInput mem = parameter_states(ev, s, rank.dtype, held_by(t, d));
  mem.activation_bytes = pipe.peak_activation_bytes.empty() ? 0 : pipe.peak_activation_bytes[d];
  const auto& freed = ev.framework().memory.gradients_freed_after_step;
  if (std::find(freed.begin(), freed.end(), s.host_mode) != freed.end() &&
      d < pipe.activation_bytes_with_gradients.size())
    mem.activation_bytes_with_gradients = pipe.activation_bytes_with_gradients[d];
  mem.transient_bytes = t.transient[d];
  mem.reserve_bytes = reserve_bytes(ev, s, gpu);
  const MemoryBreakdown memory = device_memory(mem);
  overflow.clear();
  if (memory.total() > gpu.memory_bytes)
    overflow = overflow_reason(static_cast<int64_t>(d), gpu, memory, pipe.peak_activation[d]);
  return memory;
}

std::vector<MemoryBreakdown> rank_memory(const Evaluator& ev, const Strategy& s,
                                         const std::vector<Rank>& ranks, const StageTimes& t,
                                         const pipeline::PipelineResult& pipe, Prediction& out) {
  std::vector<MemoryBreakdown> memory(ranks.size());
  std::string overflow;
  for (size_t d = 0; d < ranks.size(); ++d) {
    memory[d] = rank_memory_of(ev, s, ranks[d], t, pipe, d, overflow);
    out.peak_memory_bytes.push_back(memory[d].total());
    if (out.feasible && !overflow.empty()) {
      out.feasible = false;
      out.kind = Infeasible::kMemory;
      out.reason = overflow;
    }
  }
  return memory;
}

}  // namespace hetplan::eval
