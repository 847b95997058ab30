// Schedules built the way Qi et al., "Pipeline Parallelism with Controllable Memory" (NeurIPS
// 2024), Section 3, builds them: a building block (the slots of one micro-batch's passes on every
// device, one slot per pass) repeated every `interval` slots, W passes placed in free slots, then
// the warm-up and cool-down reordered without raising the peak, and finally squeezed (only the
// order is kept; the simulator times it).
#pragma once

#include <string>
#include <vector>

#include "search/pipeline/pass_order.h"

namespace hetplan::pipeline {

struct BlockPass {
  int slot;
  Op op;
  int stage;
};

struct BuildingBlock {
  std::string name;
  Placement placement = Placement::kVShape;
  int chunks = 2;
  int interval = 6;  // slots between consecutive micro-batches' blocks
  std::vector<std::vector<BlockPass>> per_device;  // micro-batch 0; W passes optional
};

// V-shape blocks (device i holds stages i and 2p-1-i) with the paper's stage offsets in slots:
// forward down, forward up, backward of the up chunk, backward of the down chunk.
// V-Min: offsets 1,1,1,1 — peak about 1/3 of 1F1B's activations.
BuildingBlock v_min_block(int devices);
// V-Half: offsets 2,1,2,1 — peak about 1/2 of 1F1B's.
BuildingBlock v_half_block(int devices);
// V-ZB: offsets 4,2,4,2 with each W right after its B — 1F1B's peak, no bubble in steady state.
BuildingBlock v_zb_block(int devices);
// The same block repeated every `interval` slots, or an empty name when passes would collide.
BuildingBlock with_interval(const BuildingBlock& block, int interval);

// Which reordering passes expand_block runs.
enum class Reorder {
  kNone,               // the plain repetition, squeezed
  kWarmupAndCooldown,  // move warm-up (with W) and cool-down passes earlier
  kCooldownOnly,       // only the cool-down, W passes left to fill free slots afterwards
  kBoth,               // warm-up with W, then cool-down without W (the paper's two passes)
};

// Peak chunk activations per device of the plain repetition for m micro-batches.
int block_peak(const BuildingBlock& block, int microbatches);

// Repeats the block m times, places the W passes and reorders under `limit` chunk activations per
// device (at least the plain repetition's peak). Returns the squeezed pass order. Beyond
// steady_microbatches(block) + 8 micro-batches it builds that many and repeats the steady period.
PassOrder expand_block(const BuildingBlock& block, int microbatches, int limit, Reorder reorder,
                       bool allow_splice = true);
// Micro-batches enough for a steady middle between warm-up and cool-down.
int steady_microbatches(const BuildingBlock& block);

}  // namespace hetplan::pipeline
