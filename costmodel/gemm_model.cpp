#include "costmodel/gemm_model.h"

#include <algorithm>
#include <cmath>

#include "costmodel/stats.h"

namespace hetplan {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Minimum split-K depth worth a split (cuBLAS-like heuristics keep K per split >= 256).
constexpr int64_t kMinSplitK = 256;
// Measured corrections fade with distance: weight exp(-(d / kCorrectionScale)^2) in log2 units.
constexpr double kCorrectionScale = 1.0;
constexpr int kNeighbours = 4;

double log2_distance(const GemmShape& a, const GemmShape& b) {
  auto d = [](int64_t x, int64_t y) { return std::log2(double(x)) - std::log2(double(y)); };
  const double dm = d(a.m, b.m), dn = d(a.n, b.n), dk = d(a.k, b.k), db = d(a.batch, b.batch);
  const double dt = (a.trans_a != b.trans_a) + (a.trans_b != b.trans_b);  // layouts differ a bit
  return std::sqrt(dm * dm + dn * dn + dk * dk + db * db + 0.25 * dt);
}

}  // namespace

GemmModel::GemmModel(GemmEfficiency eff, double peak_flops, double memory_GBps, int64_t sm_count,
                     int bytes_per_element)
    : eff_(eff),
      peak_flops_(peak_flops),
      memory_GBps_(memory_GBps),
      sm_count_(std::max<int64_t>(1, sm_count)),
      bytes_(bytes_per_element) {}

double GemmModel::analytical_s(const GemmShape& s) const {
  const int64_t tm = ceil_div(s.m, eff_.tile_m), tn = ceil_div(s.n, eff_.tile_n);
  const int64_t tiles = tm * tn * s.batch;
  // Split-K when there are fewer tiles than SMs and K is deep enough.
  int64_t splits = 1;
  if (tiles < sm_count_) splits = std::max<int64_t>(1, std::min(sm_count_ / tiles, s.k / kMinSplitK));
  const int64_t work = tiles * splits;
  const int64_t waves = ceil_div(work, sm_count_);
  const double wave_eff = double(work) / double(waves * sm_count_);
  const double pad_eff = double(s.m) * double(s.n) /
                         (double(tm * eff_.tile_m) * double(tn * eff_.tile_n));
  const double k_split = double(s.k) / double(splits);
  const double k_eff = k_split / (k_split + eff_.k_half);
  const double compute_s =
      s.flops() / (peak_flops_ * eff_.peak_fraction * wave_eff * pad_eff * k_eff);
  const double bytes = double(bytes_) * s.batch *
                       (double(s.m) * s.k + double(s.k) * s.n + double(s.m) * s.n);
  const double memory_s = bytes / (memory_GBps_ * 1e9);
  return eff_.overhead_s + std::max(compute_s, memory_s);
}

void GemmModel::set_measurements(std::vector<GemmPoint> points) {
  points_ = std::move(points);
  log_ratio_.clear();
  for (const auto& p : points_) log_ratio_.push_back(std::log(p.time_s / analytical_s(p.shape)));
}

double GemmModel::time_s(const GemmShape& s) const {
  const double base = analytical_s(s);
  if (points_.empty()) return base;
  // Nearest measured shapes.
  std::vector<std::pair<double, size_t>> near;
  near.reserve(points_.size());
  for (size_t i = 0; i < points_.size(); ++i) near.emplace_back(log2_distance(s, points_[i].shape), i);
  const size_t k = std::min<size_t>(kNeighbours, near.size());
  std::partial_sort(near.begin(), near.begin() + k, near.end());
  if (near[0].first == 0) return points_[near[0].second].time_s;
  double wsum = 0, lsum = 0;
  for (size_t i = 0; i < k; ++i) {
    const double w = std::exp(-std::pow(near[i].first / kCorrectionScale, 2)) / near[i].first;
    wsum += w;
    lsum += w * log_ratio_[near[i].second];
  }
  // Far from every measurement the correction fades to the analytical model.
  const double fade = std::exp(-std::pow(near[0].first / (2 * kCorrectionScale), 2));
  return base * std::exp(fade * lsum / wsum);
}

GemmEfficiency fit_gemm_efficiency(const std::vector<GemmPoint>& points, const GemmEfficiency& prior,
                                   double peak_flops, double memory_GBps, int64_t sm_count,
                                   int bytes_per_element) {
  if (points.size() < 8) return prior;
  const std::pair<int64_t, int64_t> tiles[] = {{64, 64}, {128, 64}, {128, 128}, {128, 256},
                                                {256, 128}};
  const double k_halves[] = {16, 32, 64, 128, 256};
  GemmEfficiency best = prior;
  double best_err = 1e300;
  for (auto [tm, tn] : tiles) {
    for (double kh : k_halves) {
      GemmEfficiency e = prior;
      e.tile_m = tm;
      e.tile_n = tn;
      e.k_half = kh;
      // Peak fraction: with fraction 1 and no overhead, the compute-bound points' ratio of model to
      // measured time is their efficiency; take the median over the largest GEMMs.
      e.peak_fraction = 1;
      e.overhead_s = 0;
      GemmModel unit(e, peak_flops, memory_GBps, sm_count, bytes_per_element);
      std::vector<std::pair<double, double>> by_flops;
      for (const auto& p : points) by_flops.emplace_back(p.shape.flops(), unit.analytical_s(p.shape) / p.time_s);
      std::sort(by_flops.begin(), by_flops.end());
      std::vector<double> top;
      for (size_t i = by_flops.size() * 3 / 4; i < by_flops.size(); ++i) top.push_back(by_flops[i].second);
      e.peak_fraction = std::clamp(summarize(top).median, 0.05, 1.0);
      // Overhead: median residual of the smallest GEMMs.
      std::vector<double> small;
      GemmModel scaled(e, peak_flops, memory_GBps, sm_count, bytes_per_element);
      for (const auto& p : points)
        if (p.shape.flops() < 1e8) small.push_back(p.time_s - scaled.analytical_s(p.shape));
      e.overhead_s = small.empty() ? prior.overhead_s : std::max(0.0, summarize(small).median);
      GemmModel full(e, peak_flops, memory_GBps, sm_count, bytes_per_element);
      double err = 0;
      for (const auto& p : points) {
        const double l = std::log(full.analytical_s(p.shape) / p.time_s);
        err += l * l;
      }
      if (err < best_err) {
        best_err = err;
        best = e;
      }
    }
  }
  return best;
}

}  // namespace hetplan
