// Property tests of the pipeline simulator on random problems (fixed seeds): every timeline is a
// valid schedule of its problem, and the fast estimate agrees with the full simulation.
#include <algorithm>
#include <map>
#include <random>
#include <thread>
#include <tuple>

#include <gtest/gtest.h>

#include "search/pipeline/building_block.h"
#include "search/pipeline/schedule.h"

namespace hetplan::pipeline {
namespace {

struct Random {
  std::mt19937 gen;
  explicit Random(unsigned seed) : gen(seed) {}
  int integer(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen); }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen); }
  std::vector<double> times(int n, double lo, double hi) {
    if (integer(0, 2) == 0) return {real(lo, hi)};
    std::vector<double> v(n);
    for (double& x : v) x = real(lo, hi);
    return v;
  }
};

double at(const std::vector<double>& v, int i) { return v.size() == 1 ? v[0] : v[i]; }

// Checks the timeline against the problem and returns nothing; failures name the pass.
void check_timeline(const std::string& name, const PipelineProblem& pr, const PipelineResult& r) {
  const ScheduleInfo& info = schedule_info(name);
  const int v = pr.chunks == 0 ? info.default_chunks : pr.chunks;
  const int stages = pr.devices * v;
  const bool split = info.splits_backward;
  std::map<std::tuple<char, int, int>, const TimedPass*> by_key;
  std::vector<std::vector<const TimedPass*>> per_device(pr.devices);
  std::vector<int> device_of_stage(stages, -1);
  for (const TimedPass& t : r.timeline) {
    ASSERT_TRUE(by_key.emplace(std::tuple{t.op, t.stage, t.microbatch}, &t).second)
        << name << ": pass twice " << t.op << t.stage << "/" << t.microbatch;
    per_device[t.device].push_back(&t);
    if (device_of_stage[t.stage] < 0) device_of_stage[t.stage] = t.device;
    ASSERT_EQ(device_of_stage[t.stage], t.device) << name << ": stage on two devices";
    // Durations are the problem's.
    const double want = t.op == 'F'   ? at(pr.forward_s, t.stage)
                        : t.op == 'W' ? at(pr.backward_weight_s, t.stage)
                        : split
                            ? at(pr.backward_input_s, t.stage)
                            : at(pr.backward_input_s, t.stage) + at(pr.backward_weight_s, t.stage);
    EXPECT_NEAR(t.end_s - t.start_s, want, 1e-9);
  }
  ASSERT_EQ(r.timeline.size(), size_t(stages) * pr.microbatches * (split ? 3 : 2)) << name;
  const double eps = 1e-9 * std::max(1.0, r.makespan_s);
  auto p2p = [&](int a) {
    return device_of_stage[a] == device_of_stage[a + 1] ? 0.0 : at(pr.p2p_s, a);
  };
  for (const auto& [key, t] : by_key) {
    const char op = std::get<0>(key);
    const int s = std::get<1>(key), k = std::get<2>(key);
    auto end_of = [&](char o, int stage) { return by_key.at({o, stage, k})->end_s; };
    if (op == 'F' && s > 0) {
      EXPECT_GE(t->start_s + eps, end_of('F', s - 1) + p2p(s - 1)) << name;
    }
    if (op == 'B') {
      EXPECT_GE(t->start_s + eps, end_of('F', s)) << name;
      if (s + 1 < stages) {
        EXPECT_GE(t->start_s + eps, end_of('B', s + 1) + p2p(s)) << name;
      }
    }
    if (op == 'W') {
      EXPECT_GE(t->start_s + eps, end_of('B', s)) << name;
    }
  }
  // No overlap on a device; peaks recomputed from the timeline; busy time bound.
  double chain = 0;  // micro-batch 0 through every stage and back: a critical-path lower bound
  for (int s = 0; s < stages; ++s) {
    chain += at(pr.forward_s, s) + at(pr.backward_input_s, s) +
             (split ? 0.0 : at(pr.backward_weight_s, s));
    if (s + 1 < stages) chain += 2 * p2p(s);
  }
  chain += split ? at(pr.backward_weight_s, 0) : 0.0;
  EXPECT_GE(r.makespan_s + eps, chain) << name;
  for (int d = 0; d < pr.devices; ++d) {
    auto& seq = per_device[d];
    std::sort(seq.begin(), seq.end(), [](auto* a, auto* b) {
      return a->start_s < b->start_s || (a->start_s == b->start_s && a->end_s < b->end_s);
    });
    double busy = 0, free_at = 0;
    int held = 0, peak = 0;
    for (const TimedPass* t : seq) {
      EXPECT_GE(t->start_s + eps, free_at) << name << ": overlap on device " << d;
      free_at = t->end_s;
      busy += t->end_s - t->start_s;
      if (t->op == 'F') peak = std::max(peak, ++held);
      if (t->op == (split ? 'W' : 'B')) --held;
    }
    EXPECT_GE(r.makespan_s + eps, busy) << name;
    EXPECT_EQ(peak, r.peak_activation[d]) << name << " device " << d;
    if (pr.activation_limit > 0) {
      EXPECT_LE(peak, pr.activation_limit) << name;
    }
  }
}

PipelineProblem random_problem(Random& rnd, const ScheduleInfo& info) {
  PipelineProblem pr;
  pr.devices = rnd.integer(1, 6);
  pr.microbatches = rnd.integer(1, 20);
  pr.chunks = info.name == "interleaved" ? rnd.integer(1, 3) : 0;
  const int stages = pr.devices * (pr.chunks == 0 ? info.default_chunks : pr.chunks);
  pr.forward_s = rnd.times(stages, 0.5, 2.0);
  pr.backward_input_s = rnd.times(stages, 0.5, 3.0);
  pr.backward_weight_s = rnd.times(stages, 0.0, 2.0);
  pr.p2p_s =
      rnd.integer(0, 1) ? std::vector<double>{0.0} : rnd.times(std::max(1, stages - 1), 0, 0.5);
  if (rnd.integer(0, 2) == 0) pr.activation_limit = rnd.integer(1, 3 * pr.devices);
  return pr;
}

TEST(PipelineProperties, RandomProblemsGiveValidTimelines) {
  Random rnd(20240611);
  double gap_sum = 0;
  int compared = 0;
  for (int trial = 0; trial < 60; ++trial)
    for (const ScheduleInfo& info : schedules()) {
      PipelineProblem pr = random_problem(rnd, info);
      const PipelineResult r = simulate(info.name, pr);
      if (!r.feasible) {
        EXPECT_LT(pr.activation_limit, minimum_activation_limit(info.name, pr)) << r.reason;
        continue;
      }
      SCOPED_TRACE(info.name + " p=" + std::to_string(pr.devices) +
                   " m=" + std::to_string(pr.microbatches) +
                   " limit=" + std::to_string(pr.activation_limit));
      check_timeline(info.name, pr, r);
      // The search's fast path times only a shortlist of the orders: never faster than the full
      // simulation, and close to it (see the mean below).
      const PipelineResult e = estimate(info.name, pr);
      EXPECT_GE(e.makespan_s, r.makespan_s * (1 - 1e-12));
      EXPECT_LE(e.makespan_s, r.makespan_s * 1.15);
      gap_sum += e.makespan_s / r.makespan_s - 1;
      ++compared;
      if (pr.activation_limit > 0) {
        for (int peak : e.peak_activation) EXPECT_LE(peak, pr.activation_limit);
      }
      EXPECT_TRUE(e.timeline.empty());
    }
  EXPECT_LT(gap_sum / compared, 0.005) << "mean estimate gap over " << compared << " problems";
}

// estimate() equals simulate() exactly where it times everything simulate() does (one order, one
// executor) or where the times are a multiple of one of its reference profiles (F = B = W).
TEST(PipelineProperties, EstimateEqualsSimulateOnReferenceProfiles) {
  Random rnd(99);
  for (int trial = 0; trial < 40; ++trial)
    for (const ScheduleInfo& info : schedules()) {
      PipelineProblem pr;
      pr.devices = rnd.integer(1, 8);
      pr.microbatches = rnd.integer(1, 40);
      const double t = rnd.real(0.1, 10);
      pr.forward_s = pr.backward_input_s = pr.backward_weight_s = {t};
      if (trial % 3 == 0) pr.activation_limit = rnd.integer(2 * pr.devices, 3 * pr.devices);
      const PipelineResult s = simulate(info.name, pr), e = estimate(info.name, pr);
      ASSERT_EQ(s.feasible, e.feasible);
      EXPECT_NEAR(e.makespan_s, s.makespan_s, 1e-9 * s.makespan_s) << info.name;
      EXPECT_NEAR(e.bubble_rate, s.bubble_rate, 1e-9) << info.name;
      EXPECT_EQ(e.peak_activation, s.peak_activation) << info.name;
    }
}

// The closed forms (gpipe with any stage times; 1f1b with uniform ones) equal the simulator.
TEST(PipelineProperties, ClosedFormsEqualTheSimulator) {
  Random rnd(7);
  for (int trial = 0; trial < 200; ++trial) {
    PipelineProblem pr;
    pr.devices = rnd.integer(1, 10);
    pr.microbatches = rnd.integer(1, 40);
    const bool uniform = trial % 2 == 0;
    const int n = uniform ? 1 : pr.devices;
    pr.forward_s = rnd.times(n, 0.1, 3);
    pr.backward_input_s = rnd.times(n, 0.1, 3);
    pr.backward_weight_s = rnd.times(n, 0, 3);
    pr.p2p_s = uniform ? std::vector<double>{0.0} : rnd.times(std::max(1, pr.devices - 1), 0, 1);
    pr.activation_bytes = {rnd.real(1, 100)};
    for (const char* name : {"gpipe", "1f1b"}) {
      const PipelineResult s = simulate(name, pr), e = estimate(name, pr);
      EXPECT_NEAR(e.makespan_s, s.makespan_s, 1e-9 * s.makespan_s) << name << " trial " << trial;
      EXPECT_NEAR(e.bubble_rate, s.bubble_rate, 1e-9) << name;
      EXPECT_NEAR(e.max_device_bubble_rate, s.max_device_bubble_rate, 1e-9) << name;
      EXPECT_EQ(e.peak_activation, s.peak_activation) << name;
      ASSERT_EQ(e.peak_activation_bytes.size(), s.peak_activation_bytes.size());
      for (size_t d = 0; d < s.peak_activation_bytes.size(); ++d)
        EXPECT_NEAR(e.peak_activation_bytes[d], s.peak_activation_bytes[d], 1e-9);
      // What a device holds from its first backward on: the closed forms' counts are the
      // simulated ones.
      ASSERT_EQ(e.activation_bytes_with_gradients.size(), s.activation_bytes_with_gradients.size());
      for (size_t d = 0; d < s.activation_bytes_with_gradients.size(); ++d)
        EXPECT_NEAR(e.activation_bytes_with_gradients[d], s.activation_bytes_with_gradients[d],
                    1e-9)
            << name << " trial " << trial << " device " << d;
    }
  }
}

// Every building block is collision-free for p = 1..64 and its passes respect the dependencies
// in slot time (each pass at least one slot after what it waits for).
TEST(PipelineProperties, BuildingBlocksAreConsistent) {
  for (int p = 1; p <= 64; ++p)
    for (const BuildingBlock& b : {v_min_block(p), v_half_block(p), v_zb_block(p)}) {
      std::map<std::pair<int, int>, int> slot;  // (op, stage) -> slot
      for (const auto& row : b.per_device)
        for (const BlockPass& bp : row) slot[{int(bp.op), bp.stage}] = bp.slot;
      const int stages = 2 * p;
      auto when = [&](Op op, int s) { return slot[{int(op), s}]; };
      for (int s = 0; s < stages; ++s) {
        if (s > 0) {
          EXPECT_GT(when(Op::kF, s), when(Op::kF, s - 1)) << b.name << " p=" << p;
        }
        EXPECT_GT(when(Op::kB, s), when(Op::kF, s)) << b.name << " p=" << p;
        if (s + 1 < stages) {
          EXPECT_GT(when(Op::kB, s), when(Op::kB, s + 1)) << b.name << " p=" << p;
        }
      }
      EXPECT_NO_THROW(block_peak(b, 3)) << b.name << " p=" << p;
    }
}

// The shape cache is shared: concurrent first calls for one shape agree with a later call.
TEST(PipelineProperties, ConcurrentCallsAgree) {
  PipelineProblem pr;
  pr.devices = 6;
  pr.microbatches = 23;
  pr.forward_s = {1.0};
  pr.backward_input_s = {1.4};
  pr.backward_weight_s = {0.6};
  pr.p2p_s = {0.02};
  pr.record_timeline = false;
  std::vector<double> makespans(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      makespans[i] = i % 2 ? estimate("v-half", pr).makespan_s : simulate("v-half", pr).makespan_s;
    });
  for (auto& t : threads) t.join();
  const double s = simulate("v-half", pr).makespan_s, e = estimate("v-half", pr).makespan_s;
  for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(makespans[i], i % 2 ? e : s);
}

// Long runs are built short and their steady period repeated; that gives the order a full build
// gives.
TEST(PipelineProperties, SplicedBlocksEqualFullBuilds) {
  const Reorder reorders[] = {Reorder::kNone, Reorder::kWarmupAndCooldown, Reorder::kCooldownOnly,
                              Reorder::kBoth};
  for (int p : {1, 2, 3, 4, 5, 8, 12})
    for (const BuildingBlock& b :
         {v_min_block(p), v_half_block(p), v_zb_block(p), with_interval(v_min_block(p), 13)}) {
      if (b.name.empty()) continue;
      const int steady = steady_microbatches(b);
      for (int m : {steady + 9, steady + 31, 3 * steady})
        for (Reorder r : reorders)
          for (int limit : {0, 2 * p + 3}) {
            const PassOrder spliced = expand_block(b, m, limit, r);
            const PassOrder full = expand_block(b, m, limit, r, false);
            ASSERT_EQ(spliced.microbatches, m);
            for (int d = 0; d < p; ++d) {
              const auto &x = spliced.per_device[d], &y = full.per_device[d];
              ASSERT_EQ(x.size(), y.size()) << b.name << " p=" << p << " m=" << m;
              for (size_t i = 0; i < x.size(); ++i)
                ASSERT_TRUE(x[i].op == y[i].op && x[i].stage == y[i].stage &&
                            x[i].microbatch == y[i].microbatch)
                    << b.name << " p=" << p << " m=" << m << " device " << d << " pass " << i;
            }
          }
    }
}

}  // namespace
}  // namespace hetplan::pipeline
