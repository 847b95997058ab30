#include "costmodel/calibration.h"

#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "costmodel/atomic_file.h"
#include "costmodel/calibration_gpu_type.h"
#include "costmodel/errors.h"
#include "costmodel/hardware.h"

namespace hetplan {

namespace {

Json priors_to_json(const DatasheetPriors& p) {
  Json j;
  j["gemm_efficiency"] = p.gemm_efficiency;
  j["memory_efficiency"] = p.memory_efficiency;
  j["kernel_launch_s"] = p.kernel_launch_s;
  j["attention_efficiency"] = p.attention_efficiency;
  if (!p.gemm_curve_from.empty()) j["gemm_curve_from"] = p.gemm_curve_from;
  return j;
}

double fraction(ObjectReader& r, std::string_view key) {
  const double v = r.positive(key);
  if (v > 1) r.fail(key, fmt::format("expected a fraction in (0, 1], found {}", v));
  return v;
}

DatasheetPriors priors_from_json(ObjectReader r) {
  DatasheetPriors p;
  auto eff = r.object("gemm_efficiency");
  for (const auto& key : eff.keys()) {
    Dtype d;
    if (!parse_dtype(key, d))
      eff.fail(key, "expected a dtype key (fp32, tf32, fp16, bf16, fp8, fp4)");
    p.gemm_efficiency[key] = fraction(eff, key);
  }
  p.memory_efficiency = fraction(r, "memory_efficiency");
  p.kernel_launch_s = r.positive("kernel_launch_s");
  if (p.kernel_launch_s > kMaxLaunchS)
    r.fail("kernel_launch_s", fmt::format("expected a launch cost of at most {} s, found {}",
                                          kMaxLaunchS, p.kernel_launch_s));
  p.attention_efficiency = fraction(r, "attention_efficiency");
  p.gemm_curve_from = r.string_or("gemm_curve_from", "");
  r.finish();
  return p;
}

template <typename T, typename F>
std::vector<T> read_list(ObjectReader& r, std::string_view key, F parse) {
  std::vector<T> out;
  for (auto& item : r.objects_or_empty(key)) out.push_back(parse(item));
  return out;
}

template <typename T>
Json list_to_json(const std::vector<T>& items) {
  Json arr = Json::array();
  for (const auto& item : items) arr.push_back(to_json(item));
  return arr;
}

}  // namespace

Json to_json(const CalibrationFile& f) {
  Json j;
  j["format"] = kCalibrationFormat;
  j["schema_version"] = kCalibrationSchemaVersion;
  j["context"] = to_json(f.context);
  if (f.datasheet) j["datasheet"] = priors_to_json(*f.datasheet);
  j["gemm"] = list_to_json(f.gemm);
  j["kernels"] = list_to_json(f.kernels);
  j["layers"] = list_to_json(f.layers);
  j["collectives"] = list_to_json(f.collectives);
  j["p2p"] = list_to_json(f.p2p);
  j["host_device"] = list_to_json(f.host_device);
  // Imported sections are written only when present, so files without them stay readable by
  // readers that predate them.
  if (!f.layer_forward.empty()) j["layer_forward"] = list_to_json(f.layer_forward);
  if (!f.serving_layer.empty()) j["serving_layer"] = list_to_json(f.serving_layer);
  if (!f.host.empty()) j["host"] = list_to_json(f.host);
  Json failures = Json::array();
  for (const auto& fm : f.failures) failures.push_back({{"what", fm.what}, {"error", fm.error}});
  j["failures"] = failures;
  return j;
}

CalibrationFile calibration_from_document(const Document& doc) {
  ObjectReader r(doc);
  require_format(r, kCalibrationFormat, kCalibrationSchemaVersion);
  CalibrationFile f;
  f.origin = doc.origin;
  f.context = provenance_from_json(r.object("context"));
  if (auto d = r.optional_object("datasheet")) f.datasheet = priors_from_json(*d);
  if (f.context.source == "datasheet" && !f.datasheet)
    r.fail("datasheet", "missing: a file with source \"datasheet\" must give its priors");
  f.gemm = read_list<GemmMeasurement>(r, "gemm", gemm_from_json);
  f.kernels = read_list<KernelMeasurement>(r, "kernels", kernel_from_json);
  f.layers = read_list<LayerMeasurement>(r, "layers", layer_from_json);
  f.collectives = read_list<CollectiveMeasurement>(r, "collectives", collective_from_json);
  f.p2p = read_list<P2pMeasurement>(r, "p2p", p2p_from_json);
  f.host_device = read_list<HostDeviceMeasurement>(r, "host_device", host_device_from_json);
  f.layer_forward = read_list<LayerForwardMeasurement>(r, "layer_forward", layer_forward_from_json);
  f.serving_layer = read_list<ServingLayerMeasurement>(r, "serving_layer", serving_layer_from_json);
  f.host = read_list<HostMeasurement>(r, "host", host_from_json);
  for (auto& item : r.objects_or_empty("failures")) {
    f.failures.push_back({item.string("what"), item.string("error")});
    item.finish();
  }
  r.finish();
  check_gpu_type_form(f);
  return f;
}

CalibrationFile load_calibration(const std::filesystem::path& path) {
  return calibration_from_document(load_document(path));
}

void save_calibration(const CalibrationFile& file, const std::filesystem::path& path) {
  write_json_atomically(to_json(file), path);
}

std::string gpu_preset_names() { return hardware_preset_names("gpus"); }

std::string per_gpu_records(const CalibrationFile& f) {
  std::string out;
  auto count = [&](size_t n, const char* what) {
    if (n) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", n, what);
  };
  count(f.gemm.size(), "GEMM");
  count(f.kernels.size(), "kernel");
  count(f.layers.size(), "layer");
  count(f.layer_forward.size(), "layer_forward");
  count(f.serving_layer.size(), "serving_layer");
  count(f.host.size(), "host");
  if (f.datasheet) out += std::string(out.empty() ? "" : ", ") + "datasheet priors";
  return out;
}

}  // namespace hetplan
