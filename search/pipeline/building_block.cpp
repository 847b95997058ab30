#include "search/pipeline/building_block.h"

#include <algorithm>
#include <deque>
#include <stdexcept>

#include <fmt/format.h>

#include "search/pipeline/slot_grid.h"

namespace hetplan::pipeline {
namespace {

using detail::SlotGrid;

BuildingBlock v_block(int p, const char* name, int (*slots)(int p, int i, int which)) {
  BuildingBlock b;
  b.name = name;
  b.per_device.resize(p);
  const int last = 2 * p - 1;
  for (int i = 0; i < p; ++i)
    b.per_device[i] = {{slots(p, i, 0), Op::kF, i},
                       {slots(p, i, 1), Op::kF, last - i},
                       {slots(p, i, 2), Op::kB, last - i},
                       {slots(p, i, 3), Op::kB, i}};
  return b;
}

}  // namespace

BuildingBlock v_min_block(int p) {
  // Every pass starts as soon as its predecessor ends: forward chain then backward chain.
  return v_block(p, "v-min", [](int p, int i, int which) {
    const int gap = p % 3 == 0 ? 2 : 0;  // keeps the four passes on distinct slots mod 6
    const int slots[] = {i, 2 * p - 1 - i, 2 * p + gap + i, 4 * p + gap - 1 - i};
    return slots[which];
  });
}

BuildingBlock v_half_block(int p) {
  return v_block(p, "v-half", [](int p, int i, int which) {
    const int gap = p % 2 == 0 ? 3 : 0;
    const int slots[] = {2 * i, 3 * p - 2 - i, 3 * p - 1 + gap + 2 * i, 6 * p - 2 + gap - i};
    return slots[which];
  });
}

BuildingBlock v_zb_block(int p) {
  BuildingBlock b = v_block(p, "v-zb", [](int p, int i, int which) {
    const int slots[] = {4 * i, 6 * p - 3 - 2 * i, 6 * p - 2 + 4 * i, 12 * p - 5 - 2 * i};
    return slots[which];
  });
  // Each W right after its B fills the six slots of the interval.
  for (int i = 0; i < p; ++i) {
    auto& row = b.per_device[i];
    row.push_back({row[2].slot + 1, Op::kW, row[2].stage});
    row.push_back({row[3].slot + 1, Op::kW, row[3].stage});
  }
  return b;
}

BuildingBlock with_interval(const BuildingBlock& block, int interval) {
  BuildingBlock b = block;
  b.interval = interval;
  b.name = fmt::format("{} every {} slots", block.name, interval);
  for (const auto& row : b.per_device) {
    std::vector<char> used(interval, 0);
    for (const BlockPass& bp : row) {
      char& u = used[bp.slot % interval];
      if (u) return BuildingBlock{};
      u = 1;
    }
  }
  return b;
}

int block_peak(const BuildingBlock& block, int m) { return SlotGrid(block, m).peak(); }

namespace {

PassOrder build(const BuildingBlock& block, int m, int limit, Reorder reorder) {
  SlotGrid grid(block, m);
  const int cap = std::max(limit, grid.peak());
  const char* how = "plain";
  switch (reorder) {
    case Reorder::kNone:
      break;
    case Reorder::kWarmupAndCooldown:
      grid.reorder(true, cap);
      how = "reordered with W";
      break;
    case Reorder::kCooldownOnly:
      grid.strip_w();
      grid.reorder(false, cap);
      grid.put_w();
      how = "cool-down reordered";
      break;
    case Reorder::kBoth:
      grid.reorder(true, cap);
      grid.strip_w();
      grid.reorder(false, cap);
      grid.put_w();
      how = "reordered";
      break;
  }
  return grid.to_order(fmt::format("{} block, {}, limit {}", block.name, how, cap));
}

// Inserts `extra` micro-batches into the steady middle of every device's order: there the order
// repeats one period (one pass of each of the device's streams) per micro-batch, so the inserted
// periods are copies with the micro-batch advanced. Returns false, leaving `order` as it was, when
// some device shows no stretch of two whole periods.
bool splice(PassOrder& order, int extra) {
  const int m = order.microbatches;
  std::vector<std::vector<Pass>> spliced(order.devices);
  for (int d = 0; d < order.devices; ++d) {
    const auto& seq = order.per_device[d];
    const size_t period = seq.size() / m, n = seq.size();
    // Longest run of positions j where seq[j + period] repeats seq[j] one micro-batch later.
    size_t run = 0, cut = 0;
    const size_t want = 2 * period;
    for (size_t j = n / 2; j + period < n && cut == 0; ++j) {
      const Pass &a = seq[j], &b = seq[j + period];
      run = a.op == b.op && a.stage == b.stage && b.microbatch == a.microbatch + 1 ? run + 1 : 0;
      if (run == want) cut = j + 1 - period;  // a whole period repeats on either side of cut
    }
    if (cut == 0) return false;
    auto& out = spliced[d];
    out.reserve(n + extra * period);
    out.insert(out.end(), seq.begin(), seq.begin() + cut);
    for (int k = 0; k < extra; ++k)
      for (size_t r = 0; r < period; ++r) {
        Pass p = seq[cut + r];
        p.microbatch += k;
        out.push_back(p);
      }
    for (size_t j = cut; j < n; ++j) {
      Pass p = seq[j];
      p.microbatch += extra;
      out.push_back(p);
    }
  }
  order.per_device = std::move(spliced);
  order.microbatches = m + extra;
  return true;
}

}  // namespace

int steady_microbatches(const BuildingBlock& block) {
  int span = 0;
  for (const auto& row : block.per_device)
    for (const BlockPass& bp : row) span = std::max(span, bp.slot + 1);
  // Warm-up and cool-down each reach about one block span; leave a steady middle between them.
  return 2 * (span / block.interval + 2) + 8;
}

PassOrder expand_block(const BuildingBlock& block, int m, int limit, Reorder reorder,
                       bool allow_splice) {
  const int small = steady_microbatches(block);
  if (allow_splice && m > small + 8) {
    PassOrder order = build(block, small, limit, reorder);
    if (splice(order, m - small)) return order;
  }
  return build(block, m, limit, reorder);
}

}  // namespace hetplan::pipeline
