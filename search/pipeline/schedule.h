// Pipeline schedules and their simulation: the public entry points the training search, `hetplan
// predict` and `hetplan simulate` call. A schedule is a per-device order of F (forward), B
// (input-gradient backward) and W (weight-gradient backward) passes; the event-driven simulator
// times that order against per-stage durations and point-to-point delays. See docs/schedules.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hetplan::pipeline {

// How interleaved 1F1B groups its micro-batches and warms up (docs/schedules.md):
//   kMegatron  Megatron-Core's: groups of p micro-batches (m rounded up to whole groups), device d
//              warms up with 2(p-1-d) + (chunks-1)p forwards, and with m == p every forward first;
//   kPyTorch   torch.distributed.pipelining's ScheduleInterleaved1F1B: max(1, m / p) rounds of
//              m / rounds micro-batches (m a multiple of the rounds), device d warms up with
//              (chunks-1) x that + 2(p-1-d) forwards, at most m x chunks; no all-forward case.
enum class InterleavedOrder { kMegatron, kPyTorch };

// ScheduleInterleaved1F1B's rounds of `microbatches` over `devices` ranks, max(1, m / p)
// (schedules.py number_of_rounds); it refuses an m they do not divide.
inline int64_t pytorch_interleaved_rounds(int64_t microbatches, int64_t devices) {
  return microbatches / devices > 1 ? microbatches / devices : 1;
}

// One pipeline to simulate. Times are seconds; vectors of size 1 apply to every stage (boundary).
struct PipelineProblem {
  int devices = 1;       // p, pipeline devices
  int microbatches = 1;  // m
  int chunks = 0;        // virtual stages per device; 0 = the schedule's default (schedules()[i])
  // Per virtual stage in model order (size devices*chunks), or size 1 = the same for every stage.
  std::vector<double> forward_s, backward_input_s, backward_weight_s;
  // Per boundary between consecutive virtual stages (size stages-1) or size 1; charged only where
  // the two stages sit on different devices, once per micro-batch and direction.
  std::vector<double> p2p_s;
  // Optional: activation bytes kept per micro-batch by each virtual stage (size stages, or 1).
  // When given, results also report the peak bytes per device.
  std::vector<double> activation_bytes;
  // Most chunk activations a device may hold at once; 0 = the named schedule's own. With a limit,
  // the name selects the family (placement, split backward) and the result is the lowest-makespan
  // schedule of that family whose per-device peak stays within it.
  int activation_limit = 0;
  InterleavedOrder interleaved = InterleavedOrder::kMegatron;  // the framework's (schedule
                                                               // "interleaved" only)
  bool record_timeline = true;
};

// One executed pass. `chunk` is the virtual stage's index on its device, `stage` its model order.
struct TimedPass {
  int device;
  char op;  // 'F', 'B' (input gradient; the whole backward where the schedule does not split it),
            // 'W'
  int microbatch;
  int chunk;
  int stage;
  double start_s, end_s;
};

struct PipelineResult {
  bool feasible = true;
  std::string reason;                 // why not feasible, e.g. a limit below what the family can do
  std::string variant;                // which construction won, e.g. "v-half block, reordered"
  double makespan_s = 0;              // first start to last end over all devices
  double bubble_rate = 0;             // idle time / (devices * makespan)
  double max_device_bubble_rate = 0;  // worst device's idle share between its first and last pass
  std::vector<int> peak_activation;   // per device, in chunk (virtual-stage) activations
  std::vector<double> peak_activation_bytes;  // per device, when activation_bytes given
  // Per device (when activation_bytes given), the most it holds from its first gradient pass on
  // (the pass that releases a micro-batch's activations: W where the schedule splits the
  // backward, else B), that pass's release counted: the activations beside which the gradients
  // exist where a framework drops them after each step (MemoryLayout::gradients_freed_after_step).
  std::vector<double> activation_bytes_with_gradients;
  std::vector<TimedPass> timeline;  // device-major, in execution order
};

struct ScheduleInfo {
  std::string name, description;
  int default_chunks;
  bool splits_backward;
  bool any_chunks = false;  // runs any count of chunks per device from 2 (--chunks): interleaved
};

// The schedule table (gpipe, 1f1b, interleaved, zb-h1, zb-h2, v-min, v-half, v-zb); --help and
// validation come from it.
const std::vector<ScheduleInfo>& schedules();
// The table entry for `name`; throws InputError listing the known names when there is none.
const ScheduleInfo& schedule_info(std::string_view name);
// The table's names in order, comma separated ("gpipe, 1f1b, ..."), for messages.
std::string schedule_names();

// Builds the schedule's pass order and runs the exact event-driven simulator. Throws InputError for
// malformed problems (zero devices, negative times, wrong vector sizes, unknown schedule); returns
// feasible = false for an activation limit the family cannot meet.
PipelineResult simulate(std::string_view schedule, const PipelineProblem& problem);

// Fast path for the search: the same result as simulate() without the timeline, from closed forms
// where they are exact (gpipe; 1f1b with uniform stages and no p2p) and otherwise from pass orders
// cached by shape (name, p, m, chunks, limit). Thread-safe.
PipelineResult estimate(std::string_view schedule, const PipelineProblem& problem);

// The smallest activation limit (chunk activations per device) any schedule of this family can
// meet for the problem's shape: 1 for one-chunk schedules, 2 for V schedules, (v-1)p+1 for
// interleaved with v chunks.
int minimum_activation_limit(std::string_view schedule, const PipelineProblem& problem);

}  // namespace hetplan::pipeline
