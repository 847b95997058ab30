// Time of one fused (flash) attention pass on one GPU type. FlashAttention-2 and -3, cuDNN and
// hetplan's kernels all split the work the same way: a block of threads per 128 rows of the
// sequence (queries in the forward, keys in the backward) and head, which walks the other side
// of the sequence in tiles. So the time is bounded twice:
//
//   throughput:    FLOPs / (peak x e x s / (s + s_half) x d / (d + d_half))
//   critical path: the longest block's FLOPs (128 rows x the whole sequence) / (peak / SMs x e x
//                  d / (d + d_half)): with few heads x batch the grid has fewer blocks than the
//                  GPU has SMs, and the pass takes as long as one block walking the sequence
//
// combined as sqrt(throughput^2 + critical^2), plus a launch. s / (s + s_half) is what short
// sequences lose (each block's load and store, the causal diagonal); d / (d + d_half) what
// narrow heads lose (a tile's softmax costs the same at any head size, its products scale with
// it). Measured on the H100 (docs/costmodel.md "Attention"): hetplan's head-dim-64 forward at
// sequence 1024 takes 17 us at every batch x heads from 2 to 16, and its backward 73-98 us, where
// FLOPs alone give 1-9 and 5-39 us.
#pragma once

#include <cstdint>
#include <vector>

#include "costmodel/stats.h"

namespace hetplan {

// Rows of the sequence one block takes, and the p of the norm that joins the two bounds: both
// chosen on the H100's 92 attention timings (docs/costmodel.md); not fitted per file.
inline constexpr int64_t kAttentionBlockRows = 128;
inline constexpr double kAttentionBoundNorm = 2;

// What a pass does. batch_heads, seq and head_dim 0 = unknown: no critical path, no head term.
// `seq` is the queries' length; kv_seq the keys' (0: seq), longer where context parallelism keeps a
// share of the queries against every key; window > 0 bounds the keys each query attends
// (sliding-window attention).
struct AttentionWork {
  double flops = 0;  // executed (causal attention skips the masked half)
  int64_t batch_heads = 0, seq = 0, head_dim = 0;
  bool causal = true;
  int64_t kv_seq = 0;
  int64_t window = 0;
};

// (query, key) pairs `queries` queries attend over a sequence of `keys` keys, causal or not,
// within a window of `window` keys (0: none), the queries spread evenly over the sequence (as
// context parallelism's load balancing spreads them): keys^2 / 2 causal, keys x window - window^2
// / 2 causal in a window, each scaled by queries / keys.
double attended_pairs(int64_t queries, int64_t keys, bool causal, int64_t window);

// The coefficients of one pass (forward or backward).
struct AttentionCoefficients {
  double efficiency = 0.35;  // of the dense peak at long sequences and wide heads
  double seq_half = 0;       // 0: no loss at short sequences
  double head_dim_half = 0;  // 0: no loss at narrow heads
  // The pass's time inside a layer, among its GEMMs, over its time timed alone (the efficiency's
  // context): measured 1.23-1.33 for hetplan's kernels on the H100 (docs/costmodel.md
  // "Attention"); 1 where no timing shows both.
  double in_layer_factor = 1;
};

// Seconds of the pass without its launch, timed alone (without in_layer_factor).
double attention_time_s(const AttentionCoefficients& c, const AttentionWork& w, double peak_flops,
                        int64_t sm_count);

struct AttentionSample {
  AttentionWork work;
  double time_s = 0;
  bool in_layer = false;  // timed inside a whole layer (its CUPTI trace), not alone
};

struct AttentionFitResult {
  AttentionCoefficients coefficients;
  FitQuality quality;           // |error| over the samples, in-sample
  int64_t in_layer_points = 0;  // samples timed inside layers, where they had their own efficiency
};

// Timings of each context (alone, inside layers) the fit wants before it fits each its own
// efficiency; with fewer, they share one and in_layer_factor stays 1.
inline constexpr size_t kMinAttentionContextSamples = 3;

// Least squares on log time of launch_s + attention_time_s: seq_half on a grid (0 and 16 to 2^20
// in steps of 2^(1/8)), head_dim_half on another (0 and 4 to 1024 in steps of 2^(1/2)), the
// efficiency (at most 1) by golden-section search for each pair. seq_half is fitted only where
// the samples have two sequence lengths or more, head_dim_half where they have two head sizes.
// Samples timed alone and inside layers (kMinAttentionContextSamples of each) share the halves and
// get an efficiency each: `efficiency` is the alone one, in_layer_factor their ratio. No samples:
// `prior` unchanged.
AttentionFitResult fit_attention(const std::vector<AttentionSample>& samples, double peak_flops,
                                 int64_t sm_count, double launch_s,
                                 const AttentionCoefficients& prior);

}  // namespace hetplan
