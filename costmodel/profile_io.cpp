// JSON form of the fitted profile (docs/formats.md).
#include <fmt/format.h>

#include "costmodel/atomic_file.h"
#include "costmodel/errors.h"
#include "costmodel/profile.h"
#include "costmodel/whole_number.h"

namespace hetplan {
namespace {

Dtype dtype_key(ObjectReader& r, const std::string& key) {
  Dtype d;
  if (!parse_dtype(key, d)) r.fail(key, "expected a dtype key (fp32, tf32, fp16, bf16, fp8, fp4)");
  return d;
}

FitQuality quality_from(ObjectReader& q) {
  FitQuality out{q.integer("points"), q.number("median_rel_error"), q.number("p95_rel_error"),
                 q.string_or("method", "")};
  return out;
}

Json gpu_json(const GpuFit& g) {
  Json j;
  j["source"] = g.source;
  j["origins"] = g.origins;
  Json gemm = Json::object();
  for (const auto& [dtype, e] : g.gemm) {
    Json d = to_json(e);
    if (auto q = g.gemm_quality.find(dtype); q != g.gemm_quality.end()) {
      d["quality"] = to_json(q->second);
      if (auto a = g.gemm_analytical_quality.find(dtype); a != g.gemm_analytical_quality.end())
        d["quality"]["analytical"] = to_json(a->second);
    }
    if (auto c = g.gemm_companion.find(dtype); c != g.gemm_companion.end())
      d["companion"] = std::string(to_string(c->second));
    Json pts = Json::array();
    if (auto it = g.gemm_points.find(dtype); it != g.gemm_points.end())
      for (const auto& p : it->second) pts.push_back(to_json(p));
    d["measured"] = pts;
    gemm[std::string(to_string(dtype))] = d;
  }
  j["gemm"] = gemm;
  j["memory_efficiency"] = g.memory_efficiency;
  j["launch_s"] = g.launch_s;
  Json kernels = Json::object();
  for (const auto& [name, k] : g.kernels)
    kernels[name] = {{"GBps", k.GBps},
                     {"overhead_s", k.overhead_s},
                     {"points", k.points},
                     {"median_rel_error", k.median_rel_error}};
  j["kernels"] = kernels;
  j["attention_efficiency"] = g.attention_efficiency;
  j["attention_bwd_efficiency"] = g.attention_bwd_efficiency;
  j["attention_seq_half"] = g.attention_seq_half;
  j["attention_bwd_seq_half"] = g.attention_bwd_seq_half;
  j["attention_head_dim_half"] = g.attention_head_dim_half;
  j["attention_bwd_head_dim_half"] = g.attention_bwd_head_dim_half;
  j["attention_in_layer_factor"] = g.attention_in_layer_factor;
  j["attention_bwd_in_layer_factor"] = g.attention_bwd_in_layer_factor;
  j["attention_source"] = g.attention_source;
  if (g.attention_quality[0].points > 0 || g.attention_quality[1].points > 0)
    j["attention_quality"] = {{"forward", to_json(g.attention_quality[0])},
                              {"backward", to_json(g.attention_quality[1])}};
  Json layers = Json::array();
  for (const auto& l : g.layers) layers.push_back(to_json(l));
  j["layers"] = layers;
  if (!g.layer_forward.empty()) {
    Json forward = Json::array();
    for (const auto& l : g.layer_forward) forward.push_back(to_json(l));
    j["layer_forward"] = forward;
  }
  j["context_reserve_bytes"] = whole_number_json(g.context_reserve_bytes);
  j["host_s_per_kernel"] = g.host_s_per_kernel;
  j["host_points"] = g.host_points;
  return j;
}

GpuFit gpu_from(ObjectReader r, const std::string& type) {
  GpuFit g;
  g.gpu_type = type;
  g.read_from = r.origin();
  g.read_key = r.path();
  g.source = r.string("source");
  if (r.has("origins")) g.origins = r.strings("origins");
  auto gemm = r.object("gemm");
  std::map<Dtype, std::string> companions;
  for (const auto& key : gemm.keys()) {
    const Dtype dtype = dtype_key(gemm, key);
    auto d = gemm.object(key);
    GemmEfficiency e;
    // The ranges the fit keeps them in (k_half and the overhead may be 0).
    const auto in = [&](const char* key, CoefficientRange r, double fallback) {
      return d.number_in_or(key, r.lo, r.hi, fallback);
    };
    e.peak_fraction = d.number_in("peak_fraction", kPeakFractionRange.lo, kPeakFractionRange.hi);
    for (auto [key, side] : {std::pair{"tile_m", &e.tile_m}, std::pair{"tile_n", &e.tile_n}}) {
      *side = d.positive_integer(key);
      if (*side > 1024)
        d.fail(key, fmt::format("expected a tile side of at most 1024, found {}", *side));
    }
    e.k_half = in("k_half", {0, kKHalfRange.hi}, 0);
    e.overhead_s = in("overhead_s", {0, kOverheadRange.hi}, 0);
    // Added after schema 1 was first written; older profiles take the defaults.
    e.tile_exponent = in("tile_exponent", kTileExponentRange, e.tile_exponent);
    e.memory_fraction = in("memory_fraction", kMemoryFractionRange, e.memory_fraction);
    e.blend = in("blend", kBlendRange, e.blend);
    e.wave_smoothing = in("wave_smoothing", kWaveSmoothingRange, e.wave_smoothing);
    g.gemm[dtype] = e;
    if (auto q = d.optional_object("quality")) {
      g.gemm_quality[dtype] = quality_from(*q);
      if (auto a = q->optional_object("analytical")) {
        g.gemm_analytical_quality[dtype] = quality_from(*a);
        a->finish();
      }
      q->finish();
    }
    for (auto& p : d.objects_or_empty("measured")) {
      // A GEMM of a day would be a unit slip (1e308 made the correction's ratios NaN).
      GemmPoint pt{gemm_shape_from_json(p), p.positive("time_s")};
      check_measured_seconds(p, "time_s", pt.time_s);
      p.finish();
      g.gemm_points[dtype].push_back(pt);
    }
    if (d.has("companion")) companions.emplace(dtype, d.string("companion"));
    d.finish();
  }
  // A companion names another dtype of this GPU with measured GEMMs.
  for (const auto& [dtype, name] : companions) {
    auto d = gemm.object(std::string(to_string(dtype)));
    Dtype c;
    if (!parse_dtype(name, c) || c == dtype || !g.gemm_points.count(c))
      d.fail("companion",
             fmt::format("the name of another dtype with measured GEMMs in this profile's \"{}\" "
                         "(\"{}\" is not one)",
                         type, name));
    g.gemm_companion[dtype] = c;
  }
  g.memory_efficiency = r.positive("memory_efficiency");
  g.launch_s = r.number_in_or("launch_s", 0, kMaxLaunchS, 5e-6);
  if (auto k = r.optional_object("kernels")) {
    for (const auto& name : k->keys()) {
      auto kr = k->object(name);
      KernelFit f{kr.positive("GBps"), kr.non_negative_or("overhead_s", 0),
                  kr.integer_or("points", 0), kr.non_negative_or("median_rel_error", 0)};
      kr.finish();
      g.kernels[name] = f;
    }
  }
  g.attention_efficiency = r.positive("attention_efficiency");
  g.attention_bwd_efficiency = r.positive_or("attention_bwd_efficiency", g.attention_efficiency);
  g.attention_seq_half = r.non_negative_or("attention_seq_half", 0);
  g.attention_bwd_seq_half = r.non_negative_or("attention_bwd_seq_half", g.attention_seq_half);
  g.attention_head_dim_half = r.non_negative_or("attention_head_dim_half", 0);
  g.attention_bwd_head_dim_half =
      r.non_negative_or("attention_bwd_head_dim_half", g.attention_head_dim_half);
  g.attention_in_layer_factor = r.positive_or("attention_in_layer_factor", 1);
  g.attention_bwd_in_layer_factor =
      r.positive_or("attention_bwd_in_layer_factor", g.attention_in_layer_factor);
  g.attention_source = r.string_or("attention_source", std::string(kAttentionPrior));
  if (auto q = r.optional_object("attention_quality")) {
    const char* passes[2] = {"forward", "backward"};
    for (int i = 0; i < 2; ++i)
      if (auto pass = q->optional_object(passes[i])) {
        g.attention_quality[i] = quality_from(*pass);
        pass->finish();
      }
    q->finish();
  }
  for (auto& l : r.objects_or_empty("layers")) g.layers.push_back(layer_from_json(l));
  for (auto& l : r.objects_or_empty("layer_forward"))
    g.layer_forward.push_back(layer_forward_from_json(l));
  g.context_reserve_bytes = r.non_negative_or("context_reserve_bytes", 0);
  // Added 2026-11-23; older profiles have no host floor.
  g.host_s_per_kernel = r.non_negative_or("host_s_per_kernel", 0);
  g.host_points = r.integer_or("host_points", 0);
  r.finish();
  return g;
}

}  // namespace

Json to_json(const GemmEfficiency& e) {
  return {{"peak_fraction", e.peak_fraction},
          {"tile_m", e.tile_m},
          {"tile_n", e.tile_n},
          {"k_half", e.k_half},
          {"overhead_s", e.overhead_s},
          {"tile_exponent", e.tile_exponent},
          {"memory_fraction", e.memory_fraction},
          {"blend", e.blend},
          {"wave_smoothing", e.wave_smoothing}};
}

Json to_json(const FitQuality& q) {
  Json j = {{"points", q.points},
            {"median_rel_error", q.median_rel_error},
            {"p95_rel_error", q.p95_rel_error}};
  if (!q.method.empty()) j["method"] = q.method;
  return j;
}

Json to_json(const Profile& p) {
  Json j;
  j["format"] = kProfileFormat;
  j["schema_version"] = kProfileSchemaVersion;
  j["origins"] = p.origins;
  Json gpus = Json::object();
  for (const auto& [type, g] : p.gpus) gpus[type] = gpu_json(g);
  j["gpus"] = gpus;
  Json coll = Json::array();
  for (const auto& c : p.collectives) coll.push_back(to_json(c));
  j["collectives"] = coll;
  Json failures = Json::array();
  for (const auto& f : p.failures) failures.push_back({{"what", f.what}, {"error", f.error}});
  j["failures"] = failures;
  return j;
}

Profile profile_from_document(const Document& doc) {
  ObjectReader r(doc);
  require_format(r, kProfileFormat, kProfileSchemaVersion);
  Profile p;
  if (r.has("origins")) p.origins = r.strings("origins");
  auto gpus = r.object("gpus");
  for (const auto& type : gpus.keys()) p.gpus[type] = gpu_from(gpus.object(type), type);
  for (auto& c : r.objects_or_empty("collectives"))
    p.collectives.push_back(collective_from_json(c));
  for (auto& f : r.objects_or_empty("failures")) {
    p.failures.push_back({f.string("what"), f.string("error")});
    f.finish();
  }
  r.finish();
  return p;
}

void save_profile(const Profile& profile, const std::filesystem::path& path) {
  write_json_atomically(to_json(profile), path);
}

}  // namespace hetplan
