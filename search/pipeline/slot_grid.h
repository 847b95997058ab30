// Internal to building_block.cpp: the slot grid on which a building block is repeated, its W
// passes placed and its warm-up and cool-down reordered (Qi et al., NeurIPS 2024, §3).
#pragma once

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "search/pipeline/building_block.h"
#include "search/pipeline/pass_order.h"

namespace hetplan::pipeline::detail {

inline constexpr int kFree = -1;

// The slots of every pass of m repetitions of a block, per device, with the operations the
// paper applies to them. A pass id packs micro-batch, op and stage into bit fields, so that
// decoding one in the hot loops costs shifts rather than divisions.
class SlotGrid {
 public:
  SlotGrid(const BuildingBlock& block, int m)
      : block_(block),
        p_(static_cast<int>(block.per_device.size())),
        stages_(p_ * block.chunks),
        m_(m),
        stage_bits_(bit_width(stages_)),
        op_shift_(stage_bits_ + 2),
        device_of_stage_(stage_devices(block.placement, p_, block.chunks)),
        grid_(p_),
        slot_of_(static_cast<size_t>(m) << op_shift_, kFree) {
    bool has_w = false;
    for (int d = 0; d < p_; ++d)
      for (const BlockPass& bp : block.per_device[d]) {
        has_w |= bp.op == Op::kW;
        for (int k = 0; k < m; ++k) {
          const int slot = bp.slot + block.interval * k;
          if (at(d, slot) != kFree)
            throw std::logic_error(
                fmt::format("block {} collides on device {} slot {}", block.name, d, slot));
          place(d, id(bp.op, bp.stage, k), slot);
        }
      }
    if (!has_w) put_w();
  }

  int peak() const {
    int best = 0;
    for (int d = 0; d < p_; ++d) {
      int held = 0;
      for (int pass : grid_[d]) {
        if (pass == kFree) continue;
        if (op_of(pass) == Op::kF) best = std::max(best, ++held);
        if (op_of(pass) == Op::kW) --held;
      }
    }
    return best;
  }

  // Places every unplaced W in the first free slot after its B, oldest B first.
  void put_w() {
    for (int d = 0; d < p_; ++d) {
      std::deque<int> pending;
      for (int t = 0; t < static_cast<int>(grid_[d].size()) || !pending.empty(); ++t) {
        const int pass = at(d, t);
        if (pass == kFree) {
          if (!pending.empty()) {
            place(d, pending.front(), t);
            pending.pop_front();
          }
        } else if (op_of(pass) == Op::kB) {
          const int w = pass + (1 << stage_bits_);  // the W of the same stage and micro-batch
          if (slot_of_[w] == kFree) pending.push_back(w);
        }
      }
    }
  }

  void strip_w() {
    for (int d = 0; d < p_; ++d)
      for (int& pass : grid_[d])
        if (pass != kFree && op_of(pass) == Op::kW) {
          slot_of_[pass] = kFree;
          pass = kFree;
        }
  }

  // Moves passes of the warm-up and cool-down (with explicit W passes), or of the cool-down only
  // (W passes virtual: they fill free slots later), to the earliest free slot their dependencies
  // allow, as long as no device then holds more than `limit` activations. Warm-up: before the
  // first backward of stage 0; cool-down: once stage 0 has also started its last micro-batch.
  void reorder(bool warmup_with_w, int limit) {
    limit_ = limit;
    for (int d = 0; d < p_; ++d) profile(d, warmup_with_w);
    int horizon = 0;
    for (const auto& g : grid_) horizon = std::max(horizon, static_cast<int>(g.size()));
    // Slots strictly between the first backward of stage 0 and the last forward of stage 0 are
    // all in the steady phase: skip them.
    const int steady_from = slot_of_[id(Op::kB, 0, 0)];
    const int steady_to = std::max(steady_from, slot_of_[id(Op::kF, 0, m_ - 1)]);
    int phase = 0;
    bool seen_b0 = false, seen_last_f0 = false;
    for (int t = 0; t < horizon; ++t) {
      if (t > steady_from && t < steady_to) t = steady_to;
      for (int d = 0; d < p_; ++d) {
        const int pass = at(d, t);
        if (pass == kFree) continue;
        const Op op = op_of(pass);
        const int stage = stage_of(pass), mb = mb_of(pass);
        seen_b0 |= op == Op::kB && stage == 0;
        seen_last_f0 |= op == Op::kF && stage == 0 && mb == m_ - 1;
        if (phase == 0 && seen_b0) phase = 1;
        if (phase == 1) {
          if (seen_last_f0) phase = 2;
          continue;
        }
        if (phase == 0 && !warmup_with_w) continue;
        int earliest = earliest_slot(pass);
        if (!warmup_with_w && op != Op::kF) {
          // In the cool-down a backward never overtakes a forward: forwards feed the chain that
          // ends the iteration, and a longer B in front of them delays it.
          for (int x = t - 1; x >= earliest; --x)
            if (at(d, x) != kFree && op_of(at(d, x)) == Op::kF) {
              earliest = x + 1;
              break;
            }
        }
        for (int nt = earliest; nt < t; ++nt) {
          if (at(d, nt) != kFree) continue;
          if (warmup_with_w ? try_move_explicit(d, pass, t, nt) : try_move_virtual(d, pass, t, nt))
            break;
        }
      }
    }
  }

  PassOrder to_order(std::string variant) const {
    PassOrder o = make_order(block_.placement, p_, block_.chunks, m_, true);
    o.variant = std::move(variant);
    for (int d = 0; d < p_; ++d)
      for (int pass : grid_[d])
        if (pass != kFree) o.per_device[d].push_back({op_of(pass), stage_of(pass), mb_of(pass)});
    return o;
  }

 private:
  static int bit_width(int n) {
    int bits = 0;
    while ((1 << bits) < n) ++bits;
    return bits;
  }
  int id(Op op, int stage, int mb) const {
    return (mb << op_shift_) | (static_cast<int>(op) << stage_bits_) | stage;
  }
  Op op_of(int pass) const { return static_cast<Op>((pass >> stage_bits_) & 3); }
  int stage_of(int pass) const { return pass & ((1 << stage_bits_) - 1); }
  int mb_of(int pass) const { return pass >> op_shift_; }
  int at(int d, int slot) const {
    return slot < static_cast<int>(grid_[d].size()) ? grid_[d][slot] : kFree;
  }
  void place(int d, int pass, int slot) {
    if (slot >= static_cast<int>(grid_[d].size())) grid_[d].resize(slot + 1, kFree);
    grid_[d][slot] = pass;
    slot_of_[pass] = slot;
  }
  void move(int d, int pass, int from, int to) {
    grid_[d][from] = kFree;
    place(d, pass, to);
  }

  int earliest_slot(int pass) const {
    const Op op = op_of(pass);
    const int s = stage_of(pass), k = mb_of(pass);
    int e = 0;
    auto after = [&](int dep) { e = std::max(e, slot_of_[dep] + 1); };
    if (op == Op::kF && s > 0) after(id(Op::kF, s - 1, k));
    if (op == Op::kB) {
      after(id(Op::kF, s, k));
      if (s + 1 < stages_) after(id(Op::kB, s + 1, k));
    }
    if (op == Op::kW) after(id(Op::kB, s, k));
    if (k > 0) after(pass - (1 << op_shift_));
    return e;
  }

  // held_[d][x]: activations held during slot x. With explicit W: F counted from its slot, W
  // released after its slot. Virtual W: state at the start of slot x (held, pending W).
  void profile(int d, bool explicit_w) {
    const int n = static_cast<int>(grid_[d].size());
    held_[d].assign(n + 1, 0);
    pending_[d].assign(n + 1, 0);
    int held = 0, pending = 0;
    for (int x = 0; x < n; ++x) {
      const int pass = grid_[d][x];
      if (explicit_w) {
        if (pass != kFree && op_of(pass) == Op::kF) ++held;
        held_[d][x] = held;
        if (pass != kFree && op_of(pass) == Op::kW) --held;
      } else {
        held_[d][x] = held;
        pending_[d][x] = pending;
        step_virtual(pass, held, pending);
      }
    }
    held_[d][n] = held;
    pending_[d][n] = pending;
  }

  void step_virtual(int pass, int& held, int& pending) const {
    if (pass == kFree) {
      if (pending > 0) --pending, --held;
    } else if (op_of(pass) == Op::kF) {
      ++held;
    } else if (op_of(pass) == Op::kB) {
      ++pending;
    }
  }

  bool try_move_explicit(int d, int pass, int from, int to) {
    auto& held = held_[d];
    const Op op = op_of(pass);
    if (op == Op::kF) {
      for (int x = to; x < from; ++x)
        if ((x == to || (grid_[d][x] != kFree && op_of(grid_[d][x]) == Op::kF)) &&
            held[x] + 1 > limit_)
          return false;
      for (int x = to; x < from; ++x) ++held[x];
    } else if (op == Op::kW) {
      for (int x = to + 1; x <= from; ++x) --held[x];
    }
    move(d, pass, from, to);
    return true;
  }

  // Replays the device from `to` with the pass moved until the state matches the old one again.
  bool try_move_virtual(int d, int pass, int from, int to) {
    const int n = static_cast<int>(grid_[d].size());
    int held = held_[d][to], pending = pending_[d][to];
    int x = to;
    for (; x < n; ++x) {
      const int occupant = x == to ? pass : (x == from ? kFree : grid_[d][x]);
      step_virtual(occupant, held, pending);
      if (occupant != kFree && op_of(occupant) == Op::kF && held > limit_) return false;
      if (x >= from && held == held_[d][x + 1] && pending == pending_[d][x + 1]) break;
    }
    move(d, pass, from, to);
    // Refresh the stored states over the replayed range.
    held = held_[d][to];
    pending = pending_[d][to];
    const int last = std::min(x, n - 1);
    for (int y = to; y <= last; ++y) {
      held_[d][y] = held;
      pending_[d][y] = pending;
      step_virtual(grid_[d][y], held, pending);
    }
    held_[d][last + 1] = held;
    pending_[d][last + 1] = pending;
    return true;
  }

  const BuildingBlock& block_;
  int p_, stages_, m_;
  int stage_bits_, op_shift_;
  std::vector<int> device_of_stage_;
  std::vector<std::vector<int>> grid_;
  std::vector<int> slot_of_;
  std::vector<std::vector<int>> held_ = std::vector<std::vector<int>>(p_);
  std::vector<std::vector<int>> pending_ = std::vector<std::vector<int>>(p_);
  int limit_ = 0;
};

}  // namespace hetplan::pipeline::detail
