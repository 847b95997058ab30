// hetplan fit: calibration files into a profile, with the fit's quality on held-out data.
#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command.h"
#include "cli/common.h"
#include "costmodel/calibration_gpu_type.h"
#include "costmodel/clocks.h"
#include "costmodel/errors.h"
#include "costmodel/hardware.h"
#include "costmodel/profile.h"
#include "costmodel/profile_quality.h"
#include "costmodel/profile_sources.h"
#include "profiler/common/gemm_plan.h"
#include "report/run_documents.h"

namespace hetplan::cli {
namespace {

constexpr double kFarRatio = 2;  // layer corrections worth a remark

struct FitOptions {
  std::vector<std::string> inputs;
  std::string out, json, cluster;
  int holdout_every = kDefaultHoldoutEvery;
  bool no_default_calibration = false;
  bool require_targets = false;
};

std::string pct(double x) { return fmt::format("{:.2f}%", 100 * x); }

// The GPU types --cluster defines (none without it); every calibrated GPU type must be one of them
// or a preset: fit needs the GPU's datasheet (peaks, bandwidth) to fit its measurements.
std::map<std::string, GpuSpec> checked_gpu_types(const std::vector<CalibrationFile>& files,
                                                 const std::string& cluster_spec) {
  const ClusterSpec cluster = cluster_spec.empty() ? ClusterSpec{} : load_cluster(cluster_spec);
  require_known_gpu_types(files, cluster);
  return cluster.gpu_types;
}

// Every dtype with measured GEMMs has a held-out score that meets the targets; none scored (no
// GEMMs, or too few to hold any out) is not "met".
bool all_met(const FitReport& report) {
  bool any = false;
  for (const auto& g : report.gpus)
    for (const auto& h : g.gemm) {
      if (!meets_gemm_targets(h)) return false;
      any = true;
    }
  return any;
}

// The held-out corrected score of each dtype by the measured time of the held-out shapes (the
// table's headline is over all of them): launch-bound shapes are as noisy as the launch.
void print_time_classes(const std::vector<GemmHoldout>& gemm) {
  const char* labels[3] = {"under 10 us", "10-30 us", "30 us and over"};
  for (const auto& h : gemm) {
    if (!h.scored()) continue;
    std::string line;
    for (int c = 0; c < 3; ++c) {
      const FitQuality& q = h.corrected_by_time[c];
      line += fmt::format("{}{} {}", c ? "; " : "", labels[c],
                          q.points > 0 ? fmt::format("{} shapes, median {}, p95 {}", q.points,
                                                     pct(q.median_rel_error), pct(q.p95_rel_error))
                                       : std::string("none"));
    }
    fmt::print("  {:<6} held out by measured time: {}\n", to_string(h.dtype), line);
    // By layout only where held-out shapes of more than one layout make the split say something.
    std::string layouts;
    int with_shapes = 0;
    for (int l = 0; l < 4; ++l) {
      const FitQuality& q = h.corrected_by_layout[l];
      if (q.points == 0) continue;
      ++with_shapes;
      layouts +=
          fmt::format("{}{} {} shapes, median {}, p95 {}", layouts.empty() ? "" : "; ",
                      kGemmLayouts[l], q.points, pct(q.median_rel_error), pct(q.p95_rel_error));
    }
    if (with_shapes > 1)
      fmt::print("  {:<6} held out by layout: {}\n", to_string(h.dtype), layouts);
  }
}

// Whether another dtype's measurements join each dtype's correction (costmodel/gemm_companion.h):
// the held-out score's choice, made on the fit set, and the profile's, made on every shape.
void print_companions(const std::vector<GemmHoldout>& gemm, const GpuFit& fit) {
  for (const auto& h : gemm) {
    const GemmCompanionChoice& c = h.companion;
    if (!c.candidate) continue;
    const auto profile = fit.gemm_companion.find(h.dtype);
    const bool in_profile = profile != fit.gemm_companion.end();
    fmt::print(
        "  {:<6} {} {}'s measurements (same kernels; {}-fold cross-validation of the fit set: "
        "median {} -> {}, p95 {} -> {}){}\n",
        to_string(h.dtype), c.companion ? "corrected with" : "not corrected with",
        to_string(*c.candidate), kGemmFolds, pct(c.own.median_rel_error),
        pct(c.with.median_rel_error), pct(c.own.p95_rel_error), pct(c.with.p95_rel_error),
        in_profile == c.companion.has_value()
            ? ""
            : fmt::format("; the profile, fitted on every shape, {}",
                          in_profile ? "uses them" : "does not"));
  }
}

// Whether each dtype's GEMM times follow the SM clock they ran at (costmodel/gemm_clock.h).
void print_gemm_clocks(const std::map<Dtype, GemmClockCheck>& checks) {
  for (const auto& [dtype, c] : checks) {
    if (!c.checked()) {
      fmt::print("  {:<6} SM clock recorded for {} GEMM(s): too few to check (at least {})\n",
                 to_string(dtype), c.points, kMinClockShapes);
      continue;
    }
    const std::string slope =
        c.slope ? fmt::format("slope {:+.2f}, R^2 {:.2f} over {} compute-bound GEMMs", *c.slope,
                              c.r2, c.compute_bound)
                : fmt::format("no slope ({} compute-bound GEMMs{})", c.compute_bound,
                              c.compute_bound >= int64_t(kMinClockShapes) ? ", one clock" : "");
    fmt::print(
        "  {:<6} SM clock of {} GEMMs: {:.0f} MHz median [p10 {:.0f}, p90 {:.0f}; {:.0f}-{:.0f}]; "
        "time against clock: {} (-1: time follows 1/clock, 0: the clock does not matter); "
        "{}-fold cross-validated median {} / p95 {} as measured, {} / {} with each GEMM's clock "
        "known\n",
        to_string(dtype), c.points, c.reference_mhz, c.mhz_p10, c.mhz_p90, c.mhz_min, c.mhz_max,
        slope, kGemmFolds, pct(c.as_measured.median_rel_error), pct(c.as_measured.p95_rel_error),
        pct(c.clock_known.median_rel_error), pct(c.clock_known.p95_rel_error));
  }
}

// The measured shapes the profile's correction leaves out as glitches (GemmModel::glitch_shapes):
// worth a look, as a re-measurement of them may be all that is wrong.
void print_glitches(const std::vector<GemmHoldout>& gemm) {
  constexpr size_t kShown = 3;
  for (const auto& h : gemm) {
    if (h.glitches.empty()) continue;
    std::string shown;
    for (size_t i = 0; i < std::min(kShown, h.glitches.size()); ++i)
      shown +=
          fmt::format("{}{} {:.1f} us", i ? ", " : "",
                      profiler::gemm_shape_label(h.glitches[i].shape), h.glitches[i].time_s * 1e6);
    if (h.glitches.size() > kShown)
      shown += fmt::format(" and {} more (--json)", h.glitches.size() - kShown);
    fmt::print(
        "  {:<6} {} measured shape{} left out of other shapes' corrections as glitches (each "
        "over 1.8x its 8 nearest neighbours' median in measured / analytical): {}\n",
        to_string(h.dtype), h.glitches.size(), h.glitches.size() == 1 ? "" : "s", shown);
  }
}

// The SM clocks each class of measurement saw (NVML, read during the timed work).
void print_clocks(const std::vector<ClockClass>& clocks) {
  if (clocks.empty()) return;
  fmt::print(
      "  SM clock while timed (median over measurements [p10, p90], lowest reading; how many "
      "ran under a power or thermal limit):\n");
  size_t width = 34;  // the class names in one column
  for (const auto& c : clocks) width = std::max(width, c.what.size());
  for (const auto& c : clocks) {
    const std::vector<std::string> reasons = clock_reason_names(c.reasons);
    fmt::print(
        "    {:<{}} {:>5} timed  {:>5.0f} MHz [{:.0f}, {:.0f}], lowest {:.0f}{}; {} limited{}\n",
        c.what, width, c.measurements, c.sm_mhz_median, c.sm_mhz_p10, c.sm_mhz_p90, c.sm_mhz_min,
        c.power_w_median ? fmt::format(", {:.0f} W", *c.power_w_median) : "", c.power_thermal,
        reasons.empty() ? "" : fmt::format(" ({})", fmt::join(reasons, ", ")));
  }
}

void print_report(const FitReport& report, const Profile& profile) {
  for (const auto& g : report.gpus) {
    const GpuFit fit = profile.gpu(g.gpu_type);
    fmt::print("\n{} ({})\n", g.gpu_type, fit.source);
    for (const auto& w : g.warnings) fmt::print("  warning: {}\n", w);
    if (!g.gemm.empty()) {
      if (report.holdout_every >= 2)
        fmt::print(
            "  GEMM held out 1 in {} (targets: median <= {}, p95 <= {} with the correction)\n",
            report.holdout_every, pct(kGemmTargetMedian), pct(kGemmTargetP95));
      else
        fmt::print("  GEMM: no shape held out (--holdout-every 0), in-sample scores only\n");
      fmt::print("  {:<6} {:>6} {:>8} | {:>17} {:>8} | {:>17} {:>8} | {:>9} {:>8}  {}\n", "dtype",
                 "fit", "held out", "corrected median", "p95", "analytical median", "p95",
                 "in-sample", "p95", "target");
      // A score of no points is no score: "-", never 0.00%.
      auto scored = [&](const FitQuality& q, double v) { return q.points > 0 ? pct(v) : "-"; };
      for (const auto& h : g.gemm) {
        fmt::print("  {:<6} {:>6} {:>8} | {:>17} {:>8} | {:>17} {:>8} | {:>9} {:>8}  {}\n",
                   to_string(h.dtype), h.fit_points, h.corrected.points,
                   scored(h.corrected, h.corrected.median_rel_error),
                   scored(h.corrected, h.corrected.p95_rel_error),
                   scored(h.analytical, h.analytical.median_rel_error),
                   scored(h.analytical, h.analytical.p95_rel_error),
                   pct(h.in_sample.median_rel_error), pct(h.in_sample.p95_rel_error),
                   !h.scored()             ? "not scored"
                   : meets_gemm_targets(h) ? "met"
                                           : "MISSED");
        for (const auto& w : h.warnings) fmt::print("    warning: {} {}\n", to_string(h.dtype), w);
      }
      print_time_classes(g.gemm);
      print_companions(g.gemm, fit);
      print_gemm_clocks(g.gemm_clocks);
      print_glitches(g.gemm);
      for (const auto& [dtype, e] : fit.gemm) {
        if (!fit.gemm_points.count(dtype)) continue;
        fmt::print(
            "  {:<6} fitted on all: peak fraction {:.3f}, largest tile {}x{}, k_half {:.0f}, "
            "overhead {:.2f} us, tile exponent {:.2f}, memory fraction {:.2f}, blend {:.1f}, "
            "wave smoothing {:.2f}\n",
            to_string(dtype), e.peak_fraction, e.tile_m, e.tile_n, e.k_half, e.overhead_s * 1e6,
            e.tile_exponent, e.memory_fraction, e.blend, e.wave_smoothing);
      }
    }
    if (!g.kernels.empty()) {
      fmt::print("  {:<28} {:>9} {:>10} {:>7} {:>14}\n", "kernel", "GB/s", "overhead", "points",
                 "median error");
      for (const auto& [name, k] : g.kernels)
        fmt::print("  {:<28} {:>9.0f} {:>7.2f} us {:>7} {:>14}\n", name, k.GBps, k.overhead_s * 1e6,
                   k.points, pct(k.median_rel_error));
    }
    // At sequence s and head size d the efficiency is the one printed x s / (s + half) x d / (d +
    // half), and the grid's critical path bounds the time too (costmodel/attention_model.h).
    auto half = [](const char* x, double h) {
      return h > 0 ? fmt::format(" x {0}/({0}+{1:.0f})", x, h) : std::string();
    };
    auto quality = [&](const FitQuality& q) {
      return q.points > 0 ? fmt::format(" ({} timings: median |error| {}, p95 {})", q.points,
                                        pct(q.median_rel_error), pct(q.p95_rel_error))
                          : std::string();
    };
    // Inside a training step's layers each pass takes in_layer_factor times its time alone.
    auto in_layer = [&](int pass) {
      const double f = g.attention[pass].in_layer_factor;
      return g.attention_in_layer_points[pass] > 0
                 ? fmt::format("; x{:.3f} inside layers ({} timings there)", f,
                               g.attention_in_layer_points[pass])
             : f != 1 ? fmt::format("; x{:.3f} inside layers", f)
                      : std::string();
    };
    fmt::print(
        "  attention ({}): forward {:.3f}{}{}{}{}, backward {:.3f}{}{}{}{} of the dense peak\n",
        g.attention_points > 0 || g.attention_quality[0].points > 0 ||
                g.attention_quality[1].points > 0
            ? fmt::format("{}; {} kernel timings in the files", g.attention_source,
                          g.attention_points)
            : std::string("prior, not measured"),
        g.attention[0].efficiency, half("s", g.attention[0].seq_half),
        half("d", g.attention[0].head_dim_half), quality(g.attention_quality[0]), in_layer(0),
        g.attention[1].efficiency, half("s", g.attention[1].seq_half),
        half("d", g.attention[1].head_dim_half), quality(g.attention_quality[1]), in_layer(1));
    // The host floor's coefficient (search/evaluate.cpp); 0 applies none.
    if (fit.host_points > 0)
      fmt::print("  host per kernel (eager step): {:.2f} us, median of {} host record(s)\n",
                 fit.host_s_per_kernel * 1e6, fit.host_points);
    else
      fmt::print("  host per kernel: not measured (no host floor)\n");
    if (!g.layers.empty()) {
      int64_t usable = 0;
      for (const auto& t : g.layers) usable += t.unused.empty();
      std::string errors;
      for (int p = 0; p < 3; ++p)
        if (g.layer_quality[p].points > 0)
          errors += fmt::format("; {} median |error| {}, p95 {} ({} timings)", "FBW"[p],
                                pct(g.layer_quality[p].median_rel_error),
                                pct(g.layer_quality[p].p95_rel_error), g.layer_quality[p].points);
      fmt::print("  whole layers against their ops: {} timings, {} usable{}\n", g.layers.size(),
                 usable, errors);
      auto per_pass = [&](const FitQuality(&q)[3]) {
        std::string text;
        for (int p = 0; p < 3; ++p)
          if (q[p].points > 0)
            text += fmt::format("{}{} median |error| {}, p95 {} ({} timings)",
                                text.empty() ? "" : "; ", "FBW"[p], pct(q[p].median_rel_error),
                                pct(q[p].p95_rel_error), q[p].points);
        return text;
      };
      if (const std::string held_out = per_pass(g.corrected_layer_quality); !held_out.empty()) {
        fmt::print("  with the corrections, each timing's micro-batch held out: {}\n", held_out);
        fmt::print("  the same with ratio corrections only: {}\n", per_pass(g.ratio_layer_quality));
      }
      std::map<std::string, int64_t> unused;
      for (const auto& t : g.layers)
        if (!t.unused.empty()) ++unused[t.unused];
      for (const auto& [why, n] : unused) fmt::print("    {} not used: {}\n", n, why);
      bool far = false;
      for (const auto& c : g.corrections) {
        std::string points;
        for (const auto& p : c.points)
          points += fmt::format("{}mb {}: F x{:.3f} B x{:.3f} W x{:.3f} ({} timings)",
                                points.empty() ? "" : "; ", p.micro_batch, p.ratio[0], p.ratio[1],
                                p.ratio[2], p.timings);
        fmt::print("    correction {} {} [{}]: {}\n      model: {}\n", describe(c.key),
                   to_string(c.dtype), c.source, points, c.model_summary());
        for (const auto& p : c.points)
          if (std::max({p.ratio[0], p.ratio[1], p.ratio[2]}) > kFarRatio ||
              std::min({p.ratio[0], p.ratio[1], p.ratio[2]}) < 1 / kFarRatio) {
            far = true;
            break;
          }
      }
      if (far)
        fmt::print(
            "    note: ratios beyond {}x either way mean the timings hold work or overheads "
            "the ops do not (or the other way); the cost model applies them as measured\n",
            kFarRatio);
    }
    print_clocks(g.clocks);
  }
}

}  // namespace

CommandRunner declare_fit(CLI::App& app) {
  auto o = std::make_shared<FitOptions>();
  app.add_option("inputs", o->inputs, "Calibration files or directories (profiles are merged)")
      ->required();
  app.add_option("--out", o->out, "The profile to write")->required();
  app.add_option("--json", o->json,
                 "Write the fit-quality report as JSON to FILE ('-' for stdout)");
  app.add_option(
      "--cluster", o->cluster,
      "Cluster whose GPU types (gpu_types of a cluster file) the inputs may calibrate: a "
      "preset, a file or NODE:COUNT,... as predict and search take it");
  app.add_option("--holdout-every", o->holdout_every,
                 "Hold out 1 in N GEMM shapes to score the fit (0: no held-out scoring)")
      ->check(CLI::Range(0, 1000))
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return text == "1" ? "1 would hold out every shape and leave none to fit; give 0 (no "
                                 "held-out scoring) or N >= 2"
                               : "";
          },
          "0 or >= 2"));
  app.add_flag("--no-default-calibration", o->no_default_calibration,
               "Do not start from the shipped datasheet priors of the calibrated GPU types");
  app.add_flag("--require-targets", o->require_targets,
               "Exit 1 when a held-out GEMM score misses the targets (median 3%, p95 8%)");
  return [o]() {
    if (o->require_targets && o->holdout_every == 0)
      throw InputError(
          "--require-targets needs held-out GEMM scores; --holdout-every 0 holds out none");
    std::vector<std::string> read = o->inputs;
    if (!o->cluster.empty()) read.push_back(o->cluster);
    check_outputs(read, {{"--out", o->out}, {"--json", o->json}});
    ProfileInputs in = read_profile_inputs(o->inputs);
    if (!in.repeated.empty())
      throw InputError(
          fmt::format("{}: a file given twice would count its records twice (layer "
                      "timings are summed per layer); give each file once",
                      describe(in.repeated.front())));
    if (in.calibrations.empty() && in.profiles.empty())
      throw InputError("no calibration files found in the inputs");
    const std::map<std::string, GpuSpec> gpu_types = checked_gpu_types(in.calibrations, o->cluster);
    std::vector<CalibrationFile> files = o->no_default_calibration
                                             ? std::vector<CalibrationFile>{}
                                             : shipped_priors(in.calibrations);
    files.insert(files.end(), in.calibrations.begin(), in.calibrations.end());
    Profile profile = fit_profile(files, gpu_types);
    // Kernels, attention and layers are scored whatever --holdout-every says.
    const FitReport report = assess_profile(profile, files, o->holdout_every, gpu_types);
    for (const auto& p : in.profiles) {
      Profile merged = merge_fitted({}, {profile, p});
      profile = std::move(merged);
    }
    save_profile(profile, o->out);
    const bool quiet = o->json == "-";
    if (!quiet) {
      fmt::print("fitted {} calibration file(s) and {} profile(s) into {}\n",
                 in.calibrations.size(), in.profiles.size(), o->out);
    }
    if (!quiet) print_report(report, profile);
    if (!o->json.empty()) {
      Json j = to_json(report);
      j["context"] = run_context("fit", profile);
      j["profile"] = o->out;
      write_json_output(j, o->json);
    }
    if (o->require_targets && !all_met(report)) {
      bool any = false;
      for (const auto& g : report.gpus) any = any || !g.gemm.empty();
      if (!quiet)
        fmt::print("{}\n", any ? "held-out GEMM targets missed (or not scored)"
                               : "no GEMM measurements: the held-out targets are not shown met");
      return 1;
    }
    return 0;
  };
}

}  // namespace hetplan::cli
