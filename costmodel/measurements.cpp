#include "costmodel/measurements.h"

#include <algorithm>

#include <fmt/format.h>

#include "costmodel/atomic_file.h"
#include "costmodel/calibration.h"
#include "costmodel/errors.h"
#include "costmodel/whole_number.h"

namespace hetplan {
namespace {

bool has_tool_prefix(const std::string& source, std::string_view prefix) {
  return source.size() > prefix.size() && source.compare(0, prefix.size(), prefix) == 0;
}

// A number (one observation) or a distribution object.
Distribution read_iteration_time(ObjectReader& r) {
  const Json& v = r.raw("iteration_s");
  if (v.is_number()) {
    const double t = v.get<double>();
    if (!(t > 0)) r.fail("iteration_s", fmt::format("expected a time > 0, found {}", t));
    Distribution d;
    d.count = 1;
    d.median = d.min = d.max = d.p10 = d.p90 = d.mean = t;
    return d;
  }
  if (!v.is_object())
    r.fail("iteration_s",
           "expected seconds (a number) or a distribution {\"count\", "
           "\"median_s\", ...}, found " +
               describe_json(v));
  return distribution_from_json(r.object("iteration_s"));
}

// A number (the whole run) or a list (per pipeline stage or rank).
std::vector<double> read_peak_memory(ObjectReader& r) {
  const Json& v = r.raw("peak_memory_bytes");
  std::vector<double> out;
  if (v.is_number()) {
    out.push_back(v.get<double>());
  } else if (v.is_array()) {
    out = r.numbers("peak_memory_bytes");
  } else {
    r.fail("peak_memory_bytes",
           "expected bytes (a number) or a list of bytes per stage or "
           "rank, found " +
               describe_json(v));
  }
  for (double b : out)
    if (!(b >= 0)) r.fail("peak_memory_bytes", fmt::format("expected bytes >= 0, found {}", b));
  return out;
}

// Every entry of "assumed" names a key the measurement has, or one of its strategy's.
void check_assumed(ObjectReader& r, const Measurement& m) {
  constexpr std::string_view kStrategy = "strategy.";
  for (size_t i = 0; i < m.assumed.size(); ++i) {
    const std::string& key = m.assumed[i];
    const bool found = key.starts_with(kStrategy)
                           ? m.strategy.contains(key.substr(kStrategy.size()))
                           : key != "assumed" && r.has(key);
    if (!found)
      r.fail(fmt::format("assumed[{}]", i),
             fmt::format("expected a key of this measurement or \"strategy.<key>\" of its "
                         "strategy, found \"{}\"",
                         key));
  }
}

}  // namespace

Json to_json(const MeasurementContext& c) {
  Json j = Json::object();
  auto put = [&](const char* key, const std::string& v) {
    if (!v.empty()) j[key] = v;
  };
  put("host", c.host);
  put("date", c.date);
  put("command", c.command);
  put("hetplan_version", c.hetplan_version);
  put("gpu_type", c.gpu_type);
  put("gpu_name", c.gpu_name);
  if (c.gpu_count > 0) j["gpu_count"] = c.gpu_count;
  put("framework", c.framework);
  put("framework_version", c.framework_version);
  if (!c.versions.empty()) j["versions"] = c.versions;
  if (!c.inputs.empty()) j["inputs"] = c.inputs;
  put("notes", c.notes);
  return j;
}

MeasurementContext measurement_context_from_json(ObjectReader r) {
  MeasurementContext c;
  c.host = r.string_or("host", "");
  c.date = r.string_or("date", "");
  c.command = r.string_or("command", "");
  c.hetplan_version = r.string_or("hetplan_version", "");
  c.gpu_type = r.string_or("gpu_type", "");
  c.gpu_name = r.string_or("gpu_name", "");
  c.gpu_count = r.integer_or("gpu_count", 0);
  if (c.gpu_count < 0) r.fail("gpu_count", "expected a GPU count >= 0");
  c.framework = r.string_or("framework", "");
  c.framework_version = r.string_or("framework_version", "");
  if (auto v = r.optional_object("versions"))
    for (const auto& key : v->keys()) c.versions[key] = v->string(key);
  if (r.has("inputs")) c.inputs = r.strings("inputs");
  c.notes = r.string_or("notes", "");
  r.finish();
  return c;
}

Json to_json(const Measurement& m) {
  Json j;
  j["model"] = m.model;
  if (!m.cluster.empty()) j["cluster"] = m.cluster;
  j["strategy"] = m.strategy;
  if (m.iteration_s) j["iteration_s"] = to_json(*m.iteration_s);
  if (!m.iteration_samples_s.empty()) j["iteration_samples_s"] = m.iteration_samples_s;
  if (m.warmup_iterations > 0) j["warmup_iterations"] = m.warmup_iterations;
  if (!m.peak_memory_bytes.empty()) {
    // Whole bytes (an importer converts MiB or GiB with a fraction); files with fractions read.
    j["peak_memory_bytes"] = whole_numbers_json(m.peak_memory_bytes);
    j["peak_memory_kind"] = m.peak_memory_kind;
  }
  j["source"] = m.source;
  j["oom"] = m.oom;
  if (!m.error.empty()) j["error"] = m.error;
  if (!m.origin.empty()) j["origin"] = m.origin;
  j["notes"] = m.notes;
  if (m.clocks) j["clocks"] = to_json(*m.clocks);
  if (!m.assumed.empty()) j["assumed"] = m.assumed;
  return j;
}

Measurement measurement_from_json(ObjectReader r) {
  Measurement m;
  m.key_path = r.path();
  m.model = r.string("model");
  if (m.model.empty()) r.fail("model", "expected a model name, found an empty string");
  m.cluster = r.string_or("cluster", "");
  m.strategy = r.raw("strategy");
  if (!m.strategy.is_object())
    r.fail("strategy",
           "expected a strategy object (dp, tp, pp, micro_batch, global_batch, ...), "
           "found " +
               describe_json(m.strategy));
  m.source = r.string("source");
  if (!has_tool_prefix(m.source, "measured:") && !has_tool_prefix(m.source, "imported:"))
    r.fail("source", fmt::format("expected \"measured:<harness>\" or \"imported:<tool>\", found "
                                 "\"{}\"",
                                 m.source));
  m.oom = r.boolean_or("oom", false);
  m.error = r.string_or("error", "");
  const bool failed = m.oom || !m.error.empty();
  if (r.has("iteration_s")) {
    if (failed)
      r.fail("iteration_s",
             "a run that failed (oom or error) has no iteration time; drop "
             "iteration_s or the failure");
    m.iteration_s = read_iteration_time(r);
  } else if (!failed) {
    r.fail("iteration_s",
           "missing: expected the iteration time (seconds, or a distribution) "
           "unless the run failed (\"oom\": true or an \"error\")");
  }
  if (r.has("iteration_samples_s")) {
    m.iteration_samples_s = r.numbers("iteration_samples_s");
    for (double t : m.iteration_samples_s)
      if (!(t > 0)) r.fail("iteration_samples_s", fmt::format("expected times > 0, found {}", t));
  }
  m.warmup_iterations = r.integer_or("warmup_iterations", 0);
  if (m.warmup_iterations < 0) r.fail("warmup_iterations", "expected a count >= 0");
  if (r.has("peak_memory_bytes")) m.peak_memory_bytes = read_peak_memory(r);
  m.peak_memory_kind =
      r.choice_or("peak_memory_kind", {"allocated", "reserved", "device"}, "allocated");
  m.origin = r.string_or("origin", "");
  m.notes = r.string_or("notes", "");
  if (auto clocks = r.optional_object("clocks")) m.clocks = clock_summary_from_json(*clocks);
  if (r.has("assumed")) m.assumed = r.strings("assumed");
  check_assumed(r, m);
  r.finish();
  return m;
}

Json to_json(const MeasurementsFile& f) {
  Json j;
  j["format"] = kMeasurementsFormat;
  j["schema_version"] = kMeasurementsSchemaVersion;
  j["context"] = to_json(f.context);
  Json list = Json::array();
  for (const auto& m : f.measurements) list.push_back(to_json(m));
  j["measurements"] = list;
  return j;
}

MeasurementsFile measurements_from_document(const Document& doc) {
  ObjectReader r(doc);
  require_format(r, kMeasurementsFormat, kMeasurementsSchemaVersion);
  MeasurementsFile f;
  f.origin = doc.origin;
  f.context = measurement_context_from_json(r.object("context"));
  for (auto& item : r.objects("measurements"))
    f.measurements.push_back(measurement_from_json(item));
  r.finish();
  return f;
}

MeasurementsFile load_measurements(const std::filesystem::path& path) {
  return measurements_from_document(load_document(path));
}

void save_measurements(const MeasurementsFile& file, const std::filesystem::path& path) {
  write_json_atomically(to_json(file), path);
}

double max_peak_memory(const Measurement& m) {
  double peak = 0;
  for (double b : m.peak_memory_bytes) peak = std::max(peak, b);
  return peak;
}

}  // namespace hetplan
