#include "costmodel/memory.h"

#include <algorithm>

#include "costmodel/whole_number.h"

namespace hetplan {

const MemoryLayout& megatron_memory_layout() {
  static const MemoryLayout kLayout = [] {
    MemoryLayout m;
    m.states[Dtype::kBf16] = {2, 4, 4, 8};
    m.states[Dtype::kFp16] = {2, 4, 4, 8};
    m.states[Dtype::kFp32] = {4, 4, 0, 8};
    m.sharding[1] = {false, false, true, true};
    m.sharding[2] = {false, true, true, true};
    m.sharding[3] = {true, true, true, true};
    m.context_bytes = kDefaultReserveBytes;
    return m;
  }();
  return kLayout;
}

StateBytes state_bytes(const MemoryLayout& layout, Dtype dtype) {
  const Dtype key = dtype == Dtype::kTf32  ? Dtype::kFp32
                    : dtype == Dtype::kFp8 ? Dtype::kBf16
                                           : dtype;
  if (auto it = layout.states.find(key); it != layout.states.end()) return it->second;
  // A layout that names one half precision covers the other (bf16 and fp16 keep the same states
  // in every framework hetplan describes); otherwise Megatron-LM's.
  const Dtype other = key == Dtype::kBf16 ? Dtype::kFp16 : key == Dtype::kFp16 ? Dtype::kBf16 : key;
  if (auto it = layout.states.find(other); it != layout.states.end()) return it->second;
  return megatron_memory_layout().states.at(key);
}

ShardedStates sharded_states(const MemoryLayout& layout, int zero) {
  if (zero <= 0) return {};
  if (auto it = layout.sharding.find(zero); it != layout.sharding.end()) return it->second;
  return megatron_memory_layout().sharding.at(zero);
}

MemoryBreakdown device_memory(const MemoryInput& in) {
  const MemoryLayout& layout = in.layout ? *in.layout : megatron_memory_layout();
  StateBytes b = state_bytes(layout, in.dtype);
  if (in.gradient_bytes > 0) b.gradients = in.gradient_bytes;
  const ShardedStates sh = sharded_states(layout, in.zero);
  MemoryBreakdown m;
  // The dense parameters shard over dp, the routed experts over their own replicas.
  const auto add_states = [&](double params, int64_t replicas) {
    const double dp = static_cast<double>(replicas > 0 ? replicas : 1);
    const auto share = [dp](bool sharded) { return sharded ? dp : 1.0; };
    m.weights += params * b.weights / share(sh.weights);
    m.gradients += params * b.gradients / share(sh.gradients);
    m.optimizer += sh.master == sh.optimizer
                       ? params * (b.master + b.optimizer) / share(sh.master)
                       : params * (b.master / share(sh.master) + b.optimizer / share(sh.optimizer));
  };
  // Frozen parameters hold their weights alone (as the layout stores weights), sharded as the
  // weights are.
  const auto add_frozen = [&](double params, int64_t replicas) {
    const double dp = static_cast<double>(replicas > 0 ? replicas : 1);
    m.weights += params * b.weights / (sh.weights ? dp : 1.0);
  };
  const double experts = std::clamp(in.expert_param_count, 0.0, in.param_count);
  const double expert_frozen = std::clamp(in.expert_frozen_param_count, 0.0, experts);
  const double frozen =
      std::clamp(in.frozen_param_count - expert_frozen, 0.0, in.param_count - experts);
  add_states(in.param_count - experts - frozen, in.dp);
  add_states(experts - expert_frozen, in.expert_dp);
  add_frozen(frozen, in.dp);
  add_frozen(expert_frozen, in.expert_dp);
  // A recipe's weight copies beside (or, for the copies-only parameters, instead of) the
  // half-precision weights, sharded as those are.
  const auto add_copies = [&](double copy_bytes, double only_params, int64_t replicas) {
    const double dp = static_cast<double>(replicas > 0 ? replicas : 1);
    m.weights += (copy_bytes - only_params * b.weights) / (sh.weights ? dp : 1.0);
  };
  const double only = std::clamp(in.low_precision_only_param_count, 0.0, in.param_count);
  const double expert_only = std::clamp(in.expert_low_precision_only_param_count, 0.0, only);
  const double expert_copies =
      std::clamp(in.expert_low_precision_weight_bytes, 0.0, in.low_precision_weight_bytes);
  add_copies(in.low_precision_weight_bytes - expert_copies, only - expert_only, in.dp);
  add_copies(expert_copies, expert_only, in.expert_dp);
  if (in.weights_gathered) {
    m.weights += in.param_count * dtype_bytes(in.dtype);
    m.gradients +=
        std::max(0.0, in.param_count - in.frozen_param_count) * in.accumulated_grad_bytes;
  }
  m.activations = in.activation_bytes;
  if (in.activation_bytes_with_gradients >= 0) {
    // Freed gradients: the peak activations before the first gradient pass, without them, or
    // the gradients beside what is held after it; the breakdown shows the larger.
    if (m.gradients + in.activation_bytes_with_gradients > in.activation_bytes)
      m.activations = in.activation_bytes_with_gradients;
    else
      m.gradients = 0;
  }
  // Data-parallel buckets beside the gradients (DDP without gradient_as_bucket_view): there
  // through the step, whether or not the gradients are.
  if (in.dp > 1 && in.zero == 0)
    m.gradients += std::max(0.0, in.param_count - in.frozen_param_count) * layout.dp_bucket_bytes;
  m.transient = in.transient_bytes;
  m.fragmentation = m.allocated() * layout.fragmentation;
  m.reserve = in.reserve_bytes;
  return m;
}

// Each part and the total rounded to the nearest byte on its own (whole_number_json): the parts
// may sum to total_bytes give or take 4 bytes.
Json to_json(const MemoryBreakdown& m) {
  return {{"weights_bytes", whole_number_json(m.weights)},
          {"gradients_bytes", whole_number_json(m.gradients)},
          {"optimizer_bytes", whole_number_json(m.optimizer)},
          {"activations_bytes", whole_number_json(m.activations)},
          {"transient_bytes", whole_number_json(m.transient)},
          {"fragmentation_bytes", whole_number_json(m.fragmentation)},
          {"reserve_bytes", whole_number_json(m.reserve)},
          {"allocated_bytes", whole_number_json(m.allocated())},
          {"total_bytes", whole_number_json(m.total())}};
}

}  // namespace hetplan
