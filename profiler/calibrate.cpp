#include "profiler/calibrate.h"

#include <unistd.h>
#include <algorithm>
#include <cstdio>
#include <optional>

#include <fmt/format.h>

#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "costmodel/journal.h"
#include "costmodel/model.h"
#include "profiler/common/clock_monitor.h"
#include "profiler/common/launcher.h"
#include "profiler/common/plan.h"
#include "profiler/common/progress.h"
#include "profiler/common/records.h"
#include "profiler/cupti_trace.h"
#include "profiler/device.h"
#include "profiler/provenance.h"
#include "profiler/section.h"
#include "profiler/stop_signal.h"

namespace hetplan::profiler {
namespace {

// After a failed measurement: true when the CUDA context still works. Errors such as a failed
// allocation clear with cudaGetLastError; an illegal address or a launch failure stays (sticky)
// and every later call would fail too.
bool gpu_still_usable(std::string* why) {
  (void)cudaGetLastError();
  cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) return true;
  (void)cudaGetLastError();
  e = cudaDeviceSynchronize();
  if (e == cudaSuccess) return true;
  *why = cudaGetErrorString(e);
  return false;
}

// Without --resume an existing journal is kept aside (FILE.journal.old), never silently lost.
void set_journal_aside(const CalibrateOptions& o, Progress& progress) {
  const auto path = o.journal_path();
  if (o.resume || !std::filesystem::exists(path)) return;
  const std::filesystem::path old = path.string() + ".old";
  std::filesystem::rename(path, old);
  progress.message(
      fmt::format("calibrate: starting afresh; the earlier journal is now {} "
                  "(use --resume to continue one)",
                  old.string()));
}

// A journal continued on another GPU would mix two GPUs' numbers in one file.
void check_same_gpu(const Journal& journal, const Provenance& now) {
  std::string last_gpu, last_date;
  for (const auto& [key, record] : journal.entries()) {
    if (key.rfind("context/", 0) != 0) continue;
    last_gpu = string_or(record, "gpu_name", "");
    last_date = string_or(record, "date", "");
  }
  if (!last_gpu.empty() && last_gpu != now.gpu_name)
    throw InputError(fmt::format(
        "--resume: the journal {} was written on a {} ({}); this GPU is a {}. Calibrate into "
        "another file, or delete the journal",
        journal.path().string(), last_gpu, last_date, now.gpu_name));
}

struct SectionPlan {
  Section* section;
  std::vector<PlanItem> items;
};

// Plans every section, drops measurements an earlier section already plans (merging origins).
std::vector<SectionPlan> plan_sections(std::vector<std::unique_ptr<Section>>& sections,
                                       SectionContext& ctx) {
  std::vector<PlanItem> all;
  for (auto& s : sections) {
    auto items = s->plan(ctx);
    for (auto& item : items) item.section = s->name();
    all.insert(all.end(), std::make_move_iterator(items.begin()),
               std::make_move_iterator(items.end()));
  }
  all = deduplicate(std::move(all));
  std::vector<SectionPlan> out;
  for (auto& s : sections) {
    SectionPlan p{s.get(), {}};
    for (const auto& item : all)
      if (item.section == s->name()) p.items.push_back(item);
    out.push_back(std::move(p));
  }
  return out;
}

// One run's shared state, for the section loops below.
struct RunState {
  const CalibrateOptions& o;
  SectionContext& ctx;
  Journal* journal;  // null on ranks other than 0
  Progress& progress;
  Provenance& prov;
  CalibrationOutcome& out;

  void journal_failure(const std::string& key, const std::string& what, const std::string& error) {
    if (journal) journal->append(key, failure_record(what, error));
  }
};

// A section that failed as a whole (begin() or run() threw): recorded under its own key.
void section_failed(RunState& r, Section& section, const std::exception& e) {
  const std::string what = fmt::format("section {}", section.name());
  r.journal_failure(fmt::format("section/{}/{}", section.name(), r.prov.date), what, e.what());
  r.progress.message(fmt::format("calibrate: {} failed: {}", what, e.what()));
  std::string why;
  if (!gpu_still_usable(&why)) r.out.gpu_lost = true;
}

void run_driving_section(RunState& r, Section& section) {
  r.progress.start_section(section.name());
  try {
    const SectionCounts c = section.run(r.ctx);
    r.out.measured += c.measured;
    r.out.failed += c.failed;
    r.out.resumed += c.reused;
  } catch (const std::exception& e) {
    section_failed(r, section, e);
  }
}

void run_measured_section(RunState& r, Section& section, const std::vector<PlanItem>& todo) {
  r.progress.start_section(section.name());
  try {
    section.begin(r.ctx, todo);
  } catch (const std::exception& e) {
    section_failed(r, section, e);
    for (const auto& item : todo) r.progress.finished(item.label, item.estimate_s, true);
    return;
  }
  for (const auto& item : todo) {
    if (StopSignalGuard::requested()) break;
    try {
      const Json record = section.measure(item, r.ctx);
      r.journal->append(item.key, record);
      ++r.out.measured;
      r.progress.finished(item.label, item.estimate_s);
    } catch (const std::exception& e) {
      r.journal_failure(item.key, item.label, e.what());
      ++r.out.failed;
      r.progress.finished(item.label, item.estimate_s, true);
      r.progress.message(fmt::format("calibrate: {}: {}", item.label, e.what()));
      std::string why;
      if (!gpu_still_usable(&why)) {
        r.out.gpu_lost = true;
        r.progress.message(
            fmt::format("calibrate: the GPU context is lost ({}); stopping. "
                        "Everything measured so far is journalled: run again "
                        "with --resume",
                        why));
        break;
      }
    }
    if (r.o.stop_after > 0 && r.out.measured + r.out.failed >= r.o.stop_after)
      StopSignalGuard::request();
  }
  try {
    section.end(r.ctx);
  } catch (const std::exception& e) {
    r.progress.message(fmt::format("calibrate: {}: cleanup failed: {}", section.name(), e.what()));
  }
}

void check_options(const CalibrateOptions& o) {
  if (o.out.empty()) throw InputError("--out: expected the calibration file to write");
  const auto folder = std::filesystem::absolute(o.out).parent_path();
  if (!std::filesystem::is_directory(folder))
    throw InputError(
        fmt::format("--out {}: the folder {} does not exist", o.out.string(), folder.string()));
  // Bad input is reported as such (exit 2) before the GPU is looked at.
  for (const auto& model : o.layer_models) (void)load_model(model, o.seq_len);
}

}  // namespace

CalibrationOutcome run_calibration(const CalibrateOptions& o) {
  check_options(o);
  const LaunchInfo launch = detect_launch(process_environment());
  const bool writer = launch.rank == 0;
  auto sections = make_sections(o, launch.size > 1);

  Progress progress(stderr, ::isatty(fileno(stderr)) != 0);
  DeviceContext device(o.device);
  std::vector<std::string> warnings;
  Provenance prov = measure_provenance(o, device.info(), &warnings);
  for (const auto& w : warnings) progress.message("calibrate: warning: " + w);
  CuptiTracer tracer(o.cupti);
  if (tracer.available()) prov.cupti = tracer.version();
  const std::unique_ptr<ClockMonitor> clocks =
      ClockMonitor::open_nvml(device.info().pci_bus_id, o.clocks);
  progress.message("calibrate: " + clocks->describe());
  // What traces and clocks the run is known before it measures: the journal's context says it,
  // for `--from-journal`. Tracing or clock reading that stops during the run is added at its end.
  const bool traced_at_start = tracer.available();
  const std::string clocks_at_start = clocks->describe();
  if (!traced_at_start) prov.add_note(tracer.unavailable_reason());
  prov.add_note(clocks_at_start);
  progress.message(fmt::format(
      "calibrate: {} ({}), {} SMs, {} of memory, {} L2; driver {}, "
      "CUDA {}, cuBLAS {}, NCCL {}",
      prov.gpu_name, prov.gpu_type, prov.sm_count, bytes_text(double(prov.memory_bytes)),
      bytes_text(double(prov.l2_bytes)), prov.driver, prov.cuda_runtime, prov.cublas, prov.nccl));

  // Rank 0 alone keeps the journal and writes the file.
  std::optional<Journal> journal;
  if (writer) {
    set_journal_aside(o, progress);
    journal.emplace(o.journal_path(), o.resume);
    if (journal->dropped_lines() > 0)
      progress.message(fmt::format("calibrate: {} torn or malformed journal line(s) ignored",
                                   journal->dropped_lines()));
    if (o.resume) check_same_gpu(*journal, prov);
  }
  Journal* jp = journal ? &*journal : nullptr;

  SectionContext ctx{o, device, tracer, *clocks, prov, progress, jp};
  auto plans = plan_sections(sections, ctx);
  std::vector<PlanItem> all;
  for (const auto& p : plans) all.insert(all.end(), p.items.begin(), p.items.end());
  const PlanSummary summary = summarize_plan(all, jp, o.retry_failed);
  if (!all.empty()) progress.message(format_plan(summary));

  CalibrationOutcome out;
  out.file = o.out;
  out.planned = summary.items();
  out.resumed = summary.done();
  const int64_t run = getpid();
  const Json journalled_context = to_json(prov);
  if (jp) jp->append(context_key(prov, run), journalled_context);
  progress.add_planned(summary.items() - summary.done(), summary.estimate_s());

  StopSignalGuard stop_guard;
  RunState state{o, ctx, jp, progress, prov, out};
  for (auto& plan : plans) {
    if (StopSignalGuard::requested() || out.gpu_lost) break;
    if (plan.section->drives_itself()) {
      run_driving_section(state, *plan.section);
      continue;
    }
    const auto todo = remaining(plan.items, *jp, o.retry_failed);
    if (!todo.empty()) run_measured_section(state, *plan.section, todo);
  }
  out.stopped = StopSignalGuard::requested() &&
                (jp == nullptr || !remaining(all, *jp, o.retry_failed).empty());
  if (traced_at_start && !tracer.available()) prov.add_note(tracer.unavailable_reason());
  if (const std::string now = clocks->describe(); now != clocks_at_start) prov.add_note(now);
  // A section that drives itself adds to the provenance as it runs (the collectives' processes,
  // nodes and link), and so may the lines above: the journal's context says what the file will.
  if (jp)
    if (Json context = to_json(prov); context != journalled_context)
      jp->append(context_key(prov, run), context);
  // What `--from-journal` reads to say that this run finished.
  if (jp && !out.stopped && !out.gpu_lost)
    jp->append(finished_key(prov, run), Json{{"measured", out.measured}, {"failed", out.failed}});
  progress.finish();
  if (!writer) {
    out.summary = fmt::format("rank {} of {}: its measurements went to rank 0, which writes {}",
                              launch.rank, launch.size, o.out.string());
    return out;
  }

  if (out.stopped) prov.add_note("partial: the run was interrupted; --resume completes it");
  const Assembly assembly = assemble(*journal, prov, run);
  save_calibration(assembly.file, o.out);
  out.summary = file_summary(assembly.file, o.out);
  return out;
}

}  // namespace hetplan::profiler
