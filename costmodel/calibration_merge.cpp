#include "costmodel/calibration_merge.h"

#include <map>
#include <tuple>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan {
namespace {

auto key_of(const CollectiveMeasurement& m) {
  return std::tuple(m.op, m.dtype, m.bytes, m.group_size, m.nodes, m.gpus_per_node, m.link,
                    m.gpus);
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

}  // namespace

CalibrationFile merge_calibration_files(const std::vector<CalibrationFile>& files) {
  if (files.empty()) throw InputError("merge: no calibration file given");
  CalibrationFile out = files.front();
  tag_measurements_with_gpu_kind(out);
  bool same_kind = true;
  for (size_t i = 1; i < files.size(); ++i) {
    same_kind = same_kind && context_gpu_kind(files[i].context) == context_gpu_kind(out.context);
    merge_calibration(out, files[i]);
    if (!out.datasheet && files[i].datasheet) out.datasheet = files[i].datasheet;
  }
  if (!same_kind) {
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

}  // namespace hetplan
