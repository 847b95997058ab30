#include "report/report_data.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "costmodel/calibration.h"
#include "costmodel/clock_classes.h"
#include "costmodel/errors.h"
#include "costmodel/hardware.h"
#include "costmodel/input_files.h"
#include "costmodel/layer_correction.h"
#include "costmodel/measurements.h"
#include "costmodel/profile.h"
#include "costmodel/utc_time.h"
#include "costmodel/version.h"
#include "costmodel/whole_number.h"
#include "report/matching.h"
#include "report/metrics.h"
#include "report/predictions.h"
#include "report/timeline.h"

namespace hetplan {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

Json or_null(const std::optional<double>& v) { return v ? Json(*v) : Json(nullptr); }

// Statistics of no pairs are null, not 0 (a 0% error would read as a perfect prediction).
Json to_json(const ErrorStats& e) {
  auto value = [&](double v) { return e.count > 0 ? Json(v) : Json(nullptr); };
  return {{"count", e.count},
          {"median_ape", value(e.median_ape)},
          {"p90_ape", value(e.p90_ape)},
          {"max_ape", value(e.max_ape)},
          {"median_signed", value(e.median_signed)}};
}

// Predicted peak memory per stage comparable with a measurement of `kind`: the framework's
// allocator figures exclude the CUDA context and library buffers hetplan calls the reserve, and
// its allocated figures the caching allocator's fragmentation.
std::vector<double> comparable_memory(const Prediction& p, const std::string& kind) {
  std::vector<double> out = p.peak_memory_bytes;
  if (kind != "device")
    for (size_t s = 0; s < out.size() && s < p.stages.size(); ++s) {
      out[s] -= p.stages[s].memory.reserve;
      if (kind != "reserved") out[s] -= p.stages[s].memory.fragmentation;
    }
  return out;
}

double max_of(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

Json pairs_and_metrics(const std::vector<PredictedStrategy>& preds, const Matching& matching,
                       Json& data) {
  Json pairs = Json::array(), unmatched = Json::array();
  std::vector<double> pred_t, meas_t, pred_tput, meas_tput, pred_mem, meas_mem;
  OutcomeTable outcomes;
  for (const auto& mm : matching.measurements) {
    const Measurement& m = mm.measurement;
    if (mm.prediction < 0) {
      Json row = {{"model", m.model},
                  {"key", mm.key},
                  {"file", mm.file},
                  {"origin", m.origin},
                  {"source", m.source}};
      if (!m.assumed.empty()) row["assumed"] = m.assumed;
      unmatched.push_back(std::move(row));
      continue;
    }
    const PredictedStrategy& ps = preds[mm.prediction];
    Json pair = {{"model", m.model},      {"key", mm.key},      {"source", m.source},
                 {"file", mm.file},       {"origin", m.origin}, {"prediction", ps.origin},
                 {"oom_observed", m.oom}, {"notes", m.notes}};
    const bool predicted_oom =
        ps.predicted && !ps.predicted->feasible && ps.predicted->out_of_memory();
    pair["oom_predicted"] = predicted_oom;
    if (!m.assumed.empty()) pair["assumed"] = m.assumed;
    if (ps.predicted) {
      const Prediction& p = *ps.predicted;
      pair["predicted_feasible"] = p.feasible;
      pair["predicted_reason"] = p.reason;
      if (p.iteration_s > 0) pair["predicted_s"] = p.iteration_s;
      if (m.iteration_s && p.iteration_s > 0) {
        const double meas = m.iteration_s->median;
        pair["measured_s"] = meas;
        pair["measured_p10_s"] = m.iteration_s->p10;
        pair["measured_p90_s"] = m.iteration_s->p90;
        pair["measured_count"] = m.iteration_s->count;
        pair["signed_error"] = (p.iteration_s - meas) / meas;
        pair["ape"] = std::fabs(p.iteration_s - meas) / meas;
        pred_t.push_back(p.iteration_s);
        meas_t.push_back(meas);
        const double gb = static_cast<double>(mm.strategy.global_batch);
        pred_tput.push_back(gb / p.iteration_s);
        meas_tput.push_back(gb / meas);
        pair["predicted_samples_per_s"] = gb / p.iteration_s;
        pair["measured_samples_per_s"] = gb / meas;
      }
      const double measured_peak = max_of(m.peak_memory_bytes);
      const double predicted_peak = max_of(comparable_memory(p, m.peak_memory_kind));
      if (measured_peak > 0 && predicted_peak > 0) {
        pair["measured_memory_bytes"] = whole_number_json(measured_peak);
        pair["predicted_memory_bytes"] = whole_number_json(predicted_peak);
        pair["memory_kind"] = m.peak_memory_kind;
        pair["memory_ape"] = std::fabs(predicted_peak - measured_peak) / measured_peak;
        pred_mem.push_back(predicted_peak);
        meas_mem.push_back(measured_peak);
      }
      const Observed observed = m.oom                              ? Observed::kOutOfMemory
                                : m.iteration_s || m.error.empty() ? Observed::kCompleted
                                                                   : Observed::kFailed;
      const Foreseen foreseen = predicted_oom ? Foreseen::kOutOfMemory
                                : !p.feasible ? Foreseen::kInfeasible
                                              : Foreseen::kFeasible;
      outcomes.add(observed, foreseen);
      pair["observed"] = to_string(observed);
      pair["foreseen"] = to_string(foreseen);
    }
    pairs.push_back(pair);
  }
  data["unmatched_measurements"] = unmatched;
  Json metrics;
  metrics["iteration"] = to_json(error_stats(pred_t, meas_t));
  metrics["throughput_spearman"] = or_null(spearman(pred_tput, meas_tput));
  metrics["memory"] = to_json(error_stats(pred_mem, meas_mem));
  // Out of memory predicted against observed, among the runs that completed or ran out of
  // memory; runs that failed otherwise are in `outcomes` only (never "neither").
  const Observed kOom = Observed::kOutOfMemory, kDone = Observed::kCompleted;
  metrics["oom"] = {
      {"both", outcomes.of(kOom, Foreseen::kOutOfMemory)},
      {"predicted_only", outcomes.of(kDone, Foreseen::kOutOfMemory)},
      {"observed_only", outcomes.observed(kOom) - outcomes.of(kOom, Foreseen::kOutOfMemory)},
      {"neither", outcomes.observed(kDone) - outcomes.of(kDone, Foreseen::kOutOfMemory)}};
  Json table = Json::object();
  for (Observed o : {Observed::kCompleted, Observed::kOutOfMemory, Observed::kFailed})
    for (Foreseen f : {Foreseen::kFeasible, Foreseen::kOutOfMemory, Foreseen::kInfeasible})
      table[std::string(to_string(o))][std::string(to_string(f))] = outcomes.of(o, f);
  metrics["outcomes"] = table;
  metrics["failed_runs"] = outcomes.observed(kOom) + outcomes.observed(Observed::kFailed);
  metrics["failed_runs_foreseen"] = outcomes.failed_foreseen();
  metrics["completed_runs"] = outcomes.observed(kDone);
  metrics["completed_runs_refused"] = outcomes.completed_refused();
  data["metrics"] = metrics;
  return pairs;
}

// Calibration inputs: files as given, and the *.json files under folders (found = true).
std::vector<std::pair<std::filesystem::path, bool>> calibration_paths(
    const std::vector<std::string>& inputs) {
  std::vector<std::pair<std::filesystem::path, bool>> out;
  for (const auto& in : inputs) {
    if (!std::filesystem::is_directory(in)) {
      out.emplace_back(in, false);
      continue;
    }
    for (auto& f : json_files_under(in)) out.emplace_back(std::move(f), true);
  }
  return out;
}

// Whole-layer timings of the calibration files against the cost model's prediction from ops, with
// the shipped datasheet priors of their GPU types beneath them (what `hetplan fit` reports).
Json layer_points(const std::vector<CalibrationFile>& files) {
  std::vector<CalibrationFile> inputs;
  std::set<std::string> types;
  for (const auto& f : files)
    if (!f.layers.empty() || !f.layer_forward.empty()) types.insert(f.context.gpu_type);
  Json points = Json::array();
  if (types.empty()) return points;
  for (const auto& type : types) {
    const auto prior = default_calibration_dir() / "datasheet" / (type + ".json");
    if (std::filesystem::exists(prior)) inputs.push_back(load_calibration(prior));
  }
  inputs.insert(inputs.end(), files.begin(), files.end());
  const Profile profile = fit_profile(inputs);
  for (const auto& type : types) {
    if (!is_gpu_preset(type)) continue;
    for (const auto& t : compare_layer_timings(profile, load_gpu(type))) {
      if (!t.unused.empty()) continue;
      for (int p = 0; p < kNumPasses; ++p) {
        if (!(t.measured_s[p] > 0)) continue;
        points.push_back({{"source", fmt::format("{} {}{}", type, "FBW"[p],
                                                 t.source == "measured" ? "" : " (imported)")},
                          {"key", t.what},
                          {"model", describe(t.key)},
                          {"measured_s", t.measured_s[p]},
                          {"predicted_s", t.predicted_s[p]},
                          {"ape", std::abs(t.rel_error(p))}});
      }
    }
  }
  return points;
}

Json calibration_curves(const std::vector<std::string>& inputs, Json& files) {
  std::map<std::string, Json> gemm, coll;
  int64_t one_gpu_collectives = 0;
  std::vector<CalibrationFile> read;
  for (const auto& [path, found] : calibration_paths(inputs)) {
    const Document doc = load_document(path);
    // Folders may also hold profiles; only calibration files have curves.
    if (found && document_format(doc) != kCalibrationFormat) continue;
    const CalibrationFile cal = calibration_from_document(doc);
    files.push_back(path.string());
    const std::string gpu = cal.context.gpu_type.empty() ? "?" : cal.context.gpu_type;
    for (const auto& g : cal.gemm) {
      Json& series = gemm[fmt::format("{} {}", gpu, to_string(g.dtype))];
      series.push_back({g.shape.flops(), g.shape.flops() / g.time_s.median / 1e12,
                        fmt::format("{}x{}x{}{}", g.shape.m, g.shape.n, g.shape.k,
                                    g.shape.batch > 1 ? fmt::format(" x{}", g.shape.batch) : "")});
    }
    for (const auto& c : cal.collectives) {
      if (!c.ok) continue;
      // A one-GPU ("self") communicator copies inside the device: it says nothing about links
      // (docs/benchmarks.md "Collectives"), so it is counted, not drawn beside real groups.
      if (c.group_size <= 1) {
        ++one_gpu_collectives;
        continue;
      }
      Json& series = coll[fmt::format(
          "{} {} {} GPUs{} {} ({})", to_string(c.op), to_string(c.dtype), c.group_size,
          c.nodes > 1 ? fmt::format(" on {} nodes", c.nodes) : "", c.link, gpu)];
      series.push_back({c.bytes, c.busbw_GBps});
    }
    read.push_back(cal);
  }
  auto to_list = [](std::map<std::string, Json>& m, bool sort) {
    Json list = Json::array();
    for (auto& [name, points] : m) {
      if (sort)
        std::sort(points.begin(), points.end(), [](const Json& a, const Json& b) {
          return a[0].get<double>() < b[0].get<double>();
        });
      list.push_back({{"name", name}, {"points", points}});
    }
    return list;
  };
  // The SM clock each class of measurement ran at, per GPU type (files with clock records).
  std::map<std::string, std::vector<const CalibrationFile*>> by_type;
  for (const auto& cal : read) by_type[cal.context.gpu_type].push_back(&cal);
  Json clocks = Json::array();
  for (const auto& [type, cals] : by_type)
    for (const ClockClass& c : clock_classes(cals)) {
      Json row = to_json(c);
      row["gpu_type"] = type.empty() ? "?" : type;
      clocks.push_back(row);
    }
  return {{"gemm", to_list(gemm, false)},
          {"collectives", to_list(coll, true)},
          {"one_gpu_collectives", one_gpu_collectives},
          {"layers", layer_points(read)},
          {"clocks", clocks}};
}

Json pipeline_and_memory(const PredictedStrategy& ps, Json& memory) {
  const Prediction& p = *ps.predicted;
  const Strategy& s = ps.strategy;
  const int64_t m = s.microbatches();
  const Timeline t = pipeline_timeline(p, s.schedule, m, std::max<int64_t>(1, s.pp));
  // One row per pipeline device, naming its GPU type and the layers of each of its chunks (in
  // model order); `device_stage` is a virtual stage of each device, whose memory is the device's.
  // Without a timeline (nothing drawn), one row per stage as the prediction lists them.
  std::vector<std::vector<size_t>> chunks_of(static_cast<size_t>(t.devices));
  for (const auto& op : t.ops) {
    auto& c = chunks_of[static_cast<size_t>(op.device)];
    if (std::find(c.begin(), c.end(), static_cast<size_t>(op.stage)) == c.end())
      c.push_back(static_cast<size_t>(op.stage));
  }
  if (t.ops.empty()) {
    chunks_of.assign(p.stages.size(), {});
    for (size_t j = 0; j < p.stages.size(); ++j) chunks_of[j] = {j};
  }
  Json stages = Json::array();
  std::vector<size_t> device_stage;
  for (size_t d = 0; d < chunks_of.size(); ++d) {
    auto& c = chunks_of[d];
    std::sort(c.begin(), c.end());
    std::string layers;
    for (size_t j : c)
      layers += fmt::format("{}{}-{}", layers.empty() ? "" : ", ", p.stages[j].stage.first_layer,
                            p.stages[j].stage.last_layer);
    const size_t first = c.front();  // every device runs passes; every stage is a row
    device_stage.push_back(first);
    stages.push_back(fmt::format("{} {} · {} · layers {}", t.ops.empty() ? "stage" : "device", d,
                                 p.stages[first].stage.gpu_type, layers));
  }
  Json ops = Json::array();
  for (const auto& op : t.ops)
    ops.push_back({op.device, std::string(1, op.pass), op.microbatch, op.start_s * 1e3,
                   op.end_s * 1e3, op.chunk});
  Json pipeline = {{"origin", ps.origin},
                   {"key", strategy_key(s)},
                   {"model", ps.model},
                   {"schedule", s.schedule},
                   {"microbatches", m},
                   {"chunks", t.chunks},
                   {"stages", stages},
                   {"ops", ops},
                   {"makespan_ms", t.makespan_s * 1e3},
                   {"predicted_iteration_ms", p.iteration_s * 1e3},
                   {"note", t.note}};
  Json parts = Json::object();
  const std::pair<const char*, double MemoryBreakdown::*> kParts[] = {
      {"weights", &MemoryBreakdown::weights},     {"gradients", &MemoryBreakdown::gradients},
      {"optimizer", &MemoryBreakdown::optimizer}, {"activations", &MemoryBreakdown::activations},
      {"transient", &MemoryBreakdown::transient}, {"reserve", &MemoryBreakdown::reserve}};
  for (const auto& [name, field] : kParts) {
    Json v = Json::array();
    for (size_t j : device_stage) v.push_back(p.stages[j].memory.*field / kGiB);
    parts[name] = v;
  }
  Json capacity = Json::array();
  for (size_t j : device_stage) {
    try {
      capacity.push_back(load_gpu(p.stages[j].stage.gpu_type).memory_bytes / kGiB);
    } catch (const InputError&) {
      capacity.push_back(nullptr);  // a GPU type defined in a cluster file
    }
  }
  memory = {{"origin", ps.origin}, {"key", strategy_key(s)},   {"stages", stages},
            {"parts", parts},      {"capacity_gib", capacity}, {"feasible", p.feasible},
            {"reason", p.reason}};
  return pipeline;
}

}  // namespace

Json build_report_data(const ReportInputs& in) {
  Json data;
  data["format"] = kReportFormat;
  data["schema_version"] = kReportSchemaVersion;
  data["title"] = in.title;
  data["generated"] = utc_now_iso8601();
  data["hetplan_version"] = version();
  data["command"] = in.command;
  // A file given twice would count its pairs (or its calibration points) twice.
  require_distinct_inputs({in.predictions.begin(), in.predictions.end()});
  require_distinct_inputs({in.measurements.begin(), in.measurements.end()});
  {
    std::vector<std::filesystem::path> calibration;
    for (const auto& [path, found] : calibration_paths(in.calibration)) calibration.push_back(path);
    require_distinct_inputs(calibration);
  }
  std::vector<PredictedStrategy> preds;
  for (const auto& path : in.predictions)
    for (auto& p : load_predicted_strategies(path)) {
      // A strategy file reads as a strategy without a prediction: it is no prediction to score.
      if (!p.predicted)
        throw InputError(p.origin, "predicted",
                         "missing: expected the output of hetplan predict --json or search --json "
                         "(a strategy with its prediction), not a strategy file");
      preds.push_back(std::move(p));
    }
  std::vector<MeasurementsFile> measured;
  for (const auto& path : in.measurements) measured.push_back(load_measurements(path));
  const Matching matching = match_measurements(preds, measured);
  data["pairs"] = pairs_and_metrics(preds, matching, data);
  Json unmatched = Json::array();
  for (int64_t i : matching.unmatched_predictions) {
    const auto& p = preds[i];
    unmatched.push_back({{"model", p.model},
                         {"key", strategy_key(p.strategy)},
                         {"origin", p.origin},
                         {"iteration_s", p.predicted ? p.predicted->iteration_s : 0.0},
                         {"feasible", p.predicted ? p.predicted->feasible : true}});
  }
  data["unmatched_predictions"] = unmatched;
  Json cal_files = Json::array();
  data["calibration"] = calibration_curves(in.calibration, cal_files);
  Json measurement_files = Json::array();
  for (const auto& f : measured)
    measurement_files.push_back({{"file", f.origin}, {"context", to_json(f.context)}});
  data["inputs"] = {{"predictions", in.predictions},
                    {"measurements", measurement_files},
                    {"calibration", cal_files}};
  if (in.strategy_index < 0 || in.strategy_index >= static_cast<int64_t>(preds.size()))
    throw InputError(fmt::format("--strategy-index {}: the predictions hold {} strategies",
                                 in.strategy_index, preds.size()));
  const PredictedStrategy& chosen = preds[in.strategy_index];
  if (chosen.predicted && !chosen.predicted->stages.empty()) {
    Json memory;
    data["pipeline"] = pipeline_and_memory(chosen, memory);
    // The measured peak of the same strategy, where one matched it.
    for (const auto& mm : matching.measurements)
      if (mm.prediction == in.strategy_index && !mm.measurement.peak_memory_bytes.empty()) {
        Json measured_gib = Json::array();
        for (double b : mm.measurement.peak_memory_bytes) measured_gib.push_back(b / kGiB);
        memory["measured_gib"] = measured_gib;
        memory["measured_kind"] = mm.measurement.peak_memory_kind;
        break;
      }
    data["memory"] = memory;
  }
  return data;
}

}  // namespace hetplan
