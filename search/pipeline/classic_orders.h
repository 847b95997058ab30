// Pass orders given by simple per-device rules: GPipe, 1F1B (with an in-flight cap), Megatron's
// interleaved 1F1B, and the ZB-H1 / ZB-H2 family of Qi et al., "Zero Bubble Pipeline
// Parallelism" (ICLR 2024), Section 2.
#pragma once

#include <vector>

#include "search/pipeline/pass_order.h"
#include "search/pipeline/schedule.h"

namespace hetplan::pipeline {

// All forwards, then all backwards (B carries B+W). Peak m on every device.
PassOrder gpipe_order(int devices, int microbatches);

// 1F1B: device i runs min(p-1-i, in_flight-1) warm-up forwards, then alternates F and B (B carries
// B+W). in_flight = 0 means p. Peak min(p-i, in_flight, m) on device i.
PassOrder one_f_one_b_order(int devices, int microbatches, int in_flight);

// Interleaved 1F1B with `chunks` virtual stages per device (stage j on device j mod p):
// micro-batches go in groups through every chunk; device d runs 2(p-1-d) + (chunks-1) x group
// warm-up forwards, lowered to in_flight-1 when in_flight > 0 (never below what the order needs to
// proceed). The group and the warm-up's cap are `order`'s (schedule.h InterleavedOrder): p and
// Megatron-LM's all-forward case at m == p, or PyTorch's rounds. Backward not split.
PassOrder interleaved_order(int devices, int microbatches, int chunks, int in_flight,
                            InterleavedOrder order = InterleavedOrder::kMegatron);
// Fewest chunk activations per device the interleaved order can run with.
int interleaved_min_in_flight(int devices, int microbatches, int chunks,
                              InterleavedOrder order = InterleavedOrder::kMegatron);
// Micro-batches per group of the interleaved order: p (Megatron-LM), or m / max(1, m / p)
// (PyTorch's microbatches_per_round, where the rounds divide m; p otherwise).
int interleaved_group(int devices, int microbatches, InterleavedOrder order);

// One-chunk schedules with B and W split. Device i runs warmup[i] forwards before its first B,
// then one B and one F per step; after each B it runs W passes until at most lag[i] are pending,
// and before each F it runs W passes until fewer than cap activations are held.
struct ZbRule {
  std::vector<int> warmup, lag;
  int cap = 0;
};
PassOrder zb_order(int devices, int microbatches, const ZbRule& rule);

// ZB-H1: warm-up p-i, W lag i, cap p: every device holds p activations, like 1F1B's first device;
// bubble (p-1)(F+B-W) instead of 1F1B's (p-1)(F+B+W).
ZbRule zb_h1_rule(int devices);
// ZB-H2: warm-up 2(p-1-i)+1, W lag 2i, cap 2p-1: the parallelogram with no bubble inside any
// device's span when F = B = W.
ZbRule zb_h2_rule(int devices);
// Candidate rules of the ZB family under an activation limit K (cap K): ZB-H1-like and
// ZB-H2-like shapes scaled to K, and a warm-up that fills the gap before the first B
// (2(p-1-i)+1 forwards) as far as K allows. The caller keeps the fastest.
std::vector<ZbRule> zb_limited_rules(int devices, int limit);

}  // namespace hetplan::pipeline
