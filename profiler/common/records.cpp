#include "profiler/common/records.h"

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
    context.notes += (context.notes.empty() ? "" : "; ") + note;
  }
  a.file.context = std::move(context);
  return a;
}

}  // namespace hetplan::profiler
