#include "costmodel/profile_quality.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/clocks.h"
#include "costmodel/hardware.h"
#include "costmodel/layer_ops.h"
#include "costmodel/stats.h"

namespace hetplan {
namespace {

// A score of no points has no errors: null, not zeros.
Json scored_json(const FitQuality& q) { return q.points > 0 ? to_json(q) : Json(nullptr); }

Json glitches_json(const std::vector<GemmPoint>& glitches) {
  Json out = Json::array();
  for (const auto& g : glitches) out.push_back(to_json(g));
  return out;
}

// The companion choice of the fit set: null where there was no candidate.
Json companion_json(const GemmCompanionChoice& c) {
  if (!c.candidate) return nullptr;
  return {{"candidate", to_string(*c.candidate)},
          {"chosen", c.companion.has_value()},
          {"cross_validated_own", to_json(c.own)},
          {"cross_validated_with", to_json(c.with)}};
}

std::vector<std::string> gemm_warnings(const GemmHoldout& h, int every, const GpuFit& fit) {
  std::vector<std::string> out;
  const auto n = static_cast<size_t>(h.points);
  if (n < kMinFitShapes)
    out.push_back(fmt::format(
        "only {} shapes for the GEMM model's 7 coefficients (want at least {}): the coefficients "
        "are not determined by them and unreliable for shapes not measured; the measured shapes "
        "are used as measured (`hetplan calibrate --gemm` measures a grid)",
        n, kMinFitShapes));
  if (every >= 2 && n < kMinHoldoutShapes)
    out.push_back(
        fmt::format("fewer than {} shapes: none held out, no held-out score", kMinHoldoutShapes));
  else if (every >= 2 && !h.scored())
    out.push_back(fmt::format("no shape fell in the held-out 1 in {}: no held-out score", every));
  if (auto it = fit.gemm.find(h.dtype);
      it != fit.gemm.end() && it->second.peak_fraction < kImplausiblePeakFraction)
    out.push_back(fmt::format(
        "fitted peak fraction {:.3f}: the large GEMMs reach {:.1f}% of the datasheet peak, "
        "implausibly slow for measured GEMMs (times in another unit, microseconds written as "
        "seconds?)",
        it->second.peak_fraction, 100 * it->second.peak_fraction));
  return out;
}

}  // namespace

bool meets_gemm_targets(const GemmHoldout& h) {
  return h.scored() && h.corrected.median_rel_error <= kGemmTargetMedian &&
         h.corrected.p95_rel_error <= kGemmTargetP95;
}

bool is_held_out(const GemmShape& shape, int every) {
  return every > 1 && gemm_shape_bucket(shape, every) == 0;
}

int gemm_layout_index(const GemmShape& s) { return (s.trans_a ? 2 : 0) + (s.trans_b ? 1 : 0); }

int gemm_time_class(double measured_s) {
  return measured_s < kGemmTimeClassBounds[0] ? 0 : measured_s < kGemmTimeClassBounds[1] ? 1 : 2;
}

namespace {

// The held-out 1 in `every` (none for `every` < 2) and the rest.
void split_held_out(const std::vector<GemmPoint>& points, int every,
                    std::vector<GemmPoint>& fit_set, std::vector<GemmPoint>& held) {
  for (const auto& p : points) (is_held_out(p.shape, every) ? held : fit_set).push_back(p);
}

// The held-out scores of `model` (fitted without `held`) into `out`.
void score_held_out(GemmHoldout& out, const GemmModel& model, const std::vector<GemmPoint>& held) {
  std::vector<double> analytical, corrected, by_time[3], by_layout[4];
  for (const auto& p : held) {
    analytical.push_back(std::abs(model.analytical_s(p.shape) / p.time_s - 1));
    corrected.push_back(std::abs(model.time_s(p.shape) / p.time_s - 1));
    by_time[gemm_time_class(p.time_s)].push_back(corrected.back());
    by_layout[gemm_layout_index(p.shape)].push_back(corrected.back());
  }
  out.analytical = summarize_errors(analytical);
  out.corrected = summarize_errors(corrected);
  for (int c = 0; c < 3; ++c) out.corrected_by_time[c] = summarize_errors(by_time[c]);
  for (int l = 0; l < 4; ++l) out.corrected_by_layout[l] = summarize_errors(by_layout[l]);
}

// The whole table's in-sample score and glitches into `out`, under the coefficients fitted on
// every shape: `fitted_on_all` where given (the profile's), else the fit set's where nothing was
// held out, else a fit from `prior`.
void score_whole_table(GemmHoldout& out, const std::vector<GemmPoint>& points, bool any_held,
                       const GemmEfficiency* fitted_on_all, const GemmEfficiency& prior,
                       double peak_flops, double memory_GBps, int64_t sm_count,
                       double bytes_per_element) {
  GemmEfficiency all = out.fitted;
  if (fitted_on_all)
    all = *fitted_on_all;
  else if (any_held)
    all = fit_gemm_efficiency(points, prior, peak_flops, memory_GBps, sm_count, bytes_per_element);
  GemmModel whole(all, peak_flops, memory_GBps, sm_count, bytes_per_element);
  std::vector<double> in_sample;
  for (const auto& p : points)
    in_sample.push_back(std::abs(whole.analytical_s(p.shape) / p.time_s - 1));
  out.in_sample = summarize_errors(in_sample);
  whole.set_measurements(points);
  for (const GemmShape& s : whole.glitch_shapes()) out.glitches.push_back({s, whole.time_s(s)});
}

}  // namespace

GemmHoldout gemm_holdout(const std::vector<GemmPoint>& points, const GemmEfficiency& prior,
                         double peak_flops, double memory_GBps, int64_t sm_count,
                         double bytes_per_element, int every) {
  GemmHoldout out;
  std::vector<GemmPoint> fit_set, held;
  split_held_out(points, every, fit_set, held);
  out.points = static_cast<int64_t>(points.size());
  out.fit_points = static_cast<int64_t>(fit_set.size());
  out.fitted =
      fit_gemm_efficiency(fit_set, prior, peak_flops, memory_GBps, sm_count, bytes_per_element);
  GemmModel model(out.fitted, peak_flops, memory_GBps, sm_count, bytes_per_element);
  model.set_measurements(fit_set);
  score_held_out(out, model, held);
  score_whole_table(out, points, !held.empty(), nullptr, prior, peak_flops, memory_GBps, sm_count,
                    bytes_per_element);
  return out;
}

std::vector<GemmHoldout> gemm_holdouts(const std::map<Dtype, std::vector<GemmPoint>>& points,
                                       const std::map<Dtype, GemmEfficiency>& fitted_on_all,
                                       const GpuSpec& gpu, double memory_GBps, int every) {
  // Every dtype's fit set and coefficients first: a companion is chosen, and joins, from its
  // table less every held-out shape (those of a dtype too small to hold any out too), so a shape
  // held out of one dtype is held out of every table that predicts it.
  std::map<Dtype, GemmTable> fit_tables, companion_tables;
  std::map<Dtype, std::vector<GemmPoint>> held;
  std::map<Dtype, GemmHoldout> out;
  for (const auto& [dtype, pts] : points) {
    const int split = pts.size() >= kMinHoldoutShapes ? every : 0;
    GemmTable& table = fit_tables[dtype];
    split_held_out(pts, split, table.points, held[dtype]);
    GemmHoldout& h = out[dtype];
    h.dtype = dtype;
    h.points = static_cast<int64_t>(pts.size());
    h.fit_points = static_cast<int64_t>(table.points.size());
    h.fitted = fit_gemm_efficiency(table.points, GemmEfficiency{}, gpu.peak_flops(dtype),
                                   memory_GBps, gpu.sm_count, dtype_bytes(dtype));
    table.efficiency = h.fitted;
    GemmTable& lent = companion_tables[dtype];
    std::vector<GemmPoint> unused;
    split_held_out(pts, every, lent.points, unused);
    lent.efficiency = h.fitted;
  }
  std::vector<GemmHoldout> scored;
  for (auto& [dtype, h] : out) {
    GemmModel model = gemm_model_for(dtype, fit_tables[dtype], gpu, memory_GBps);
    // The dtype's own fit set, the others' tables less every held-out shape.
    std::map<Dtype, GemmTable> tables = companion_tables;
    tables[dtype] = fit_tables[dtype];
    h.companion = choose_gemm_companion(dtype, tables, gpu, memory_GBps);
    if (h.companion.companion) {
      const Dtype c = *h.companion.companion;
      model.set_companion(gemm_model_for(c, tables[c], gpu, memory_GBps));
    }
    score_held_out(h, model, held[dtype]);
    const auto given = fitted_on_all.find(dtype);
    score_whole_table(h, points.at(dtype), !held[dtype].empty(),
                      given != fitted_on_all.end() ? &given->second : nullptr, GemmEfficiency{},
                      gpu.peak_flops(dtype), memory_GBps, gpu.sm_count, dtype_bytes(dtype));
    scored.push_back(std::move(h));
  }
  return scored;
}

FitReport assess_profile(Profile& profile, const std::vector<CalibrationFile>& files, int every,
                         const std::map<std::string, GpuSpec>& gpu_types) {
  FitReport report;
  report.holdout_every = every;
  for (auto& [type, fit] : profile.gpus) {
    GpuQuality q;
    q.gpu_type = type;
    q.kernels = fit.kernels;
    for (int pass = 0; pass < 2; ++pass) {
      q.attention[pass] = fit.attention(pass == 0);
      q.attention_in_layer_points[pass] = fit.attention_in_layer_points[pass];
    }
    q.attention_quality[0] = fit.attention_quality[0];
    q.attention_quality[1] = fit.attention_quality[1];
    q.attention_source = fit.attention_source;
    std::vector<const CalibrationFile*> own;
    for (const auto& f : files)
      if (f.context.gpu_type == type) {
        own.push_back(&f);
        for (const auto& k : f.kernels) q.attention_points += is_attention_measurement(k);
      }
    q.clocks = clock_classes(own);
    // Heat or a power brake slows timings below what the same GPU does when cooled as it should
    // be: the fit would learn a slower GPU.
    for (const ClockClass& c : q.clocks)
      if (const uint64_t bad = c.reasons & kClockReasonsAbnormal)
        q.warnings.push_back(fmt::format(
            "{} measurement(s) of class \"{}\" ran while NVML reported {}: the GPU was held "
            "below its clock by more than its power cap (lowest reading {:.0f} MHz); check its "
            "cooling and power, and calibrate again",
            c.abnormal, c.what, fmt::join(clock_reason_names(bad), ", "), c.sm_mhz_min));
    const std::optional<GpuSpec> gpu = find_gpu_spec(type, gpu_types);
    if (!gpu) {
      report.gpus.push_back(std::move(q));
      continue;
    }
    const GpuSpec& spec = *gpu;
    const double bandwidth = spec.memory_GBps * fit.memory_efficiency;
    std::map<Dtype, std::vector<GemmPoint>> usable;
    for (const auto& [dtype, pts] : fit.gemm_points) {
      if (pts.empty()) continue;
      if (!spec.supports(dtype)) {
        q.warnings.push_back(fmt::format("{} {} GEMMs not used: the {} has no {} unit", pts.size(),
                                         to_string(dtype), type, to_string(dtype)));
        continue;
      }
      usable[dtype] = pts;
    }
    const std::map<Dtype, GemmTable> tables = gemm_tables(fit, spec);
    for (const auto& [dtype, table] : tables) {
      std::optional<Dtype> companion;
      if (auto c = fit.gemm_companion.find(dtype); c != fit.gemm_companion.end())
        companion = c->second;
      GemmClockCheck check = check_gemm_clocks(dtype, tables, companion, spec, bandwidth);
      if (check.points > 0) q.gemm_clocks[dtype] = std::move(check);
    }
    for (GemmHoldout& h : gemm_holdouts(usable, fit.gemm, spec, bandwidth, every)) {
      const Dtype dtype = h.dtype;
      h.warnings = gemm_warnings(h, every, fit);
      if (!h.scored()) {
        q.gemm.push_back(h);
        continue;  // the profile keeps its in-sample score
      }
      FitQuality stored = h.corrected;
      stored.method = fmt::format("held-out 1 in {}, with measured-table correction", every);
      fit.gemm_quality[dtype] = stored;
      FitQuality analytical = h.analytical;
      analytical.method = fmt::format("held-out 1 in {}, analytical", every);
      fit.gemm_analytical_quality[dtype] = analytical;
      q.gemm.push_back(h);
    }
    if (!fit.layers.empty() || !fit.layer_forward.empty()) {
      q.layers = compare_layer_timings(profile, spec);
      std::vector<double> errs[3];
      for (const auto& t : q.layers)
        for (int p = 0; p < 3; ++p)
          if (t.unused.empty() && t.measured_s[p] > 0) errs[p].push_back(std::abs(t.rel_error(p)));
      for (int p = 0; p < 3; ++p) q.layer_quality[p] = summarize_errors(errs[p]);
      q.corrections = layer_corrections(q.layers);
      auto score_held_out = [&](bool fixed_rate, FitQuality(&into)[3], const char* method) {
        const auto held_out = held_out_micro_batch_errors(q.layers, fixed_rate);
        for (int p = 0; p < 3; ++p) {
          std::vector<double> abs_errors;
          for (double e : held_out[p]) abs_errors.push_back(std::abs(e));
          into[p] = summarize_errors(abs_errors);
          into[p].method = method;
        }
      };
      score_held_out(true, q.corrected_layer_quality,
                     "with corrections, the timing's micro-batch held out");
      score_held_out(false, q.ratio_layer_quality,
                     "with ratio corrections only, the timing's micro-batch held out");
    }
    report.gpus.push_back(std::move(q));
  }
  return report;
}

Json to_json(const FitReport& report) {
  Json gpus = Json::object();
  for (const auto& g : report.gpus) {
    Json gemm = Json::object();
    for (const auto& h : g.gemm) {
      const GemmEfficiency& e = h.fitted;
      Json by_time = Json::object();
      for (int c = 0; c < 3; ++c)
        by_time[kGemmTimeClasses[c]] = scored_json(h.corrected_by_time[c]);
      Json by_layout = Json::object();
      for (int l = 0; l < 4; ++l)
        by_layout[kGemmLayouts[l]] = scored_json(h.corrected_by_layout[l]);
      gemm[std::string(to_string(h.dtype))] = {{"points", h.points},
                                               {"fit_points", h.fit_points},
                                               {"held_out_corrected", scored_json(h.corrected)},
                                               {"held_out_corrected_by_time", by_time},
                                               {"held_out_corrected_by_layout", by_layout},
                                               {"held_out_analytical", scored_json(h.analytical)},
                                               {"in_sample_analytical", to_json(h.in_sample)},
                                               {"glitches", glitches_json(h.glitches)},
                                               {"target", !h.scored()             ? "not scored"
                                                          : meets_gemm_targets(h) ? "met"
                                                                                  : "missed"},
                                               {"warnings", h.warnings},
                                               {"fitted_without_held_out", to_json(e)}};
      gemm[std::string(to_string(h.dtype))]["companion"] = companion_json(h.companion);
      if (auto c = g.gemm_clocks.find(h.dtype); c != g.gemm_clocks.end())
        gemm[std::string(to_string(h.dtype))]["clock"] = to_json(c->second);
    }
    Json kernels = Json::object();
    for (const auto& [name, k] : g.kernels)
      kernels[name] = {{"GBps", k.GBps},
                       {"overhead_s", k.overhead_s},
                       {"points", k.points},
                       {"median_rel_error", k.median_rel_error}};
    Json layers = Json::array();
    for (const auto& t : g.layers) {
      Json l = {{"source", t.source},
                {"what", t.what},
                {"layer", describe(t.key)},
                {"dtype", to_string(t.dtype)},
                {"micro_batch", t.micro_batch},
                {"forward_only", t.forward_only},
                {"measured_s", {t.measured_s[0], t.measured_s[1], t.measured_s[2]}},
                {"predicted_s", {t.predicted_s[0], t.predicted_s[1], t.predicted_s[2]}},
                {"tp_comm_s", {t.comm_s[0], t.comm_s[1], t.comm_s[2]}},
                {"rel_error", {t.rel_error(0), t.rel_error(1), t.rel_error(2)}}};
      if (!t.unused.empty()) l["unused"] = t.unused;
      layers.push_back(l);
    }
    Json corrections = Json::array();
    for (const auto& c : g.corrections) {
      Json points = Json::array();
      for (const auto& p : c.points)
        points.push_back(
            {{"micro_batch", p.micro_batch}, {"ratio", p.ratio}, {"timings", p.timings}});
      Json corr = {{"layer", describe(c.key)},
                   {"dtype", to_string(c.dtype)},
                   {"source", c.source},
                   {"points", points}};
      corr["model"] = c.model == LayerCorrection::Model::kFixedRate ? "fixed_rate"
                      : c.model == LayerCorrection::Model::kMixed   ? "mixed"
                                                                    : "ratio";
      if (c.model != LayerCorrection::Model::kRatio) {
        Json pass_models = Json::array();
        for (int p = 0; p < kNumPasses; ++p)
          pass_models.push_back(c.fixed_rate_pass[p] ? "fixed_rate" : "ratio");
        corr["pass_models"] = pass_models;
        corr["fixed_s"] = c.fixed_s;
        corr["rate"] = c.rate;
        corr["fit_tp"] = c.fit_tp;
        corr["fit_points"] = c.fit_points;
        // The widths its fixed + rate passes apply at: untimed ones between take them too.
        const auto [lo, hi] = c.covered_tp();
        corr["covers_tp_min"] = lo;
        corr["covers_tp_max"] = hi;
      }
      if (c.model != LayerCorrection::Model::kFixedRate) corr["why_ratio"] = c.why_ratio;
      corrections.push_back(corr);
    }
    gpus[g.gpu_type] = {
        {"warnings", g.warnings},
        {"gemm", gemm},
        {"kernels", kernels},
        {"attention",
         {{"efficiency", g.attention[0].efficiency},
          {"bwd_efficiency", g.attention[1].efficiency},
          {"seq_half", g.attention[0].seq_half},
          {"bwd_seq_half", g.attention[1].seq_half},
          {"head_dim_half", g.attention[0].head_dim_half},
          {"bwd_head_dim_half", g.attention[1].head_dim_half},
          {"in_layer_factor", g.attention[0].in_layer_factor},
          {"bwd_in_layer_factor", g.attention[1].in_layer_factor},
          {"in_layer_points", {g.attention_in_layer_points[0], g.attention_in_layer_points[1]}},
          {"forward_quality", to_json(g.attention_quality[0])},
          {"backward_quality", to_json(g.attention_quality[1])},
          {"points", g.attention_points},
          {"source", g.attention_source}}},
        {"layers", layers},
        {"layer_corrections", corrections},
        {"layer_quality",
         {{"forward", to_json(g.layer_quality[0])},
          {"backward_input", to_json(g.layer_quality[1])},
          {"backward_weight", to_json(g.layer_quality[2])}}},
        {"layer_quality_corrected_held_out",
         {{"forward", to_json(g.corrected_layer_quality[0])},
          {"backward_input", to_json(g.corrected_layer_quality[1])},
          {"backward_weight", to_json(g.corrected_layer_quality[2])},
          {"method",
           "each timing predicted with the correction of its shape made from its other "
           "micro-batches"}}},
        {"layer_quality_ratio_held_out",
         {{"forward", to_json(g.ratio_layer_quality[0])},
          {"backward_input", to_json(g.ratio_layer_quality[1])},
          {"backward_weight", to_json(g.ratio_layer_quality[2])},
          {"method",
           "the same with ratio corrections only (no fixed + rate model), for comparison"}}}};
    Json clocks = Json::array();
    for (const auto& c : g.clocks) clocks.push_back(to_json(c));
    gpus[g.gpu_type]["clocks"] = clocks;
  }
  return {{"format", "hetplan-fit-quality"},
          {"schema_version", 1},
          {"holdout",
           {{"every", report.holdout_every},
            {"rule",
             "a shape is held out when a stable hash of (m, n, k, batch, "
             "layout) is 0 modulo `every` (0: none), for dtypes with at least "
             "10 shapes"}}},
          {"targets",
           {{"gemm_held_out_median_rel_error", kGemmTargetMedian},
            {"gemm_held_out_p95_rel_error", kGemmTargetP95}}},
          {"gpus", gpus}};
}

}  // namespace hetplan
