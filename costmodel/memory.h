// Memory of one device: weights, gradients and Adam states (mixed precision, ZeRO stages 1-3),
// activations held at the pipeline's peak, transient buffers, and the CUDA context reserve.
#pragma once

#include <string>

#include "costmodel/document.h"
#include "costmodel/dtype.h"

namespace hetplan {

// Before calibration: CUDA context, cuBLAS workspace and NCCL buffers (docs/costmodel.md).
inline constexpr double kDefaultReserveBytes = 1.0 * (1ull << 30);

struct MemoryInput {
  double params = 0;           // parameters held by this device (its tensor-parallel shard)
  int64_t dp = 1;              // data-parallel degree (ZeRO shards over it)
  int zero = 0;                // 0 (none) .. 3
  Dtype dtype = Dtype::kBf16;  // training precision of weights and activations
  double activations = 0;      // activation bytes held at the pipeline's peak
  double transient = 0;        // working buffers of the layer being run (recomputed activations,
                               // gradients in flight, logits, p2p buffers, ZeRO-3 gathers)
  double reserve = kDefaultReserveBytes;
};

struct MemoryBreakdown {
  double weights = 0, gradients = 0, optimizer = 0, activations = 0, transient = 0, reserve = 0;
  double total() const {
    return weights + gradients + optimizer + activations + transient + reserve;
  }
};

// Mixed precision with Adam (Megatron-LM's layout): half-precision weights (2 B), fp32 main
// gradients (4 B), fp32 master weights and two moments (12 B); 18 B per parameter without ZeRO.
// ZeRO-1 shards the 12 B of optimizer state over dp, ZeRO-2 also the gradients, ZeRO-3 also the
// weights. fp32 training keeps 4 B weights, 4 B gradients and 8 B of moments.
MemoryBreakdown device_memory(const MemoryInput& in);

Json to_json(const MemoryBreakdown& m);

}  // namespace hetplan
