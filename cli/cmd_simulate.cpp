// `hetplan simulate`: builds one pipeline schedule and times it with the event-driven simulator.
// Prints a summary (and an ASCII timeline for small problems); --json writes the contract fields
// makespan, bubble_rate, peak_activation and timeline. See docs/schedules.md.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/validators.h"
#include "costmodel/atomic_file.h"
#include "costmodel/calibration.h"
#include "costmodel/errors.h"
#include "costmodel/whole_number.h"
#include "search/pipeline/schedule.h"
#include "search/pipeline/timeline_text.h"

namespace hetplan::cli {
namespace {

namespace pl = hetplan::pipeline;

struct SimulateOptions {
  std::string schedule;
  int stages = 0, microbatches = 0, chunks = 0, activation_limit = 0;
  std::vector<double> forward, backward_input, backward_weight, p2p{0.0}, activation_bytes;
  std::string json_path;
  std::string interleaved_order = "megatron";
  int width = 120;
};

// Small problems get an ASCII timeline on the terminal.
constexpr int kTimelineMaxPassesPerDevice = 256;

std::string schedule_help() {
  std::string text = "pipeline schedule:";
  for (const auto& s : pl::schedules()) text += fmt::format("\n  {:<12} {}", s.name, s.description);
  return text;
}

nlohmann::json to_json(const SimulateOptions& o, const pl::PipelineProblem& problem,
                       const pl::PipelineResult& r) {
  nlohmann::json j;
  j["schema_version"] = 1;
  j["command"] = "hetplan simulate";
  j["schedule"] = o.schedule;
  j["variant"] = r.variant;
  j["stages"] = problem.devices;
  j["microbatches"] = problem.microbatches;
  j["chunks"] = problem.chunks;
  j["interleaved_order"] =
      problem.interleaved == pl::InterleavedOrder::kPyTorch ? "pytorch" : "megatron";
  j["activation_limit"] = o.activation_limit > 0 ? nlohmann::json(o.activation_limit) : nullptr;
  j["time_unit"] = "as given on the command line (seconds by convention)";
  j["feasible"] = r.feasible;
  j["reason"] = r.reason;
  j["makespan"] = r.makespan_s;
  j["bubble_rate"] = r.bubble_rate;
  j["max_device_bubble_rate"] = r.max_device_bubble_rate;
  j["peak_activation"] = r.peak_activation;
  j["peak_activation_unit"] = "chunk (virtual-stage) activations of one micro-batch";
  if (!r.peak_activation_bytes.empty())  // sums of --activation-bytes, to the nearest byte
    j["peak_activation_bytes"] = whole_numbers_json(r.peak_activation_bytes);
  nlohmann::json timeline = nlohmann::json::array();
  for (int d = 0; d < problem.devices; ++d) timeline.push_back(nlohmann::json::array());
  for (const pl::TimedPass& t : r.timeline)
    timeline[t.device].push_back({{"op", std::string(1, t.op)},
                                  {"microbatch", t.microbatch},
                                  {"chunk", t.chunk},
                                  {"stage", t.stage},
                                  {"start", t.start_s},
                                  {"end", t.end_s}});
  j["timeline"] = std::move(timeline);
  return j;
}

// The chunks per device --chunks asks for, checked as a strategy file's "chunks" is
// (search/strategy.cpp): interleaved with one chunk would be 1f1b under another name, and only
// interleaved takes a count of its own.
int checked_chunks(const std::string& schedule, int chunks) {
  const pl::ScheduleInfo& info = pl::schedule_info(schedule);
  if (chunks == 0) return info.default_chunks;
  if (schedule == "interleaved" && chunks < 2)
    throw InputError(
        fmt::format("--chunks {}: schedule interleaved runs 2 or more chunks per "
                    "device (one chunk is schedule 1f1b)",
                    chunks));
  if (schedule != "interleaved" && chunks != info.default_chunks)
    throw InputError(
        fmt::format("--chunks {}: schedule {} runs {} chunk{} per device (only "
                    "interleaved takes --chunks)",
                    chunks, schedule, info.default_chunks, info.default_chunks == 1 ? "" : "s"));
  return chunks;
}

int run_simulate(const SimulateOptions& o) {
  pl::PipelineProblem problem;
  problem.devices = o.stages;
  problem.microbatches = o.microbatches;
  problem.chunks = checked_chunks(o.schedule, o.chunks);
  problem.forward_s = o.forward;
  problem.backward_input_s = o.backward_input;
  problem.backward_weight_s = o.backward_weight;
  problem.p2p_s = o.p2p;
  problem.activation_bytes = o.activation_bytes;
  problem.activation_limit = o.activation_limit;
  if (o.interleaved_order == "pytorch") {
    if (o.schedule != "interleaved")
      throw InputError(
          fmt::format("--interleaved-order pytorch: only schedule interleaved takes it, "
                      "not {}",
                      o.schedule));
    problem.interleaved = pl::InterleavedOrder::kPyTorch;
  }
  const bool small = o.microbatches > 0 && o.stages > 0 &&
                     static_cast<long>(o.stages) * o.microbatches <= kTimelineMaxPassesPerDevice;
  problem.record_timeline = small || !o.json_path.empty();

  const pl::PipelineResult r = pl::simulate(o.schedule, problem);
  if (!r.feasible)
    throw InputError(fmt::format("--activation-limit {}: {}", o.activation_limit, r.reason));

  if (!std::isfinite(r.makespan_s))
    throw InputError(
        fmt::format("--forward/--backward-input/--backward-weight: the makespan "
                    "overflows ({}); expected times a double can sum",
                    r.makespan_s));
  const auto json = [&] { return to_json(o, problem, r); };
  if (o.json_path == "-") {  // stdout is the JSON alone, for programs
    fmt::print("{}\n", json().dump(1));
    return 0;
  }
  fmt::print("schedule {} ({}): {} stages, {} micro-batches, {} chunk(s) per stage\n", o.schedule,
             r.variant, problem.devices, problem.microbatches, problem.chunks);
  fmt::print("makespan {:.6g}, bubble rate {:.2f}% (worst device {:.2f}%)\n", r.makespan_s,
             100 * r.bubble_rate, 100 * r.max_device_bubble_rate);
  std::string peaks;
  for (int p : r.peak_activation) peaks += fmt::format(" {}", p);
  fmt::print("peak activations per device (chunk activations):{}\n", peaks);
  if (small) fmt::print("{}", pl::render_timeline(r, problem.devices, o.width));
  if (!o.json_path.empty()) {
    // Indented when small enough to read; compact otherwise (a big timeline is for programs).
    write_text_atomically(json().dump(r.timeline.size() <= 10000 ? 1 : -1) + '\n', o.json_path);
  }
  return 0;
}

}  // namespace

CommandRunner declare_simulate(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  app.add_option("--schedule", o->schedule, schedule_help())->required();
  app.add_option("--stages", o->stages, "pipeline stages (devices), p")
      ->required()
      ->check(kPositive);
  app.add_option("--microbatches", o->microbatches, "micro-batches per iteration, m")
      ->required()
      ->check(kPositive);
  const char* per_stage =
      " (one value for every stage, or a comma-separated value per virtual "
      "stage in model order; per chunk for the V schedules)";
  app.add_option("--forward", o->forward, std::string("forward time F") + per_stage)
      ->required()
      ->delimiter(',');
  app.add_option("--backward-input", o->backward_input,
                 std::string("input-gradient backward time B") + per_stage)
      ->required()
      ->delimiter(',');
  app.add_option("--backward-weight", o->backward_weight,
                 std::string("weight-gradient backward time W; schedules that do not split the "
                             "backward run B+W as one pass") +
                     per_stage)
      ->required()
      ->delimiter(',');
  app.add_option("--p2p", o->p2p,
                 "p2p time between consecutive stages on different devices, per micro-batch and "
                 "direction (one value, or one per stage boundary)")
      ->delimiter(',');
  app.add_option("--activation-limit", o->activation_limit,
                 "most chunk activations a stage may hold; gives the lowest-bubble schedule of "
                 "the named schedule's family within it (0 = the schedule's own)");
  app.add_option("--chunks", o->chunks,
                 "virtual stages per device (interleaved only: 2 or more; default 2)")
      ->check(kPositive);
  app.add_option("--interleaved-order", o->interleaved_order,
                 "how interleaved groups its micro-batches: megatron (groups of p, every forward "
                 "first when m == p) or pytorch (torch.distributed.pipelining's rounds; "
                 "torchtitan's)")
      ->check(CLI::IsMember({"megatron", "pytorch"}));
  app.add_option("--activation-bytes", o->activation_bytes,
                 "activation bytes one micro-batch keeps per virtual stage, to report peak bytes")
      ->delimiter(',');
  app.add_option("--json", o->json_path,
                 "write the result (with the full timeline) as JSON ('-' for stdout)");
  app.add_option("--width", o->width, "columns of the ASCII timeline")->check(CLI::Range(8, 10000));
  return [o] {
    check_outputs({}, {{"--json", o->json_path}});
    return run_simulate(*o);
  };
}

}  // namespace hetplan::cli
