#include "costmodel/calibration_merge.h"

#include <map>
#include <tuple>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan {
namespace {

auto key_of(const CollectiveMeasurement& m) {
  return std::tuple(m.op, m.dtype, m.bytes, m.group_size, m.nodes, m.gpus_per_node, m.link, m.gpus);
}
auto key_of(const P2pMeasurement& m) { return std::tuple(m.src, m.dst, m.bytes, m.link, m.gpus); }
auto key_of(const HostDeviceMeasurement& m) {
  return std::tuple(m.direction, m.pinned, m.bytes, m.gpus);
}
bool is_ok(const CollectiveMeasurement& m) { return m.ok; }
bool is_ok(const P2pMeasurement&) { return true; }
bool is_ok(const HostDeviceMeasurement&) { return true; }

// Keeps one measurement per key, in first-seen order: later replaces earlier unless it failed and
// the earlier did not.
template <typename T>
std::vector<T> deduplicate(const std::vector<T>& items) {
  std::vector<T> out;
  std::map<decltype(key_of(items.front())), size_t> index;
  for (const T& m : items) {
    auto [it, fresh] = index.emplace(key_of(m), out.size());
    if (fresh) {
      out.push_back(m);
    } else if (is_ok(m) || !is_ok(out[it->second])) {
      out[it->second] = m;
    }
  }
  return out;
}

std::string name_of(const CalibrationFile& f, size_t i) {
  return f.origin.empty() ? fmt::format("file {}", i + 1) : f.origin;
}

// Per-GPU measurements keep their GPU only through the file's context: every file that has them
// must name one GPU type, and be of one source (the rank `fit` gives a file's GPU type). Returns
// the index of the first such file, or files.size() when none has any.
size_t check_per_gpu_files(const std::vector<CalibrationFile>& files) {
  size_t first = files.size();
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string records = per_gpu_records(files[i]);
    if (records.empty()) continue;
    if (first == files.size()) {
      first = i;
      continue;
    }
    const CalibrationFile& a = files[first];
    const CalibrationFile& b = files[i];
    if (context_gpu_kind(a.context) != context_gpu_kind(b.context))
      throw InputError(fmt::format(
          "merge: {} ({}: {}) and {} ({}: {}) hold measurements of different GPU types, which a "
          "merged file would lose (a calibration file holds one GPU type's GEMM, kernel and "
          "layer measurements): pass them separately to fit or --calibration, each keeps its "
          "type; merge joins ranks and runs of one GPU type, and communication-only files of "
          "several node kinds",
          name_of(a, first), context_gpu_kind(a.context), per_gpu_records(a), name_of(b, i),
          context_gpu_kind(b.context), records));
    if (a.context.source != b.context.source)
      throw InputError(fmt::format(
          "merge: {} (source {}) and {} (source {}) hold measurements of one GPU type from "
          "different sources; fit and --calibration rank sources (measured > imported > "
          "datasheet), a merged file has one: pass them separately",
          name_of(a, first), a.context.source, name_of(b, i), b.context.source));
  }
  return first;
}

// Every file's citations: a figure cited differently by two files keeps both, the later under
// "<figure> (<file>)".
void merge_citations(Provenance& into, const CalibrationFile& other, size_t i) {
  for (const auto& [figure, source] : other.context.citations) {
    auto [it, fresh] = into.citations.emplace(figure, source);
    if (!fresh && it->second != source)
      into.citations[fmt::format("{} ({})", figure, name_of(other, i))] = source;
  }
}

}  // namespace

CalibrationFile merge_calibration_files(const std::vector<CalibrationFile>& files) {
  if (files.empty()) throw InputError("merge: no calibration file given");
  const size_t per_gpu = check_per_gpu_files(files);
  // The provenance of the file whose GPU the per-GPU measurements belong to, else the first's.
  const size_t base = per_gpu < files.size() ? per_gpu : 0;
  CalibrationFile out;
  out.context = files[base].context;
  bool same_kind = true;
  for (size_t i = 0; i < files.size(); ++i) {
    same_kind = same_kind && context_gpu_kind(files[i].context) == context_gpu_kind(out.context);
    const std::string notes = out.context.notes;
    merge_calibration(out, files[i]);
    if (i == base) out.context.notes = notes;  // its own provenance, not a "merged" note
    merge_citations(out.context, files[i], i);
    if (!out.datasheet && files[i].datasheet) out.datasheet = files[i].datasheet;
  }
  if (!same_kind && per_gpu == files.size()) {
    // Communication of several node kinds, tagged per measurement: the file describes a cluster.
    out.context.gpu_type.clear();
    out.context.gpu_name.clear();
    out.context.gpu_count = 0;
  }
  if (!out.collectives.empty()) out.collectives = deduplicate(out.collectives);
  if (!out.p2p.empty()) out.p2p = deduplicate(out.p2p);
  if (!out.host_device.empty()) out.host_device = deduplicate(out.host_device);
  std::vector<FailedMeasurement> failures;
  for (const auto& f : out.failures) {
    bool seen = false;
    for (const auto& g : failures) seen = seen || (g.what == f.what && g.error == f.error);
    if (!seen) failures.push_back(f);
  }
  out.failures = std::move(failures);
  out.origin.clear();
  return out;
}

void tag_measurements_with_gpu_kind(CalibrationFile& file) {
  const std::string kind = context_gpu_kind(file.context);
  if (kind.empty()) return;
  auto tag = [&](auto& list) {
    for (auto& m : list)
      if (m.gpus.empty()) m.gpus = {kind};
  };
  tag(file.collectives);
  tag(file.p2p);
  tag(file.host_device);
}

void merge_calibration(CalibrationFile& into, const CalibrationFile& other_in) {
  auto append = [](auto& a, const auto& b) { a.insert(a.end(), b.begin(), b.end()); };
  CalibrationFile other = other_in;
  tag_measurements_with_gpu_kind(other);
  append(into.gemm, other.gemm);
  append(into.kernels, other.kernels);
  append(into.layers, other.layers);
  append(into.collectives, other.collectives);
  append(into.p2p, other.p2p);
  append(into.host_device, other.host_device);
  append(into.layer_forward, other.layer_forward);
  append(into.serving_layer, other.serving_layer);
  append(into.host, other.host);
  append(into.failures, other.failures);
  const std::string note = fmt::format(
      "merged {} (source {}, host {}, date {})", other.origin.empty() ? "a file" : other.origin,
      other.context.source, other.context.host, other.context.date);
  into.context.add_note(note);
}

}  // namespace hetplan
