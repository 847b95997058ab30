#include "costmodel/profile.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "costmodel/attention_model.h"
#include "costmodel/clocks.h"
#include "costmodel/errors.h"
#include "costmodel/hardware.h"
#include "costmodel/input_files.h"
#include "costmodel/install_paths.h"
#include "costmodel/layer_correction.h"
#include "costmodel/linear_fit.h"
#include "costmodel/stats.h"

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

// time = overhead + bytes / bandwidth (costmodel/linear_fit.h). A kernel always has a bandwidth:
// where its times do not grow with the bytes, the slope through the origin.
KernelFit fit_kernel(const std::vector<std::pair<double, double>>& bytes_time) {
  std::vector<FitPoint> points;
  for (auto [bytes, time_s] : bytes_time) points.push_back({bytes, time_s});
  FixedSlopeFit line = fit_fixed_plus_slope(points);
  if (line.form == FitForm::kConstant) line = fit_through_origin(points);
  KernelFit f;
  f.points = static_cast<int64_t>(bytes_time.size());
  f.GBps = 1 / line.slope / 1e9;
  f.overhead_s = line.fixed;
  f.median_rel_error = line.median_rel_residual;
  return f;
}

// A fused-attention timing of a kernel measurement: its work from the params the profiler and
// the SDPA import record (batch, heads, seq, head_dim, causal; what is missing stays unknown).
AttentionSample attention_sample(const KernelMeasurement& k) {
  AttentionSample s;
  s.work.flops = k.flops;
  s.time_s = k.time_s.median;
  auto number = [&](const char* key) {
    return k.params.is_object() && k.params.contains(key) && k.params[key].is_number()
               ? k.params[key].get<double>()
               : 0.0;
  };
  s.work.batch_heads = static_cast<int64_t>(number("batch") * number("heads"));
  s.work.seq = static_cast<int64_t>(number("seq"));
  s.work.head_dim = static_cast<int64_t>(number("head_dim"));
  if (k.params.is_object() && k.params.contains("causal")) {  // true / false, or 1 / 0
    const Json& causal = k.params["causal"];
    s.work.causal = causal.is_boolean() ? causal.get<bool>() : number("causal") != 0;
  }
  return s;
}

// The attention kernels inside hetplan's whole-layer timings: per pass (forward, input gradient),
// the CUPTI trace's kernels whose name holds "attention_" (the pass and its preprocessing and dQ
// conversion, as the kernel measurements time them) against the layer's attention op. They are
// the same kernels as the kernel measurements', at the few heads x batch of tensor-parallel
// shards, where the grid's critical path shows.
void add_layer_attention(const LayerMeasurement& m, std::vector<AttentionSample>& fwd,
                         std::vector<AttentionSample>& bwd) {
  if (!m.trace.is_object() || m.tp < 1 || m.heads % m.tp != 0 || m.kv_heads % m.tp != 0) return;
  const LayerWork w = measured_block_work(m, m.dtype);
  const std::pair<const char*, Pass> passes[] = {{"forward", Pass::kForward},
                                                 {"backward_input", Pass::kBackwardInput}};
  for (const auto& [key, pass] : passes) {
    if (!m.trace.contains(key) || !m.trace[key].is_object()) continue;
    const Json& kernels = m.trace[key].value("kernels", Json::array());
    if (!kernels.is_array()) continue;
    // A free-form diagnostic: what is not as the profiler writes it is passed over.
    double seconds = 0;
    for (const Json& k : kernels) {
      if (!k.is_object() || !k.value("name", Json()).is_string()) continue;
      if (k["name"].get<std::string>().find("attention_") == std::string::npos) continue;
      seconds += number_or(k, "count", 1.0) * number_or(k, "mean_s", 0.0);
    }
    const AttentionOp* op = nullptr;
    int ops = 0;
    for (const AttentionOp& a : w.attention)
      if (a.pass == pass) op = &a, ++ops;
    if (seconds <= 0 || ops != 1) continue;
    (pass == Pass::kForward ? fwd : bwd).push_back({attention_work(*op), seconds, true});
  }
}

// Attention timings of one file into fit.attention_samples, by kernel name (cost_op_name) for the
// kernel measurements. What frameworks run is PyTorch's SDPA (or the same FlashAttention and
// cuDNN kernels): where a file has SDPA's timings (hetplan import --format torch-sdpa), its
// FLASH_ATTENTION backend's win, since that is what a strategy's flash_attention names and what
// the reference harness runs (scripts/reference/train.py picks it over cuDNN's); else its default
// backend's; else hetplan's own kernels', with those inside its whole-layer timings.
void collect_attention(GpuFit& fit, const CalibrationFile& f,
                       std::map<std::string, std::vector<AttentionSample>> attention,
                       bool known_gpu) {
  // hetplan's own kernels, alone and inside its whole-layer timings, for the in-layer factor.
  if (known_gpu) {
    for (const auto& [name, pts] : attention)
      if (name.rfind("sdpa_", 0) != 0) {
        auto& out = fit.attention_context_samples[name.find("bwd") != std::string::npos];
        out.insert(out.end(), pts.begin(), pts.end());
      }
    for (const auto& m : f.layers)
      add_layer_attention(m, fit.attention_context_samples[0], fit.attention_context_samples[1]);
  }
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
  // hetplan's kernels are also timed inside its whole-layer timings (their CUPTI traces).
  std::vector<AttentionSample> fwd, bwd;
  if (!have_sdpa)
    for (const auto& m : f.layers) add_layer_attention(m, fwd, bwd);
  for (auto& [name, pts] : attention) {
    auto& out = name.find("bwd") != std::string::npos ? bwd : fwd;
    out.insert(out.end(), pts.begin(), pts.end());
  }
  // SDPA's timings replace hetplan's (and a file's with another backend), hetplan's add to
  // hetplan's; the fit comes once every file is in (fit_attention_samples).
  if ((fwd.empty() && bwd.empty()) || !known_gpu) return;
  std::string source = "hetplan kernels";
  if (have_sdpa && std::string(backend) == "flash_attention") {
    source = kAttentionSdpaFlash;
  } else if (have_sdpa) {
    source = "torch sdpa, default backend";
    for (const auto& k : f.kernels)
      if (k.kernel == "sdpa_fwd_default" && k.params.is_object() && k.params.contains("picked")) {
        source += " (" + k.params["picked"].get<std::string>() + ")";
        break;
      }
  }
  const bool sdpa_known = fit.attention_source.rfind("torch sdpa", 0) == 0;
  if (!have_sdpa && sdpa_known) return;
  if (source != fit.attention_source) {
    fit.attention_samples[0].clear();
    fit.attention_samples[1].clear();
  }
  fit.attention_source = source;
  fit.attention_samples[0].insert(fit.attention_samples[0].end(), fwd.begin(), fwd.end());
  fit.attention_samples[1].insert(fit.attention_samples[1].end(), bwd.begin(), bwd.end());
}

}  // namespace

AttentionCoefficients GpuFit::attention(bool forward) const {
  return forward
             ? AttentionCoefficients{attention_efficiency, attention_seq_half,
                                     attention_head_dim_half, attention_in_layer_factor}
             : AttentionCoefficients{attention_bwd_efficiency, attention_bwd_seq_half,
                                     attention_bwd_head_dim_half, attention_bwd_in_layer_factor};
}

void GpuFit::set_attention(bool forward, const AttentionCoefficients& c) {
  (forward ? attention_efficiency : attention_bwd_efficiency) = c.efficiency;
  (forward ? attention_seq_half : attention_bwd_seq_half) = c.seq_half;
  (forward ? attention_head_dim_half : attention_bwd_head_dim_half) = c.head_dim_half;
  (forward ? attention_in_layer_factor : attention_bwd_in_layer_factor) = c.in_layer_factor;
}

namespace {

// Fits the attention coefficients to the timings collect_attention kept, with the launch the
// files settled on (none kept: the priors stay). Without backward timings the backward takes the
// forward's coefficients.
void fit_attention_samples(GpuFit& fit, const std::optional<GpuSpec>& gpu) {
  if (!gpu || (fit.attention_samples[0].empty() && fit.attention_samples[1].empty())) return;
  const double peak = std::max(gpu->peak_flops(Dtype::kBf16), gpu->peak_flops(Dtype::kFp16));
  const AttentionCoefficients prior = fit.attention(true);
  const bool own = fit.attention_source == "hetplan kernels";
  // One pass: its coefficients from the source's timings; its in-layer factor from the same
  // timings where they hold both contexts (hetplan's kernels alone and inside its layers; SDPA
  // alone and right after GEMMs), else from hetplan's kernels timed both ways: what slows
  // attention inside a layer is its context (the GEMMs around it), and no layer runs SDPA.
  auto fit_pass = [&](int pass) {
    // Without backward timings the backward takes the forward's coefficients (not its factor).
    const bool timed = !fit.attention_samples[pass].empty();
    AttentionFitResult r = fit_attention(fit.attention_samples[timed ? pass : 0], peak,
                                         gpu->sm_count, fit.launch_s, prior);
    if (!timed) r.quality = {}, r.in_layer_points = 0;
    if (r.in_layer_points > 0) return r;
    // hetplan's kernels as the source are these timings already: nothing more to fit from them.
    const AttentionFitResult context =
        own ? AttentionFitResult{}
            : fit_attention(fit.attention_context_samples[pass], peak, gpu->sm_count, fit.launch_s,
                            prior);
    r.coefficients.in_layer_factor = context.in_layer_points > 0
                                         ? context.coefficients.in_layer_factor
                                         : fit.attention(pass == 0).in_layer_factor;
    r.in_layer_points = context.in_layer_points;
    return r;
  };
  const AttentionFitResult f = fit_pass(0);
  const AttentionFitResult b = fit_pass(1);
  fit.set_attention(true, f.coefficients);
  fit.set_attention(false, b.coefficients);
  fit.attention_quality[0] = f.quality;
  fit.attention_quality[1] = b.quality;
  fit.attention_in_layer_points[0] = f.in_layer_points;
  fit.attention_in_layer_points[1] = b.in_layer_points;
}

void apply_priors(GpuFit& fit, const DatasheetPriors& p) {
  for (const auto& [dtype_name, eff] : p.gemm_efficiency) {
    Dtype d;
    parse_dtype(dtype_name, d);
    fit.gemm[d].peak_fraction = eff;
  }
  fit.memory_efficiency = p.memory_efficiency;
  fit.launch_s = p.kernel_launch_s;
  for (bool forward : {true, false}) fit.set_attention(forward, {p.attention_efficiency, 0, 0});
  for (auto& [d, e] : fit.gemm) e.overhead_s = p.kernel_launch_s;
  fit.gemm_curve_from = p.gemm_curve_from;
}

// A prior-only GPU type takes the fitted GEMM coefficients of the calibrated type its priors name
// (gemm_curve_from) for each dtype it measured none of and that type measured: the whole curve of
// the kernels it is assumed to behave like, at its own peaks, bandwidth and SMs, in place of one
// fraction of peak. A named type the profile does not hold, or did not measure, leaves the priors.
void inherit_gemm_curves(Profile& profile) {
  for (auto& [type, fit] : profile.gpus) {
    fit.gemm_curve_dtypes.clear();
    if (fit.gemm_curve_from.empty() || fit.gemm_curve_from == type) continue;
    auto from = profile.gpus.find(fit.gemm_curve_from);
    if (from == profile.gpus.end()) continue;
    for (const auto& [dtype, points] : from->second.gemm_points) {
      if (points.empty() || !from->second.gemm.count(dtype)) continue;
      if (auto own = fit.gemm_points.find(dtype);
          own != fit.gemm_points.end() && !own->second.empty())
        continue;
      fit.gemm[dtype] = from->second.gemm.at(dtype);
      fit.gemm_curve_dtypes.push_back(dtype);
    }
  }
}

// The SM clock `f.gemm[i]` ran at (`method.clocks.sm_mhz_median`), 0 where not recorded.
// Throws InputError naming the file and key for a malformed clock record.
double gemm_sm_mhz(const CalibrationFile& f, size_t i) {
  const Json& method = f.gemm[i].method;
  if (!method.is_object() || !method.contains("clocks")) return 0;
  return clock_summary_from_json(
             ObjectReader(method["clocks"], f.origin, fmt::format("gemm[{}].method.clocks", i)))
      .sm_mhz_median;
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
    fit.gemm_points[g.dtype].push_back({g.shape, g.time_s.median, gemm_sm_mhz(f, i)});
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
  std::map<std::string, std::vector<AttentionSample>> attention;
  for (const auto& k : f.kernels) {
    const std::string name = cost_op_name(k.kernel);
    if (!half(k) && has_half.count(name)) continue;
    if (is_attention_measurement(k)) {
      attention[name].push_back(attention_sample(k));
      // SDPA timed again right after GEMMs (scripts/bench_attention_torch.py
      // --between-gemm-ms): the in-layer context, as hetplan's kernels inside its layers.
      if (k.params.is_object() && k.params.contains("after_gemm_s") &&
          k.params["after_gemm_s"].is_number()) {
        AttentionSample after = attention[name].back();
        after.time_s = k.params["after_gemm_s"].get<double>();
        after.in_layer = true;
        if (after.time_s > 0) attention[name].push_back(after);
      }
    } else if (k.bytes > 0)
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
  collect_attention(fit, f, std::move(attention), known_gpu);
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

}  // namespace

std::map<Dtype, GemmTable> gemm_tables(const GpuFit& fit, const GpuSpec& gpu) {
  std::map<Dtype, GemmTable> tables;
  for (const auto& [dtype, pts] : fit.gemm_points)
    if (auto e = fit.gemm.find(dtype); e != fit.gemm.end() && gpu.supports(dtype) && !pts.empty())
      tables[dtype] = {pts, e->second};
  return tables;
}

namespace {

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
  // Companions, once every dtype has its coefficients.
  const std::map<Dtype, GemmTable> tables = gemm_tables(fit, spec);
  fit.gemm_companion.clear();
  for (const auto& [dtype, table] : tables)
    if (auto c = choose_gemm_companion(dtype, tables, spec, gemm_bandwidth_GBps(spec, fit));
        c.companion)
      fit.gemm_companion[dtype] = *c.companion;
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
  for (auto& [type, fit] : profile.gpus) {
    const std::optional<GpuSpec> gpu = find_gpu_spec(type, gpu_types);
    fit_gemms(fit, gpu);
    fit_attention_samples(fit, gpu);
  }
  inherit_gemm_curves(profile);
  return profile;
}

std::filesystem::path default_calibration_dir() {
  if (const char* env = std::getenv("HETPLAN_CALIBRATION_DIR")) return env;
  return data_dir() / "calibration_data";
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
  for (const auto& [type, fit] : other.gpus) {
    // A type `into` lacks counts as "default" (Profile::gpu), without copying a fit to say so.
    const auto have = into.gpus.find(type);
    if (source_rank(fit.source) >=
        source_rank(have == into.gpus.end() ? "default" : have->second.source))
      into.gpus[type] = fit;
  }
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
    const std::string format = document_format(doc);
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
    if (document_format(doc) == kProfileFormat)
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
  if (!profiles.empty()) inherit_gemm_curves(profile);  // from the merged profiles' GPUs too
  return profile;
}

Profile load_profile_inputs(const std::vector<std::string>& paths) {
  const ProfileInputs in = read_profile_inputs(paths);
  return merge_fitted(in.calibrations, in.profiles);
}

}  // namespace hetplan
