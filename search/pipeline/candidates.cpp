#include "search/pipeline/candidates.h"

#include <algorithm>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "search/pipeline/building_block.h"
#include "search/pipeline/classic_orders.h"

namespace hetplan::pipeline {
namespace {

// Schedules that can stand in for each other under an activation limit.
enum class Family { kOneChunk, kInterleaved, kZeroBubble, kVShape };

struct Entry {
  ScheduleInfo info;
  Family family;
  Candidates (*own)(const Shape&);
};

constexpr Reorder kReorders[] = {Reorder::kBoth, Reorder::kNone, Reorder::kWarmupAndCooldown,
                                 Reorder::kCooldownOnly};

void add_block(Candidates& c, const Shape& s, const BuildingBlock& block, int limit) {
  for (Reorder r : kReorders) {
    if (s.large && !c.orders.empty()) break;
    c.orders.push_back(expand_block(block, s.microbatches, limit, r));
  }
  c.try_guided = true;
}

Candidates single(PassOrder order, bool guided) {
  Candidates c;
  c.orders.push_back(std::move(order));
  c.try_guided = guided;
  return c;
}

Candidates own_gpipe(const Shape& s) {
  return single(gpipe_order(s.devices, s.microbatches), false);
}
Candidates own_1f1b(const Shape& s) {
  return single(one_f_one_b_order(s.devices, s.microbatches, 0), false);
}
Candidates own_interleaved(const Shape& s) {
  return single(interleaved_order(s.devices, s.microbatches, s.chunks, 0, s.interleaved), false);
}
Candidates own_zb(const Shape& s, const ZbRule& rule, const char* name) {
  PassOrder o = zb_order(s.devices, s.microbatches, rule);
  o.variant = name;
  return single(std::move(o), true);
}
Candidates own_zb_h1(const Shape& s) { return own_zb(s, zb_h1_rule(s.devices), "zb-h1"); }
Candidates own_zb_h2(const Shape& s) { return own_zb(s, zb_h2_rule(s.devices), "zb-h2"); }
Candidates own_block(const Shape& s, const BuildingBlock& block) {
  Candidates c;
  add_block(c, s, block, 0);
  return c;
}
Candidates own_v_min(const Shape& s) { return own_block(s, v_min_block(s.devices)); }
Candidates own_v_half(const Shape& s) { return own_block(s, v_half_block(s.devices)); }
Candidates own_v_zb(const Shape& s) { return own_block(s, v_zb_block(s.devices)); }

const std::vector<Entry>& table() {
  static const std::vector<Entry> kTable = {
      {{"gpipe", "GPipe: every forward, then every backward; holds all m micro-batches", 1, false},
       Family::kOneChunk,
       own_gpipe},
      {{"1f1b", "1F1B (PipeDream-Flush): warm-up forwards, then one forward, one backward; peak p",
        1, false},
       Family::kOneChunk,
       own_1f1b},
      {{"interleaved",
        "Megatron-LM interleaved 1F1B over --chunks virtual stages per device (stage j on device "
        "j mod p)",
        2, false, true},
       Family::kInterleaved,
       own_interleaved},
      {{"zb-h1",
        "ZB-H1 (Qi et al., ICLR 2024): B and W split, W delayed; 1F1B's peak, a third of its "
        "bubble when F=B=W",
        1, true},
       Family::kZeroBubble,
       own_zb_h1},
      {{"zb-h2",
        "ZB-H2 (Qi et al., ICLR 2024): extra warm-up forwards; peak 2p-1, no bubble inside any "
        "device's span when F=B=W",
        1, true},
       Family::kZeroBubble,
       own_zb_h2},
      {{"v-min",
        "V-Min (Qi et al., NeurIPS 2024): two chunks per device in a V; about 1/3 of 1F1B's "
        "activations",
        2, true},
       Family::kVShape,
       own_v_min},
      {{"v-half", "V-Half (Qi et al., NeurIPS 2024): V placement; about 1/2 of 1F1B's activations",
        2, true},
       Family::kVShape,
       own_v_half},
      {{"v-zb", "V-ZB (Qi et al., NeurIPS 2024): V placement; 1F1B's activations, near-zero bubble",
        2, true},
       Family::kVShape,
       own_v_zb},
  };
  return kTable;
}

const Entry& entry(std::string_view name) {
  for (const Entry& e : table())
    if (e.info.name == name) return e;
  throw InputError(fmt::format("unknown schedule '{}' (known: {})", name, schedule_names()));
}

bool same_order(const PassOrder& a, const PassOrder& b) {
  for (int d = 0; d < a.devices; ++d) {
    const auto &x = a.per_device[d], &y = b.per_device[d];
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i].op != y[i].op || x[i].stage != y[i].stage || x[i].microbatch != y[i].microbatch)
        return false;
  }
  return true;
}

void drop_duplicates(Candidates& c) {
  std::vector<PassOrder> kept;
  for (auto& o : c.orders)
    if (std::none_of(kept.begin(), kept.end(),
                     [&](const PassOrder& k) { return same_order(k, o); }))
      kept.push_back(std::move(o));
  c.orders = std::move(kept);
}

// The V family under limit K: every block whose plain repetition fits, reordered up to K (the
// one with the most memory first); below V-Min's own peak, V-Min's block repeated at a longer
// interval (fewer micro-batches in flight).
Candidates v_family(const Shape& s) {
  Candidates c;
  const int p = s.devices, m = s.microbatches;
  for (const BuildingBlock& b : {v_zb_block(p), v_half_block(p), v_min_block(p)})
    if ((!s.large || c.orders.empty()) && block_peak(b, std::min(m, 4 * p + 8)) <= s.limit)
      add_block(c, s, b, s.limit);
  if (!c.orders.empty()) return c;
  const BuildingBlock base = v_min_block(p);
  int span = 0;
  for (const auto& row : base.per_device)
    for (const BlockPass& bp : row) span = std::max(span, bp.slot + 3);
  for (int interval = base.interval + 1; interval <= 2 * span + 6; ++interval) {
    const BuildingBlock b = with_interval(base, interval);
    if (b.name.empty()) continue;
    // The peak settles once the blocks that overlap the first one are all present.
    const int sample = std::min(m, span / interval + 3);
    if (block_peak(b, sample) > s.limit) continue;
    add_block(c, s, b, s.limit);
    return c;
  }
  c.feasible = false;
  c.reason = fmt::format("no V schedule found within {} activations", s.limit);
  return c;
}

Candidates family_candidates(const Shape& s, Family family) {
  const int p = s.devices, m = s.microbatches, k = s.limit;
  Candidates c;
  switch (family) {
    case Family::kOneChunk:
      c.orders.push_back(one_f_one_b_order(p, m, std::min(k, p)));
      if (m <= k) c.orders.push_back(gpipe_order(p, m));
      return c;
    case Family::kInterleaved:
      c.orders.push_back(interleaved_order(p, m, s.chunks, k, s.interleaved));
      return c;
    case Family::kZeroBubble: {
      if (2 * p - 1 <= k) c.orders.push_back(own_zb_h2(s).orders.front());
      if (p <= k) c.orders.push_back(own_zb_h1(s).orders.front());
      const char* shapes[] = {"H1-like", "H2-like", "gap-filling"};
      int i = 0;
      for (const ZbRule& rule : zb_limited_rules(p, k)) {
        c.orders.push_back(zb_order(p, m, rule));
        c.orders.back().variant = fmt::format("zb, at most {} held ({})", k, shapes[i++]);
      }
      c.try_guided = true;
      return c;
    }
    case Family::kVShape:
      return v_family(s);
  }
  return c;
}

}  // namespace

const std::vector<ScheduleInfo>& schedules() {
  static const std::vector<ScheduleInfo> kInfos = [] {
    std::vector<ScheduleInfo> v;
    for (const Entry& e : table()) v.push_back(e.info);
    return v;
  }();
  return kInfos;
}

std::string schedule_names() {
  std::string known;
  for (const ScheduleInfo& info : schedules()) known += (known.empty() ? "" : ", ") + info.name;
  return known;
}

const ScheduleInfo& schedule_info(std::string_view name) { return entry(name).info; }

Shape resolve_shape(std::string_view schedule, const PipelineProblem& problem) {
  const Entry& e = entry(schedule);
  Shape s;
  s.info = &e.info;
  if (problem.devices < 1) throw InputError("pipeline devices (stages): need at least 1");
  if (problem.microbatches < 1) throw InputError("micro-batches: need at least 1");
  if (problem.chunks < 0) throw InputError("chunks: need 0 (the default) or more");
  if (problem.activation_limit < 0)
    throw InputError("activation limit: need 0 (the schedule's own) or a positive count");
  s.devices = problem.devices;
  s.microbatches = problem.microbatches;
  s.chunks = problem.chunks == 0 ? e.info.default_chunks : problem.chunks;
  s.limit = problem.activation_limit;
  if (e.family == Family::kInterleaved) s.interleaved = problem.interleaved;
  if (e.family != Family::kInterleaved && s.chunks != e.info.default_chunks)
    throw InputError(fmt::format("chunks: {} runs {} chunk(s) per device, not {}", e.info.name,
                                 e.info.default_chunks, s.chunks));
  const double passes = 3.0 * s.devices * s.chunks * s.microbatches;
  s.large = passes > kLargePasses;
  if (passes > 2.0e8)
    throw InputError(
        fmt::format("pipeline of {} devices x {} chunks x {} micro-batches is too "
                    "large to simulate (at most 2e8 passes)",
                    s.devices, s.chunks, s.microbatches));
  return s;
}

int minimum_limit(const Shape& s) {
  switch (entry(s.info->name).family) {
    case Family::kVShape:
      return 2;
    case Family::kInterleaved:
      return interleaved_min_in_flight(s.devices, s.microbatches, s.chunks, s.interleaved);
    default:
      return 1;
  }
}

Candidates build_candidates(const Shape& s) {
  const Entry& e = entry(s.info->name);
  Candidates c;
  if (s.limit > 0 && s.limit < minimum_limit(s)) {
    c.feasible = false;
    c.reason = fmt::format(
        "activation limit {} is below {}, the fewest chunk activations per device any {} "
        "schedule can hold for {} devices and {} micro-batches",
        s.limit, minimum_limit(s), e.info.name, s.devices, s.microbatches);
    return c;
  }
  c = s.limit > 0 ? family_candidates(s, e.family) : e.own(s);
  if (s.large) {
    c.orders.resize(std::min<size_t>(c.orders.size(), 1));
    c.try_guided = false;
  }
  drop_duplicates(c);
  for (PassOrder& o : c.orders) o.peaks = order_peaks(o);
  return c;
}

}  // namespace hetplan::pipeline
