// Memory of one device: weights, gradients and optimizer state in a framework's layout (mixed
// precision Adam, ZeRO stages 1-3 or FSDP), activations held at the pipeline's peak, transient
// buffers, the caching allocator's fragmentation, and the CUDA context with library and NCCL
// buffers.
#pragma once

#include <string>

#include "costmodel/document.h"
#include "costmodel/dtype.h"
#include "costmodel/framework.h"

namespace hetplan {

// Before calibration: CUDA context, cuBLAS workspace and NCCL buffers (docs/costmodel.md).
inline constexpr double kDefaultReserveBytes = 1.0 * (1ull << 30);

struct MemoryInput {
  double param_count = 0;  // parameters held by this device (its tensor-parallel shard)
  int64_t dp = 1;          // data-parallel degree (ZeRO shards over it)
  // Of `param_count`, the routed experts' (expert parallelism), whose states ZeRO shards over
  // their own data-parallel replicas, `expert_dp` of them (Megatron-Core's expert data-parallel
  // group).
  double expert_param_count = 0;
  int64_t expert_dp = 1;
  // Of `param_count`, those frozen (LoRA's base weights), and of `expert_param_count` the
  // experts' frozen ones (within the first): their weights
  // alone (the layout's weight bytes), with no gradient, master copy or optimizer state.
  double frozen_param_count = 0, expert_frozen_param_count = 0;
  // fp8 / fp4 copies of the weights a low-precision recipe keeps beside them (sharded with the
  // weights under ZeRO-3).
  double low_precision_weight_bytes = 0;
  // Of `param_count`, those held in the recipe's copies alone (no half-precision weight:
  // Megatron's --fp8-param-gather).
  double low_precision_only_param_count = 0;
  // Of the two above, the routed experts' (sharded over expert_dp under ZeRO-3, with the
  // experts' own weights).
  double expert_low_precision_weight_bytes = 0;
  double expert_low_precision_only_param_count = 0;
  int zero = 0;  // 0 (none) .. 3
  // ZeRO-3's weights held gathered through the step (MemoryLayout::gathered_with_pipeline): a
  // whole copy in the training dtype beside the shards, and the micro-batches' gradients added
  // into whole (unsharded) gradients of `accumulated_grad_bytes` per parameter until the last
  // one's reduce-scatter.
  bool weights_gathered = false;
  double accumulated_grad_bytes = 0;
  // > 0: the gradient buffer's bytes per parameter in place of the layout's (a layout whose
  // gradients are of the reduce dtype, MemoryLayout::gradients_in_reduce_dtype, reducing in half
  // precision).
  double gradient_bytes = 0;
  Dtype dtype = Dtype::kBf16;   // training precision of weights and activations
  double activation_bytes = 0;  // held at the pipeline's peak
  // Where the framework frees the gradients after each step (MemoryLayout::
  // gradients_freed_after_step lists the strategy's host mode): the most activations held from
  // the first gradient pass on, when the gradients exist; before that pass the peak
  // `activation_bytes` is held without them, and the peak is the larger of the two sums. < 0: the
  // gradients live through the step, beside the peak activations.
  double activation_bytes_with_gradients = -1;
  double transient_bytes = 0;  // working buffers of the layer being run (recomputed activations,
                               // gradients in flight, logits, p2p buffers, ZeRO-3 gathers)
  double reserve_bytes = kDefaultReserveBytes;  // CUDA context, libraries, NCCL buffers
  // The framework's layout of the parameter states and its allocator's fragmentation; nullptr:
  // Megatron-LM's (18 B per parameter, no fragmentation).
  const MemoryLayout* layout = nullptr;
};

struct MemoryBreakdown {
  double weights = 0, gradients = 0, optimizer = 0, activations = 0, transient = 0;
  double fragmentation = 0;  // reserved by the caching allocator beyond what it allocated
  double reserve = 0;        // outside the allocator: context, libraries, NCCL buffers
  // What the allocator hands out at the peak (torch.cuda.max_memory_allocated's view).
  double allocated() const { return weights + gradients + optimizer + activations + transient; }
  double reserved() const { return allocated() + fragmentation; }  // max_memory_reserved's
  double total() const { return reserved() + reserve; }            // the device in use
};

// The bytes per parameter of each state for `dtype` under `layout` (fp8 trains with bf16 states,
// tf32 with fp32 ones), and which of them ZeRO stage `zero` shards.
StateBytes state_bytes(const MemoryLayout& layout, Dtype dtype);
ShardedStates sharded_states(const MemoryLayout& layout, int zero);
// Megatron-LM's layout: bf16/fp16 weights (2 B), fp32 main gradients (4 B), fp32 master weights
// and two moments (12 B): 18 B per parameter; fp32 training keeps 4 B weights, 4 B gradients and
// 8 B of moments. ZeRO-1 shards the master weights and moments over dp, ZeRO-2 also the
// gradients, ZeRO-3 also the weights (Rajbhandari et al. 2020).
const MemoryLayout& megatron_memory_layout();

MemoryBreakdown device_memory(const MemoryInput& in);

Json to_json(const MemoryBreakdown& m);

}  // namespace hetplan
