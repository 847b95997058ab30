// Step 4 of a prediction: the layer partition, when the strategy leaves it open. The fastest
// slowest virtual stage, with memory limits where one chunk per device makes them exact
// (in-flight micro-batches from the schedule's own peak); for chunked schedules the busiest
// device, refined by simulation.
#include <algorithm>
#include <cmath>
#include <limits>

#include "search/eval/steps.h"
#include "search/partition.h"

namespace hetplan::eval {
namespace {

// The refinement's simulation budget per split, in stages x micro-batches (one simulation costs
// about that many pass triples): 96 simulations for AMP's GPT-2 V-ZB plan (8 stages, 8
// micro-batches), a few for 64 stages and 16 micro-batches, none where one simulation is long.
constexpr int64_t kRefineBudget = 6144;
// What a better split could still gain, as a share of the makespan, below which it is not sought.
constexpr double kRefineMinGain = 0.005;

// The exact V split is used up to this many pipeline ranks x layers^2 (8 ranks of 100 layers);
// its sweeps grow with both. Beyond, with few layers per stage, the local search of
// balance_device_loads and the refinement do. On the dev VM the 1024-GPU GPT-3 search took 26.2 s
// of CPU with no exact split, 28.2 s up to 4 x 100^2, 33.1 s up to this, 55 s with no limit.
constexpr double kExactSplitSize = 8 * 100 * 100;

// Whether stage j runs on device j before the turn and 2P-1-j after it (the V schedules).
bool v_placement(const std::vector<int64_t>& dev) {
  const int64_t S = static_cast<int64_t>(dev.size());
  const int64_t P = *std::max_element(dev.begin(), dev.end()) + 1;
  bool nested = S == 2 * P;
  for (int64_t j = 0; j < S && nested; ++j) nested = dev[j] == (j < P ? j : S - 1 - j);
  return nested;
}

// Several stages per device (interleaved, V family): the busiest device, not the slowest stage,
// bounds the iteration. Of the device-balanced split (exact for the V placement, a local search
// from the stage-balanced one otherwise) and the stage-balanced one, the one the schedule runs
// faster, with its makespan.
std::pair<PartitionResult, double> chunked_start(const PartitionInput& in,
                                                 const std::vector<int64_t>& dev,
                                                 const std::vector<double>& limit,
                                                 const PartitionResult& by_stage,
                                                 const SplitMakespan& makespan) {
  const double size = static_cast<double>(dev.size()) / 2 * std::pow(in.time_s[0].size(), 2);
  PartitionResult by_device = v_placement(dev) && size <= kExactSplitSize
                                  ? partition_v_devices(in, limit, by_stage.ranges)
                                  : PartitionResult{};
  if (!by_device.feasible) by_device = balance_device_loads(in, dev, limit, by_stage);
  const double device_s = makespan(by_device.ranges);
  if (by_device.ranges == by_stage.ranges) return {by_device, device_s};
  const double stage_s = makespan(by_stage.ranges);
  return stage_s < device_s ? std::make_pair(by_stage, stage_s)
                            : std::make_pair(by_device, device_s);
}

// The most a device's weights, gradients, optimizer state and one micro-batch of activations
// take of its memory: above 1 the split cannot fit.
double chunked_split_fits(const PartitionInput& in, const std::vector<int64_t>& dev,
                          const std::vector<double>& limit, const std::vector<LayerRange>& ranges) {
  std::vector<double> need(limit.size(), 0);
  for (size_t j = 0; j < ranges.size(); ++j)
    for (int64_t i = ranges[j].first; i <= ranges[j].second; ++i)
      need[dev[j]] += in.static_bytes[j][i] + in.activation_bytes[j][i];
  double worst = 0;
  for (size_t d = 0; d < limit.size(); ++d) worst = std::max(worst, need[d] / limit[d]);
  return worst;
}

// Refines a chunked split by simulation, unless even a perfect one (the micro-batches times the
// average device's work) would gain little.
PartitionResult refine_chunked(const PartitionInput& in, const std::vector<int64_t>& dev,
                               const std::vector<double>& limit,
                               const std::pair<PartitionResult, double>& start,
                               const SplitMakespan& makespan, int64_t microbatches) {
  const int64_t S = static_cast<int64_t>(dev.size());
  const int64_t P = *std::max_element(dev.begin(), dev.end()) + 1;
  double average_s = 0;
  for (size_t i = 0; i < in.time_s[0].size(); ++i) {
    double cheapest = in.time_s[0][i];
    for (const auto& row : in.time_s) cheapest = std::min(cheapest, row[i]);
    average_s += cheapest / static_cast<double>(P);
  }
  const double gain_s = start.second - static_cast<double>(microbatches) * average_s;
  if (gain_s < kRefineMinGain * start.second) return start.first;
  return refine_by_makespan(in, dev, limit, start.first, makespan,
                            kRefineBudget / (S * microbatches));
}

// What the partition sees of each virtual stage's candidate layers: time, static bytes (weights,
// gradients, optimizer state), activations, transients; the limit where it is exact.
PartitionInput partition_input(const Evaluator& ev, const Strategy& s, const Placement& p,
                               const std::vector<Rank>& ranks) {
  const std::vector<double> in_flight = ev.stage_peaks(s);
  const bool one_chunk = s.chunks_per_device() == 1;
  PartitionInput in;
  for (size_t j = 0; j < p.rank_of_stage.size(); ++j) {
    const Rank& r = ranks[p.rank_of_stage[j]];
    std::vector<double> t, stat, act, tr;
    for (const auto& c : r.costs()) {
      t.push_back(c.total_s());
      const MemoryInput states = parameter_states(ev, s, r.dtype, held_by(c));
      stat.push_back(device_memory(states).allocated());
      act.push_back(c.activation_bytes);
      tr.push_back(c.transient_bytes);
    }
    in.time_s.push_back(std::move(t));
    in.static_bytes.push_back(std::move(stat));
    in.activation_bytes.push_back(std::move(act));
    in.transient_bytes.push_back(std::move(tr));
    in.in_flight.push_back(in_flight[j]);
    in.limit_bytes.push_back(one_chunk ? r.limit_bytes : std::numeric_limits<double>::max());
  }
  return in;
}

// No partition fits: how far off is the average device (bytes needed over bytes available).
double average_overflow(const PartitionInput& in, const std::vector<Rank>& ranks,
                        const std::vector<int64_t>& dev) {
  const double S = static_cast<double>(dev.size());
  double need = 0, have = 0;
  for (size_t j = 0; j < dev.size(); ++j) {
    for (size_t i = 0; i < in.static_bytes[j].size(); ++i)
      need += (in.static_bytes[j][i] + in.in_flight[j] * in.activation_bytes[j][i]) / S;
    have += ranks[dev[j]].limit_bytes / S;
  }
  return need / have;
}

Prediction unfit(double overflow) {
  Prediction p = infeasible(Infeasible::kNoPartition, "no layer partition fits in device memory");
  p.overflow = overflow;
  return p;
}

// The schedule's makespan on a split: one micro-batch's passes per stage and the activations sent
// between them; the rest of the iteration does not depend on where the cuts fall. Virtual stage
// j's devices send its output to stage j + 1's (free on the V's turn).
SplitMakespan split_makespan(const Evaluator& ev, const Strategy& s, const Placement& p,
                             const std::vector<Rank>& ranks,
                             const pipeline::PipelineProblem& base) {
  const std::vector<int64_t>& dev = p.rank_of_stage;
  const int64_t S = static_cast<int64_t>(dev.size());
  std::vector<Link> link(S);
  for (int64_t j = 0; j + 1 < S; ++j)
    if (dev[j + 1] != dev[j])
      link[j] = link_between(ev.cluster(), ev.devices()[p.groups[dev[j]].front()],
                             ev.devices()[p.groups[dev[j + 1]].front()]);
  return [&ev, &s, &ranks, &base, dev, link, S](const std::vector<LayerRange>& split) {
    pipeline::PipelineProblem q = base;
    q.forward_s.assign(S, 0);
    q.backward_input_s.assign(S, 0);
    q.backward_weight_s.assign(S, 0);
    q.p2p_s.assign(std::max<int64_t>(1, S - 1), 0);
    for (int64_t j = 0; j < S; ++j) {
      const auto& costs = ranks[dev[j]].costs();
      for (int64_t i = split[j].first; i <= split[j].second; ++i) {
        const LayerTimes& t = costs[i].times;
        q.forward_s[j] += t.pass_s[0];
        q.backward_input_s[j] += t.pass_s[1];
        q.backward_weight_s[j] += t.pass_s[2];
      }
      if (j + 1 < S && dev[j + 1] != dev[j])
        q.p2p_s[j] = ev.cost().p2p_s(costs[split[j].second].output_bytes, link[j]);
    }
    const pipeline::PipelineResult r = pipeline::estimate(s.schedule, q);
    return r.feasible ? r.makespan_s : std::numeric_limits<double>::infinity();
  };
}

}  // namespace

PartitionOutcome partition(const Evaluator& ev, const Strategy& s, const Placement& p,
                           const std::vector<Rank>& ranks, const pipeline::PipelineProblem& base,
                           const PredictOptions& options) {
  if (!p.ranges.empty()) return {p.ranges, std::nullopt};
  const std::vector<int64_t>& dev = p.rank_of_stage;
  const bool chunked = s.chunks_per_device() > 1;
  PartitionInput in = partition_input(ev, s, p, ranks);
  PartitionResult part = partition_layers_greedy(in);
  if (!part.feasible) {
    if (options.skip_unfit) return {{}, unfit(average_overflow(in, ranks, dev))};
    std::fill(in.limit_bytes.begin(), in.limit_bytes.end(), std::numeric_limits<double>::max());
    part = partition_layers_greedy(in);
  }
  if (!chunked) return {part.ranges, std::nullopt};
  std::vector<double> limit;
  for (const Rank& r : ranks) limit.push_back(r.limit_bytes);
  const SplitMakespan makespan = split_makespan(ev, s, p, ranks, base);
  const auto start = chunked_start(in, dev, limit, part, makespan);
  part = start.first;
  if (!options.skip_unfit || chunked_split_fits(in, dev, limit, part.ranges) <= 1)
    part = refine_chunked(in, dev, limit, start, makespan, s.microbatches());
  // Chunked schedules were partitioned by time alone: a device whose weights, gradients,
  // optimizer state and one micro-batch of activations already overflow cannot fit.
  if (options.skip_unfit) {
    const double worst = chunked_split_fits(in, dev, limit, part.ranges);
    if (worst > 1) return {{}, unfit(worst)};
  }
  return {part.ranges, std::nullopt};
}

}  // namespace hetplan::eval
