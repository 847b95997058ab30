#include "costmodel/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/hardware.h"
#include "costmodel/input_files.h"

namespace hetplan {
namespace {

// Measured GEMMs may beat the datasheet peak by clock and rounding differences, not by more.
constexpr double kPeakMargin = 1.1;

int source_rank(const std::string& source) {
  if (source == "measured") return 3;
  if (source.rfind("imported:", 0) == 0) return 2;
  if (source == "datasheet") return 1;
  return 0;
}

// time = overhead + bytes / bw, least squares weighted by 1/time^2 (relative error).
KernelFit fit_kernel(const std::vector<std::pair<double, double>>& bytes_time) {
  KernelFit f;
  f.points = static_cast<int64_t>(bytes_time.size());
  double s_w = 0, s_x = 0, s_y = 0, s_xx = 0, s_xy = 0;
  for (auto [x, y] : bytes_time) {
    const double w = 1 / (y * y);
    s_w += w;
    s_x += w * x;
    s_y += w * y;
    s_xx += w * x * x;
    s_xy += w * x * y;
  }
  const double det = s_w * s_xx - s_x * s_x;
  double slope = 0, intercept = 0;
  double lo = bytes_time.front().first, hi = lo;
  for (auto [x, y] : bytes_time) lo = std::min(lo, x), hi = std::max(hi, x);
  if (hi < 2 * lo) {
    // Sizes too close to separate a launch overhead from the bandwidth (shapes of equal bytes):
    // the bandwidth of all points together, no overhead.
    double sx = 0, sy = 0;
    for (auto [x, y] : bytes_time) sx += x, sy += y;
    slope = sy / sx;
  } else if (det > 0) {
    slope = (s_w * s_xy - s_x * s_y) / det;
    intercept = (s_y - slope * s_x) / s_w;
  }
  if (slope <= 0) {  // one point, or noise: bandwidth from the largest point alone
    auto largest = *std::max_element(bytes_time.begin(), bytes_time.end());
    slope = largest.second / largest.first;
    intercept = 0;
  }
  f.GBps = 1 / slope / 1e9;
  f.overhead_s = std::max(0.0, intercept);
  std::vector<double> errs;
  for (auto [x, y] : bytes_time) errs.push_back(std::abs(f.overhead_s + x * slope - y) / y);
  f.median_rel_error = summarize(errs).median;
  return f;
}

// One fused-attention timing: its executed FLOPs, seconds and sequence length (0 = not given).
struct AttentionPoint {
  double flops = 0, time_s = 0, seq = 0;
};

double sequence_of(const KernelMeasurement& k) {
  if (!k.params.is_object() || !k.params.contains("seq") || !k.params["seq"].is_number()) return 0;
  return k.params["seq"].get<double>();
}

struct AttentionFit {
  double efficiency = 0, seq_half = 0;
};

// Efficiency e x s / (s + half) of the peak at sequence s, fitted to the points by least squares on
// its logarithm: for each half on a grid (0 and 16 to 2^20 in steps of 2^(1/8)), e is the
// geometric mean that half leaves, at most 1. With fewer than two sequence lengths (or one not
// given) the length cannot be told apart from the rest: half is 0 and e the median efficiency of
// the larger half of the problems, as a flat efficiency was always fitted.
AttentionFit fit_attention(std::vector<AttentionPoint> pts, double peak) {
  AttentionFit best;
  if (pts.empty()) return best;
  std::set<double> lengths;
  bool every_length = true;
  for (const auto& p : pts) {
    lengths.insert(p.seq);
    every_length = every_length && p.seq > 0;
  }
  auto efficiency = [&](const AttentionPoint& p) { return p.flops / p.time_s / peak; };
  if (lengths.size() < 2 || !every_length) {
    std::sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) {
      return std::tie(a.flops, a.time_s) < std::tie(b.flops, b.time_s);
    });
    std::vector<double> effs;
    for (size_t i = pts.size() / 2; i < pts.size(); ++i) effs.push_back(efficiency(pts[i]));
    best.efficiency = std::clamp(summarize(effs).median, 0.01, 1.0);
    return best;
  }
  double best_sse = std::numeric_limits<double>::infinity();
  for (int i = -1; i <= 128; ++i) {
    const double half = i < 0 ? 0 : 16 * std::exp2(i / 8.0);
    double mean_log = 0;
    for (const auto& p : pts) mean_log += std::log(efficiency(p) * (p.seq + half) / p.seq);
    mean_log /= static_cast<double>(pts.size());
    const double e = std::exp(mean_log);
    if (e > 1) continue;
    double sse = 0;
    for (const auto& p : pts) {
      const double r = std::log(efficiency(p) * (p.seq + half) / p.seq) - mean_log;
      sse += r * r;
    }
    if (sse < best_sse) {
      best_sse = sse;
      best = {std::max(e, 0.01), half};
    }
  }
  return best;
}

void apply_priors(GpuFit& fit, const DatasheetPriors& p) {
  for (const auto& [dtype_name, eff] : p.gemm_efficiency) {
    Dtype d;
    parse_dtype(dtype_name, d);
    fit.gemm[d].peak_fraction = eff;
  }
  fit.memory_efficiency = p.memory_efficiency;
  fit.launch_s = p.kernel_launch_s;
  fit.attention_efficiency = p.attention_efficiency;
  fit.attention_bwd_efficiency = p.attention_efficiency;
  fit.attention_seq_half = fit.attention_bwd_seq_half = 0;
  for (auto& [d, e] : fit.gemm) e.overhead_s = p.kernel_launch_s;
}

void apply_measurements(GpuFit& fit, const CalibrationFile& f, const std::optional<GpuSpec>& gpu) {
  const bool known_gpu = gpu.has_value();
  const GpuSpec spec = known_gpu ? *gpu : GpuSpec{};
  // GEMMs: measured points per dtype; the analytical model is fitted to them once every file is
  // in (fit_gemms), with the streaming bandwidth the files settle on. A time that implies more
  // than the datasheet peak is no measurement of this GPU (a unit error, another GPU's file).
  for (size_t i = 0; i < f.gemm.size(); ++i) {
    const GemmMeasurement& g = f.gemm[i];
    const double peak = known_gpu ? spec.peak_flops(g.dtype) : 0;
    const double achieved = g.shape.flops() / g.time_s.median;
    if (peak > 0 && achieved > kPeakMargin * peak)
      throw InputError(
          f.origin, fmt::format("gemm[{}].time.median_s", i),
          fmt::format("{} x {} x {} (batch {}) {} in {:.4g} s is {:.4g} TFLOP/s, above the {}'s {} "
                      "peak of {:.4g} TFLOP/s: expected the seconds one product took on it",
                      g.shape.m, g.shape.n, g.shape.k, g.shape.batch, to_string(g.dtype),
                      g.time_s.median, achieved / 1e12, fit.gpu_type, to_string(g.dtype),
                      peak / 1e12));
    fit.gemm_points[g.dtype].push_back({g.shape, g.time_s.median});
  }
  // Memory-bound kernels: a fit per kernel; the copy probe sets the streaming bandwidth.
  // Activations are half precision: fp32 variants of a kernel count only where no half-precision
  // one was measured.
  auto half = [](const KernelMeasurement& k) {
    return k.dtype == Dtype::kBf16 || k.dtype == Dtype::kFp16;
  };
  std::set<std::string> has_half;
  for (const auto& k : f.kernels)
    if (half(k)) has_half.insert(cost_op_name(k.kernel));
  std::map<std::string, std::vector<std::pair<double, double>>> by_kernel;
  std::map<std::string, std::vector<AttentionPoint>> attention;
  for (const auto& k : f.kernels) {
    const std::string name = cost_op_name(k.kernel);
    if (!half(k) && has_half.count(name)) continue;
    if (is_attention_measurement(k))
      attention[name].push_back({k.flops, k.time_s.median, sequence_of(k)});
    else if (k.bytes > 0)
      by_kernel[name].emplace_back(k.bytes, k.time_s.median);
  }
  std::vector<double> overheads;
  for (const auto& [name, pts] : by_kernel) {
    fit.kernels[name] = fit_kernel(pts);
    overheads.push_back(fit.kernels[name].overhead_s);
  }
  if (auto it = fit.kernels.find("copy"); it != fit.kernels.end() && known_gpu)
    fit.memory_efficiency = std::min(1.0, it->second.GBps / spec.memory_GBps);
  if (!overheads.empty()) fit.launch_s = std::max(1e-6, summarize(overheads).median);
  // Attention: forward and backward efficiencies apart, over the sequence length. What frameworks
  // run is PyTorch's SDPA (or the same FlashAttention and cuDNN kernels): where a file has SDPA's
  // timings (hetplan import --format torch-sdpa), its FLASH_ATTENTION backend's win, since that is
  // what a strategy's flash_attention names and what the reference harness runs
  // (scripts/reference/train.py picks it over cuDNN's); else its default backend's; else
  // hetplan's own kernels'.
  auto has = [&](const char* backend) {
    return attention.count(std::string("sdpa_fwd_") + backend) != 0 ||
           attention.count(std::string("sdpa_bwd_") + backend) != 0;
  };
  const char* backend = has("flash_attention") ? "flash_attention"
                        : has("default")       ? "default"
                                               : nullptr;
  const bool have_sdpa = backend != nullptr;
  for (auto it = attention.begin(); it != attention.end();) {
    const bool sdpa = it->first.rfind("sdpa_", 0) == 0;
    const bool keep = have_sdpa ? it->first == std::string("sdpa_fwd_") + backend ||
                                      it->first == std::string("sdpa_bwd_") + backend
                                : !sdpa;
    it = keep ? std::next(it) : attention.erase(it);
  }
  // Another file of this GPU may already have given SDPA's figures: hetplan's do not replace them.
  const bool sdpa_known = fit.attention_source.rfind("torch sdpa", 0) == 0;
  if (!attention.empty() && known_gpu && (have_sdpa || !sdpa_known)) {
    const double peak = std::max(spec.peak_flops(Dtype::kBf16), spec.peak_flops(Dtype::kFp16));
    fit.attention_source = "hetplan kernels";
    if (have_sdpa && std::string(backend) == "flash_attention") {
      fit.attention_source = "torch sdpa, FLASH_ATTENTION backend";
    } else if (have_sdpa) {
      fit.attention_source = "torch sdpa, default backend";
      for (const auto& k : f.kernels)
        if (k.kernel == "sdpa_fwd_default" && k.params.is_object() && k.params.contains("picked")) {
          fit.attention_source += " (" + k.params["picked"].get<std::string>() + ")";
          break;
        }
    }
    std::vector<AttentionPoint> fwd, bwd;
    for (auto& [name, pts] : attention) {
      auto& out = name.find("bwd") != std::string::npos ? bwd : fwd;
      out.insert(out.end(), pts.begin(), pts.end());
    }
    const AttentionFit f_fit = fit_attention(fwd, peak), b_fit = fit_attention(bwd, peak);
    if (!fwd.empty()) {
      fit.attention_efficiency = f_fit.efficiency;
      fit.attention_seq_half = f_fit.seq_half;
    }
    fit.attention_bwd_efficiency = bwd.empty() ? fit.attention_efficiency : b_fit.efficiency;
    fit.attention_bwd_seq_half = bwd.empty() ? fit.attention_seq_half : b_fit.seq_half;
  }
  // Host cost per kernel: the median over the file's records (a later file's replace it).
  if (!f.host.empty()) {
    std::vector<double> per_kernel;
    for (const auto& h : f.host) per_kernel.push_back(h.s_per_kernel);
    fit.host_s_per_kernel = summarize(per_kernel).median;
    fit.host_points = static_cast<int64_t>(per_kernel.size());
  }
  fit.layers.insert(fit.layers.end(), f.layers.begin(), f.layers.end());
  for (LayerForwardMeasurement m : f.layer_forward) {
    if (m.node_type.empty()) m.node_type = f.context.node_type;
    fit.layer_forward.push_back(std::move(m));
  }
}

// The bandwidth the cost model gives the GEMM model (cost_model.cpp): datasheet x the fitted
// streaming efficiency.
double gemm_bandwidth_GBps(const GpuSpec& spec, const GpuFit& fit) {
  return spec.memory_GBps * fit.memory_efficiency;
}

// Whether `f` holds anything the training cost model fits: priors, GEMMs, kernels or layer timings.
bool shapes_training_fit(const CalibrationFile& f) {
  return f.datasheet || !f.gemm.empty() || !f.kernels.empty() || !f.layers.empty() ||
         !f.layer_forward.empty() || !f.host.empty();
}

// Fits each dtype's analytical GEMM model to its measured points and scores it in-sample
// (`hetplan fit` replaces the score by a held-out one, costmodel/profile_quality.h).
void fit_gemms(GpuFit& fit, const std::optional<GpuSpec>& gpu) {
  if (!gpu) return;
  const GpuSpec& spec = *gpu;
  for (const auto& [dtype, pts] : fit.gemm_points) {
    if (!spec.supports(dtype) || pts.empty()) continue;
    const GemmEfficiency prior = fit.gemm.count(dtype) ? fit.gemm[dtype] : GemmEfficiency{};
    const double bandwidth = gemm_bandwidth_GBps(spec, fit);
    fit.gemm[dtype] = fit_gemm_efficiency(pts, prior, spec.peak_flops(dtype), bandwidth,
                                          spec.sm_count, dtype_bytes(dtype));
    const GemmModel m(fit.gemm[dtype], spec.peak_flops(dtype), bandwidth, spec.sm_count,
                      dtype_bytes(dtype));
    std::vector<double> errs;
    for (const auto& p : pts) errs.push_back(std::abs(m.analytical_s(p.shape) / p.time_s - 1));
    std::sort(errs.begin(), errs.end());
    fit.gemm_quality[dtype] = {static_cast<int64_t>(errs.size()), percentile_sorted(errs, 0.5),
                               percentile_sorted(errs, 0.95), "in-sample, analytical"};
  }
}

}  // namespace

bool is_attention_measurement(const KernelMeasurement& k) {
  return (k.kernel.rfind("attention", 0) == 0 || k.kernel.rfind("sdpa_", 0) == 0) && k.flops > 0;
}

std::string cost_op_name(const std::string& measured) {
  std::string n = measured;
  for (const char* suffix : {"_bf16", "_fp16", "_fp32", "_fp8"}) {
    const std::string sfx(suffix);
    if (n.size() > sfx.size() && n.compare(n.size() - sfx.size(), sfx.size(), sfx) == 0) {
      n.resize(n.size() - sfx.size());
      break;
    }
  }
  static const std::map<std::string, std::string> kRename = {
      {"layernorm_bwd_input", "layernorm_bwd"},
      {"rmsnorm_bwd_input", "rmsnorm_bwd"},
      {"dropout_bwd", "bias_dropout_residual_bwd"},
      {"adamw_step", "adamw"},
      {"memcpy_d2d", "copy"},
      {"d2d_copy", "copy"},
      {"bandwidth_copy", "copy"}};
  if (auto it = kRename.find(n); it != kRename.end()) return it->second;
  return n;
}

GpuFit Profile::gpu(const std::string& gpu_type) const {
  auto it = gpus.find(gpu_type);
  if (it != gpus.end()) return it->second;
  GpuFit fit;
  fit.gpu_type = gpu_type;
  fit.source = "default";
  return fit;
}

Profile fit_profile(const std::vector<CalibrationFile>& files,
                    const std::map<std::string, GpuSpec>& gpu_types) {
  Profile profile;
  // Lowest-ranked sources first, so that better ones override them.
  std::vector<const CalibrationFile*> order;
  for (const auto& f : files) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return source_rank(a->context.source) < source_rank(b->context.source);
  });
  for (const CalibrationFile* f : order) {
    profile.origins.push_back(f->origin);
    profile.collectives.insert(profile.collectives.end(), f->collectives.begin(),
                               f->collectives.end());
    profile.failures.insert(profile.failures.end(), f->failures.begin(), f->failures.end());
    const std::string& type = f->context.gpu_type;
    if (type.empty()) continue;  // a links-only file
    GpuFit& fit = profile.gpus[type];
    fit.gpu_type = type;
    fit.origins.push_back(f->origin);
    if (fit.source.empty()) fit.source = "default";
    // Serving tables (Helix's serving_layer) are kept for reference and change no training
    // coefficient: a file of them alone is no source of the GPU's fit.
    if (shapes_training_fit(*f) && source_rank(f->context.source) >= source_rank(fit.source))
      fit.source = f->context.source;
    if (f->datasheet) apply_priors(fit, *f->datasheet);
    apply_measurements(fit, *f, find_gpu_spec(type, gpu_types));
  }
  for (auto& [type, fit] : profile.gpus) fit_gemms(fit, find_gpu_spec(type, gpu_types));
  return profile;
}

std::filesystem::path default_calibration_dir() {
  if (const char* env = std::getenv("HETPLAN_CALIBRATION_DIR")) return env;
  return std::filesystem::path(HETPLAN_SOURCE_DIR) / "calibration_data";
}

std::vector<std::filesystem::path> json_files_under(const std::filesystem::path& folder) {
  std::vector<std::filesystem::path> found;
  for (const auto& e : std::filesystem::recursive_directory_iterator(folder))
    if (e.is_regular_file() && e.path().extension() == ".json") found.push_back(e.path());
  std::sort(found.begin(), found.end());
  return found;
}

namespace {

void collect_json_files(const std::filesystem::path& p, std::vector<std::filesystem::path>& out) {
  if (std::filesystem::is_directory(p)) {
    const auto found = json_files_under(p);
    // A folder named on purpose that holds nothing to read is a wrong path, not "no calibration".
    if (found.empty())
      throw InputError(p.string(), "", "a folder with no .json calibration file under it");
    out.insert(out.end(), found.begin(), found.end());
  } else if (std::filesystem::exists(p)) {
    out.push_back(p);
  } else {
    throw InputError(p.string(), "", "no such calibration file or directory");
  }
}

void merge_profile(Profile& into, const Profile& other) {
  for (const auto& [type, fit] : other.gpus)
    if (source_rank(fit.source) >= source_rank(into.gpu(type).source)) into.gpus[type] = fit;
  into.collectives.insert(into.collectives.end(), other.collectives.begin(),
                          other.collectives.end());
  into.origins.insert(into.origins.end(), other.origins.begin(), other.origins.end());
  into.failures.insert(into.failures.end(), other.failures.begin(), other.failures.end());
}

}  // namespace

ProfileInputs read_profile_inputs(const std::vector<std::string>& paths) {
  std::vector<std::filesystem::path> files;
  for (const auto& p : paths) collect_json_files(p, files);
  ProfileInputs in;
  in.repeated = repeated_inputs(files);
  std::vector<bool> skip(files.size(), false);
  for (const auto& r : in.repeated) skip[r.index] = true;
  for (size_t i = 0; i < files.size(); ++i) {
    if (skip[i]) continue;
    const std::filesystem::path& f = files[i];
    Document doc = load_document(f);
    const std::string format = doc.root.is_object() ? doc.root.value("format", "") : "";
    if (format == kProfileFormat) {
      in.profiles.push_back(profile_from_document(doc));
    } else if (format == kCalibrationFormat) {
      in.calibrations.push_back(calibration_from_document(doc));
    } else {
      throw InputError(
          f.string(), "format",
          fmt::format("expected \"{}\" or \"{}\"", kCalibrationFormat, kProfileFormat));
    }
  }
  return in;
}

std::vector<CalibrationFile> read_calibration_inputs(const std::vector<std::string>& paths,
                                                     const std::string& command) {
  std::vector<std::filesystem::path> files;
  for (const auto& p : paths) collect_json_files(p, files);
  require_distinct_inputs(files);
  std::vector<CalibrationFile> out;
  for (const auto& f : files) {
    const Document doc = load_document(f);
    if (doc.root.is_object() && doc.root.value("format", "") == kProfileFormat)
      throw InputError(f.string(), "format",
                       fmt::format("expected \"{}\": this is a profile, which {} does not read "
                                   "(it takes the calibration files the profile was fitted from)",
                                   kCalibrationFormat, command));
    out.push_back(calibration_from_document(doc));
  }
  if (out.empty())
    throw InputError(fmt::format("{}: no calibration file in {}", command,
                                 paths.empty() ? std::string("the inputs") : paths.front()));
  return out;
}

Profile merge_fitted(const std::vector<CalibrationFile>& calibrations,
                     const std::vector<Profile>& profiles,
                     const std::map<std::string, GpuSpec>& gpu_types) {
  Profile profile = fit_profile(calibrations, gpu_types);
  for (const auto& p : profiles) merge_profile(profile, p);
  return profile;
}

Profile load_profile_inputs(const std::vector<std::string>& paths) {
  const ProfileInputs in = read_profile_inputs(paths);
  return merge_fitted(in.calibrations, in.profiles);
}

}  // namespace hetplan
