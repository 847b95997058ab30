#include "costmodel/fit_collectives.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "costmodel/linear_fit.h"

namespace hetplan {
namespace {

constexpr double kHuberK = 1.345;  // 95% efficiency under Gaussian noise

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return percentile_sorted(v, 0.5);
}

// Latency a and seconds per byte b of a + b x ~ t, by the one fixed + slope fit
// (costmodel/linear_fit.h: relative residuals, a, b >= 0), each point at its Huber weight.
std::pair<double, double> weighted_line(const std::vector<SizeTime>& pts,
                                        const std::vector<double>& w) {
  std::vector<FitPoint> points;
  for (size_t i = 0; i < pts.size(); ++i) points.push_back({pts[i].bytes, pts[i].time_s, w[i]});
  const FixedSlopeFit line = fit_fixed_plus_slope(points);
  return {line.fixed, line.slope};
}

double relative_residual(const LatencyBandwidth& f, const SizeTime& p) {
  return f.time_s(p.bytes) / p.time_s - 1;
}

// Sum of squared relative residuals, each capped so that one stray point cannot pick the
// breakpoint.
double capped_sse(const LatencyBandwidth& f, const std::vector<SizeTime>& pts, size_t begin,
                  size_t end) {
  constexpr double kCap = 0.25;
  double s = 0;
  for (size_t i = begin; i < end; ++i) {
    const double r = std::min(std::abs(relative_residual(f, pts[i])), kCap);
    s += r * r;
  }
  return s;
}

void fill_errors(TwoRegimeFit& fit, const std::vector<SizeTime>& pts) {
  std::vector<double> errs;
  for (const auto& p : pts) errs.push_back(std::abs(fit.time_s(p.bytes) / p.time_s - 1));
  fit.points = static_cast<int64_t>(pts.size());
  fit.median_rel_error = median_of(errs);
  fit.max_rel_error = errs.empty() ? 0 : *std::max_element(errs.begin(), errs.end());
}

}  // namespace

LatencyBandwidth fit_latency_bandwidth(const std::vector<SizeTime>& points,
                                       const FitOptions& options) {
  std::vector<SizeTime> pts;
  for (const auto& p : points)
    if (p.bytes > 0 && p.time_s > 0 && std::isfinite(p.time_s)) pts.push_back(p);
  if (pts.empty()) return {};
  std::vector<double> w(pts.size(), 1.0);
  auto [a, b] = weighted_line(pts, w);
  for (int it = 0; it < options.robust_iterations && pts.size() > 2; ++it) {
    std::vector<double> r(pts.size());
    for (size_t i = 0; i < pts.size(); ++i) r[i] = (a + b * pts[i].bytes) / pts[i].time_s - 1;
    std::vector<double> abs_r;
    for (double x : r) abs_r.push_back(std::abs(x));
    // Robust scale (MAD); floor at 0.1% so near-perfect data keep unit weights.
    const double scale = std::max(1.4826 * median_of(abs_r), 1e-3);
    for (size_t i = 0; i < pts.size(); ++i) {
      const double z = std::abs(r[i]) / scale;
      w[i] = z <= kHuberK ? 1.0 : kHuberK / z;
    }
    std::tie(a, b) = weighted_line(pts, w);
  }
  // Times that do not grow with size over the regime (a slope that adds under a millionth of the
  // time at its largest size is rounding): latency alone, no bandwidth term.
  double largest = 0;
  for (const auto& p : pts) largest = std::max(largest, p.bytes);
  if (b * largest <= 1e-6 * a) b = 0;
  return {a, b > 0 ? 1.0 / b / 1e9 : kLatencyOnly};
}

TwoRegimeFit fit_two_regimes(std::vector<SizeTime> points, const FitOptions& options) {
  std::erase_if(points, [](const SizeTime& p) {
    return !(p.bytes > 0 && p.time_s > 0 && std::isfinite(p.time_s));
  });
  std::sort(points.begin(), points.end(),
            [](const SizeTime& x, const SizeTime& y) { return x.bytes < y.bytes; });
  TwoRegimeFit best;
  if (points.empty()) return best;
  const size_t n = points.size();
  best.small = best.large = fit_latency_bandwidth(points, options);
  best.breakpoint_bytes = points.back().bytes;
  const double sse_one = capped_sse(best.small, points, 0, n);
  double best_sse = std::numeric_limits<double>::infinity();
  size_t best_split = 0;
  LatencyBandwidth best_small, best_large;
  const size_t m = static_cast<size_t>(std::max(options.min_points_per_regime, 2));
  for (size_t s = m; s + m <= n; ++s) {
    if (points[s - 1].bytes == points[s].bytes) continue;  // a breakpoint lies between sizes
    const std::vector<SizeTime> lo(points.begin(), points.begin() + s);
    const std::vector<SizeTime> hi(points.begin() + s, points.end());
    const LatencyBandwidth fs = fit_latency_bandwidth(lo, options);
    const LatencyBandwidth fl = fit_latency_bandwidth(hi, options);
    const double sse = capped_sse(fs, points, 0, s) + capped_sse(fl, points, s, n);
    if (sse < best_sse) {
      best_sse = sse;
      best_split = s;
      best_small = fs;
      best_large = fl;
    }
  }
  // Bayesian information criterion: 2 parameters for one line, 5 for two lines and a breakpoint.
  // Relative residuals under 1e-12 are rounding, not a better fit: the sum is floored there.
  auto bic = [&](double sse, int k) {
    const double nd = static_cast<double>(n);
    return nd * std::log(std::max(sse, nd * 1e-24) / nd) + k * std::log(nd);
  };
  if (best_split > 0 && bic(best_sse, 5) < bic(sse_one, 2)) {
    best.small = best_small;
    best.large = best_large;
    const double lo = points[best_split - 1].bytes, hi = points[best_split].bytes;
    // Where the two lines cross inside the gap the curve is continuous there; otherwise split at
    // the geometric middle of the gap.
    const double inv_s = 1 / (best_small.bandwidth_GBps * 1e9);
    const double inv_l = 1 / (best_large.bandwidth_GBps * 1e9);
    const double cross =
        inv_s != inv_l ? (best_large.latency_s - best_small.latency_s) / (inv_s - inv_l) : -1;
    best.breakpoint_bytes = cross >= lo && cross < hi ? cross : std::sqrt(lo * hi);
  }
  fill_errors(best, points);
  return best;
}

const CollectiveFit* CommunicationFit::find(CollectiveKind op, Dtype dtype, int64_t group_size,
                                            int64_t nodes, const std::string& link,
                                            const std::vector<std::string>& gpus) const {
  for (const auto& f : collectives) {
    if (f.op != op || f.dtype != dtype || f.group_size != group_size || f.nodes != nodes) continue;
    if (!link.empty() && f.link != link) continue;
    if (!gpus.empty() && f.gpus != gpus) continue;
    return &f;
  }
  return nullptr;
}

CommunicationFit fit_communication(const CalibrationFile& file, const FitOptions& options) {
  CommunicationFit out;
  using CollKey = std::tuple<CollectiveKind, Dtype, int64_t, int64_t, int64_t, std::string,
                             std::vector<std::string>>;
  std::map<CollKey, std::vector<SizeTime>> coll;
  for (const auto& m : file.collectives) {
    if (!m.ok || m.time_s.median <= 0) continue;
    coll[{m.op, m.dtype, m.group_size, m.nodes, m.gpus_per_node, m.link, m.gpus}].push_back(
        {m.bytes, m.time_s.median});
  }
  for (const auto& [key, pts] : coll) {
    CollectiveFit f;
    static_cast<TwoRegimeFit&>(f) = fit_two_regimes(pts, options);
    std::tie(f.op, f.dtype, f.group_size, f.nodes, f.gpus_per_node, f.link, f.gpus) = key;
    out.collectives.push_back(std::move(f));
  }
  using P2pKey = std::tuple<int64_t, int64_t, std::string, std::vector<std::string>>;
  std::map<P2pKey, std::vector<SizeTime>> p2p;
  for (const auto& m : file.p2p)
    p2p[{m.src, m.dst, m.link, m.gpus}].push_back({m.bytes, m.time_s.median});
  for (const auto& [key, pts] : p2p) {
    P2pFit f;
    static_cast<TwoRegimeFit&>(f) = fit_two_regimes(pts, options);
    std::tie(f.src, f.dst, f.link, f.gpus) = key;
    out.p2p.push_back(std::move(f));
  }
  using HdKey = std::tuple<std::string, bool, std::vector<std::string>>;
  std::map<HdKey, std::vector<SizeTime>> hd;
  for (const auto& m : file.host_device)
    hd[{m.direction, m.pinned, m.gpus}].push_back({m.bytes, m.time_s.median});
  for (const auto& [key, pts] : hd) {
    HostDeviceFit f;
    static_cast<TwoRegimeFit&>(f) = fit_two_regimes(pts, options);
    std::tie(f.direction, f.pinned, f.gpus) = key;
    out.host_device.push_back(std::move(f));
  }
  // Check the composition against every measured whole-node group spanning several nodes.
  using CheckKey = std::tuple<CollectiveKind, Dtype, int64_t, int64_t>;
  std::map<CheckKey, std::vector<double>> errors;
  for (const auto& m : file.collectives) {
    if (!m.ok || m.nodes < 2 || m.gpus_per_node < 2) continue;
    const auto t =
        hierarchical_time_s(out, m.op, m.dtype, m.bytes, m.nodes, m.gpus_per_node, m.gpus);
    if (t)
      errors[{m.op, m.dtype, m.nodes, m.gpus_per_node}].push_back(
          std::abs(*t / m.time_s.median - 1));
  }
  for (const auto& [key, errs] : errors) {
    HierarchyCheck c;
    std::tie(c.op, c.dtype, c.nodes, c.gpus_per_node) = key;
    c.points = static_cast<int64_t>(errs.size());
    c.median_rel_error = median_of(errs);
    c.max_rel_error = *std::max_element(errs.begin(), errs.end());
    out.hierarchy_checks.push_back(c);
  }
  return out;
}

namespace {

// Slowest intra-node time among the node kinds in `gpus` (any kind when empty).
std::optional<double> intra_time_s(const CommunicationFit& fit, CollectiveKind op, Dtype dtype,
                                   double bytes, int64_t gpus_per_node,
                                   const std::vector<std::string>& gpus) {
  std::optional<double> worst;
  for (const auto& f : fit.collectives) {
    if (f.op != op || f.dtype != dtype || f.group_size != gpus_per_node || f.nodes != 1) continue;
    if (!gpus.empty() && !f.gpus.empty() &&
        !std::includes(gpus.begin(), gpus.end(), f.gpus.begin(), f.gpus.end()))
      continue;
    const double t = f.time_s(bytes);
    if (!worst || t > *worst) worst = t;
  }
  return worst;
}

std::optional<double> inter_time_s(const CommunicationFit& fit, CollectiveKind op, Dtype dtype,
                                   double bytes, int64_t nodes,
                                   const std::vector<std::string>& gpus) {
  std::optional<double> worst;
  for (const auto& f : fit.collectives) {
    if (f.op != op || f.dtype != dtype || f.group_size != nodes || f.nodes != nodes ||
        f.gpus_per_node != 1)
      continue;
    if (!gpus.empty() && !f.gpus.empty() && f.gpus != gpus) continue;
    const double t = f.time_s(bytes);
    if (!worst || t > *worst) worst = t;
  }
  return worst;
}

}  // namespace

std::optional<double> hierarchical_time_s(const CommunicationFit& fit, CollectiveKind op,
                                          Dtype dtype, double bytes, int64_t nodes,
                                          int64_t gpus_per_node,
                                          const std::vector<std::string>& gpus) {
  if (nodes < 2 || gpus_per_node < 2) return std::nullopt;
  const double g = static_cast<double>(gpus_per_node);
  std::optional<double> a, b, c;
  switch (op) {
    case CollectiveKind::kAllReduce:
      a = intra_time_s(fit, CollectiveKind::kReduceScatter, dtype, bytes, gpus_per_node, gpus);
      b = inter_time_s(fit, CollectiveKind::kAllReduce, dtype, bytes / g, nodes, gpus);
      c = intra_time_s(fit, CollectiveKind::kAllGather, dtype, bytes, gpus_per_node, gpus);
      break;
    case CollectiveKind::kAllGather:
      a = 0.0;
      b = inter_time_s(fit, CollectiveKind::kAllGather, dtype, bytes / g, nodes, gpus);
      c = intra_time_s(fit, CollectiveKind::kAllGather, dtype, bytes, gpus_per_node, gpus);
      break;
    case CollectiveKind::kReduceScatter:
      a = intra_time_s(fit, CollectiveKind::kReduceScatter, dtype, bytes, gpus_per_node, gpus);
      b = inter_time_s(fit, CollectiveKind::kReduceScatter, dtype, bytes / g, nodes, gpus);
      c = 0.0;
      break;
    default:
      return std::nullopt;
  }
  if (!a || !b || !c) return std::nullopt;
  return *a + *b + *c;
}

// ---- JSON ----

Json to_json(const LatencyBandwidth& term) {
  return Json{{"latency_s", term.latency_s},
              {"bandwidth_GBps", term.latency_only() ? Json() : Json(term.bandwidth_GBps)}};
}

namespace {

void put_curve(Json& j, const TwoRegimeFit& f) {
  j["small"] = to_json(f.small);
  j["large"] = to_json(f.large);
  j["breakpoint_bytes"] = f.breakpoint_bytes;
  j["median_rel_error"] = f.median_rel_error;
  j["max_rel_error"] = f.max_rel_error;
  j["points"] = f.points;
}

LatencyBandwidth term_from_json(ObjectReader r) {
  LatencyBandwidth t;
  t.latency_s = r.non_negative_or("latency_s", 0);
  t.bandwidth_GBps = r.positive_or("bandwidth_GBps", kLatencyOnly);  // null: latency only
  r.finish();
  return t;
}

void read_curve(ObjectReader& r, TwoRegimeFit& f) {
  f.small = term_from_json(r.object("small"));
  f.large = term_from_json(r.object("large"));
  f.breakpoint_bytes = r.non_negative_or("breakpoint_bytes", 0);
  f.median_rel_error = r.non_negative_or("median_rel_error", 0);
  f.max_rel_error = r.non_negative_or("max_rel_error", 0);
  f.points = r.integer_or("points", 0);
}

std::vector<std::string> gpus_or_empty(ObjectReader& r) {
  return r.has("gpus") ? r.strings("gpus") : std::vector<std::string>{};
}

Dtype dtype_from(ObjectReader& r) {
  const std::string text = r.string("dtype");
  Dtype d;
  if (!parse_dtype(text, d)) r.fail("dtype", fmt::format("expected a dtype, found \"{}\"", text));
  return d;
}

CollectiveKind op_from(ObjectReader& r) {
  const std::string text = r.string("op");
  CollectiveKind k;
  if (!parse_collective(text, k))
    r.fail("op", fmt::format("expected all_reduce, all_gather, reduce_scatter, all_to_all, "
                             "broadcast or send_recv; found \"{}\"",
                             text));
  return k;
}

template <typename T>
Json list_json(const std::vector<T>& items) {
  Json a = Json::array();
  for (const auto& x : items) a.push_back(to_json(x));
  return a;
}

}  // namespace

Json to_json(const CollectiveFit& f) {
  Json j{{"op", to_string(f.op)}, {"dtype", to_string(f.dtype)},      {"group_size", f.group_size},
         {"nodes", f.nodes},      {"gpus_per_node", f.gpus_per_node}, {"link", f.link}};
  if (!f.gpus.empty()) j["gpus"] = f.gpus;
  put_curve(j, f);
  j["large_busbw_GBps"] = f.large.latency_only() ? Json() : Json(f.large_busbw_GBps());
  return j;
}

CollectiveFit collective_fit_from_json(ObjectReader r) {
  CollectiveFit f;
  f.op = op_from(r);
  f.dtype = dtype_from(r);
  f.group_size = r.positive_integer("group_size");
  f.nodes = r.positive_integer_or("nodes", 1);
  f.gpus_per_node = r.positive_integer_or("gpus_per_node", f.group_size / f.nodes);
  f.link = r.string_or("link", "");
  f.gpus = gpus_or_empty(r);
  read_curve(r, f);
  r.optional_number("large_busbw_GBps");  // derived
  r.finish();
  return f;
}

Json to_json(const P2pFit& f) {
  Json j{{"src", f.src}, {"dst", f.dst}, {"link", f.link}};
  if (!f.gpus.empty()) j["gpus"] = f.gpus;
  put_curve(j, f);
  return j;
}

P2pFit p2p_fit_from_json(ObjectReader r) {
  P2pFit f;
  f.src = global_rank(r, "src");
  f.dst = global_rank(r, "dst");
  f.link = r.string_or("link", "");
  f.gpus = gpus_or_empty(r);
  read_curve(r, f);
  r.finish();
  return f;
}

Json to_json(const HostDeviceFit& f) {
  Json j{{"direction", f.direction}, {"pinned", f.pinned}};
  if (!f.gpus.empty()) j["gpus"] = f.gpus;
  put_curve(j, f);
  return j;
}

HostDeviceFit host_device_fit_from_json(ObjectReader r) {
  HostDeviceFit f;
  f.direction = r.choice("direction", {"h2d", "d2h"});
  f.pinned = r.boolean_or("pinned", true);
  f.gpus = gpus_or_empty(r);
  read_curve(r, f);
  r.finish();
  return f;
}

Json to_json(const HierarchyCheck& c) {
  return Json{{"op", to_string(c.op)},
              {"dtype", to_string(c.dtype)},
              {"nodes", c.nodes},
              {"gpus_per_node", c.gpus_per_node},
              {"median_rel_error", c.median_rel_error},
              {"max_rel_error", c.max_rel_error},
              {"points", c.points}};
}

HierarchyCheck hierarchy_check_from_json(ObjectReader r) {
  HierarchyCheck c;
  c.op = op_from(r);
  c.dtype = dtype_from(r);
  c.nodes = r.positive_integer("nodes");
  c.gpus_per_node = r.positive_integer("gpus_per_node");
  c.median_rel_error = r.non_negative_or("median_rel_error", 0);
  c.max_rel_error = r.non_negative_or("max_rel_error", 0);
  c.points = r.integer_or("points", 0);
  r.finish();
  return c;
}

Json to_json(const CommunicationFit& f) {
  return Json{{"collectives", list_json(f.collectives)},
              {"p2p", list_json(f.p2p)},
              {"host_device", list_json(f.host_device)},
              {"hierarchy_checks", list_json(f.hierarchy_checks)}};
}

CommunicationFit communication_fit_from_json(ObjectReader r) {
  CommunicationFit f;
  for (auto& item : r.objects_or_empty("collectives"))
    f.collectives.push_back(collective_fit_from_json(item));
  for (auto& item : r.objects_or_empty("p2p")) f.p2p.push_back(p2p_fit_from_json(item));
  for (auto& item : r.objects_or_empty("host_device"))
    f.host_device.push_back(host_device_fit_from_json(item));
  for (auto& item : r.objects_or_empty("hierarchy_checks"))
    f.hierarchy_checks.push_back(hierarchy_check_from_json(item));
  r.finish();
  return f;
}

}  // namespace hetplan
