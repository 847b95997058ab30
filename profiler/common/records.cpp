#include "profiler/common/records.h"

#include <charconv>

#include <fmt/format.h>

#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "costmodel/journal.h"

namespace hetplan::profiler {

Json failure_record(const std::string& what, const std::string& error) {
  return Json{{"failed", {{"what", what}, {"error", error}}}};
}

bool is_failure_record(const Json& record) {
  return record.is_object() && record.contains("failed");
}

bool measured(const Journal& journal, const std::string& key) {
  const Json* r = journal.find(key);
  return r != nullptr && !is_failure_record(*r);
}

bool finished(const Journal& journal, const std::string& key, bool retry_failed) {
  return retry_failed ? measured(journal, key) : journal.contains(key);
}

std::string context_key(const Provenance& p, int64_t run) {
  return fmt::format("context/{}/{}", p.date, run);
}

std::string finished_key(const Provenance& p, int64_t run) {
  return fmt::format("finished/{}/{}", p.date, run);
}

namespace {

std::string_view prefix_of(const std::string& key) {
  const auto slash = key.find('/');
  return slash == std::string::npos ? std::string_view(key)
                                    : std::string_view(key).substr(0, slash);
}

// Adds one measurement record to `file`; returns false when the key names no known list.
bool add_record(CalibrationFile& file, std::string_view prefix, const ObjectReader& reader) {
  if (prefix == "gemm") {
    file.gemm.push_back(gemm_from_json(reader));
  } else if (prefix == "kernel") {
    file.kernels.push_back(kernel_from_json(reader));
  } else if (prefix == "layer") {
    file.layers.push_back(layer_from_json(reader));
  } else if (prefix == "collective") {
    file.collectives.push_back(collective_from_json(reader));
  } else if (prefix == "p2p") {
    file.p2p.push_back(p2p_from_json(reader));
  } else if (prefix == "host_device") {
    file.host_device.push_back(host_device_from_json(reader));
  } else {
    return false;
  }
  return true;
}

}  // namespace

Assembly assemble(const Journal& journal, Provenance context, int64_t run) {
  const std::string own_key = context_key(context, run);
  Assembly a;
  std::vector<std::string> earlier_runs;
  for (const auto& [key, record] : journal.entries()) {
    const std::string_view prefix = prefix_of(key);
    if (prefix == "finished") continue;  // a run's end, not a measurement
    const std::string origin = fmt::format("{} (key {})", journal.path().string(), key);
    if (prefix == "context") {
      if (key != own_key) {
        earlier_runs.push_back(fmt::format("{} on {}", string_or(record, "date", "?"),
                                           string_or(record, "host", "?")));
      }
      continue;
    }
    if (is_failure_record(record)) {
      const Json& f = record["failed"];
      a.file.failures.push_back(
          {string_or(f, "what", key), string_or(f, "error", "unknown error")});
      continue;
    }
    try {
      if (!add_record(a.file, prefix, ObjectReader(record, origin))) {
        a.file.failures.push_back({key, "journal record of an unknown kind; left out"});
        ++a.unreadable;
        continue;
      }
      ++a.measurements;
    } catch (const InputError& e) {
      a.file.failures.push_back({key, fmt::format("unreadable journal record: {}", e.what())});
      ++a.unreadable;
    }
  }
  if (!earlier_runs.empty()) {
    std::string note = fmt::format(
        "resumed: the journal also holds measurements of {} earlier "
        "run(s): ",
        earlier_runs.size());
    for (size_t i = 0; i < earlier_runs.size(); ++i) note += (i ? ", " : "") + earlier_runs[i];
    context.add_note(note);
  }
  a.file.context = std::move(context);
  return a;
}

Assembly assemble_from_journal(const Journal& journal, const std::string& command_line) {
  const std::string path = journal.path().string();
  const std::string* last_key = nullptr;
  const Json* last_record = nullptr;
  std::string first_gpu, first_date;
  int runs = 0;
  for (const auto& [key, record] : journal.entries()) {
    if (prefix_of(key) != "context") continue;
    ++runs;
    const std::string gpu = string_or(record, "gpu_name", "");
    const std::string date = string_or(record, "date", "?");
    if (first_gpu.empty()) {
      first_gpu = gpu;
      first_date = date;
    } else if (!gpu.empty() && gpu != first_gpu) {
      throw InputError(fmt::format(
          "{}: its runs measured different GPUs ({} on {}, {} on {}); a calibration file is of "
          "one GPU",
          path, first_gpu, first_date, gpu, date));
    }
    last_key = &key;
    last_record = &record;
  }
  if (!last_key)
    throw InputError(fmt::format(
        "{}: no run's provenance (a context/... record) in it: not a calibration journal, or cut "
        "before its first measurement",
        path));

  Provenance context =
      provenance_from_json(ObjectReader(*last_record, fmt::format("{} (key {})", path, *last_key)));
  // context/<date>/<run>: the run's process id, so that assemble() tells it from earlier runs.
  int64_t run = -1;
  const std::string_view run_text = std::string_view(*last_key).substr(last_key->rfind('/') + 1);
  std::from_chars(run_text.data(), run_text.data() + run_text.size(), run);
  const bool finished = journal.contains(finished_key(context, run));
  // The journal of OUT is OUT.journal.
  std::filesystem::path out = journal.path();
  out.replace_extension();
  context.add_note(fmt::format(
      "assembled from the journal {} alone, without measuring (`{}`); {}", path, command_line,
      finished ? "its last run finished"
               : fmt::format("its last run may not have finished (interrupted, killed, or "
                             "journalled before runs recorded their end); {}, completes it",
                             resume_command(context, out))));

  Assembly a = assemble(journal, std::move(context), run);
  a.last_run_finished = finished;
  if (a.measurements == 0 && a.file.failures.empty())
    throw InputError(
        fmt::format("{}: no measurement in it, only the provenance of {} run(s)", path, runs));
  return a;
}

std::string resume_command(const Provenance& run, const std::filesystem::path& out) {
  const bool collectives = run.command.find("calibrate-collectives") != std::string::npos;
  return fmt::format("`hetplan {} --out {} --resume` with its options, on {}",
                     collectives ? "calibrate-collectives" : "calibrate", out.string(),
                     collectives ? "the same GPUs and processes" : "that GPU");
}

std::string file_summary(const CalibrationFile& f, const std::filesystem::path& path) {
  return fmt::format(
      "{}: {} GEMMs, {} kernel measurements, {} layers, {} collectives, {} p2p, "
      "{} host-device, {} failures",
      path.string(), f.gemm.size(), f.kernels.size(), f.layers.size(), f.collectives.size(),
      f.p2p.size(), f.host_device.size(), f.failures.size());
}

}  // namespace hetplan::profiler
