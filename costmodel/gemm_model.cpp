#include "costmodel/gemm_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace hetplan {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Split-K keeps at least this much K per split (cuBLAS-like heuristics).
constexpr int64_t kMinSplitK = 256;
constexpr int64_t kSplits[] = {1, 2, 3, 4, 6, 8, 12, 16};
constexpr int64_t kTileSides[] = {64, 128, 256};

// Correction by local regression. The held-out error on the synthetic tables of
// tests/synthetic_gemm.h is flat around these values (docs/fit.md); none is finely tuned.
constexpr size_t kNeighbours = 24;
constexpr double kBandwidth = 1.0;       // Gaussian kernel width, log2 units
constexpr double kLayoutDistance = 0.5;  // another operand layout counts as this far away
// A companion dtype's measurement counts as this much further away (one doubling of a side):
// its kernels are the same, its times differ by about 1% (fp16 against bf16 on the H100: median
// |log ratio| 0.8%, p95 5.8% over 396 shapes; docs/fit.md).
constexpr double kCompanionDistance = 1.0;
constexpr double kSlopeRidge = 0.05;    // shrinks slopes towards 0 (a weighted mean)
constexpr double kLayoutRidge = 0.002;  // keeps layout offsets defined (relative ridge)
constexpr double kFadeStart = 2.5;      // beyond this distance the correction fades out
constexpr double kFadeScale = 2.0;
// A measured shape whose ratio lies this far (in log, 1.8x) above the median of its nearest
// measured neighbours' is a glitch of that measurement (a host hiccup: on the H100 calibration a
// 64x16x16 GEMM took 50 us where its neighbours took 7-10 us), not a trend: the correction of
// other shapes leaves it out. Only slow outliers: host hiccups and clock dips slow a measurement,
// nothing makes one faster than the kernel runs.
constexpr double kGlitchLogRatio = 0.6;
constexpr size_t kGlitchNeighbours = 8;

double tile_intensity(double m, double n) { return m * n / (m + n); }

// Squared distance between two shapes in log2 m, n, k, batch; another layout is further away, and
// a companion dtype's shape (`companion`) further still.
double distance2(const double (&a)[4], int layout_a, const double (&b)[4], int layout_b,
                 bool companion = false) {
  double d2 = layout_a == layout_b ? 0 : kLayoutDistance * kLayoutDistance;
  if (companion) d2 += kCompanionDistance * kCompanionDistance;
  for (int j = 0; j < 4; ++j) d2 += (a[j] - b[j]) * (a[j] - b[j]);
  return d2;
}

// (a^p + b^p)^(1/p), computed without overflow.
double p_norm(double a, double b, double p) {
  const double hi = std::max(a, b), lo = std::min(a, b);
  if (hi <= 0) return 0;
  return hi * std::pow(1 + std::pow(lo / hi, p), 1 / p);
}

int layout_of(const GemmShape& s) { return (s.trans_a ? 2 : 0) + (s.trans_b ? 1 : 0); }

// Solves a x = b (n <= 8) by Gaussian elimination with partial pivoting; false when singular.
template <size_t N>
bool solve(std::array<std::array<double, N>, N>& a, std::array<double, N>& b, size_t n) {
  for (size_t c = 0; c < n; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    if (std::abs(a[piv][c]) < 1e-14) return false;
    std::swap(a[c], a[piv]);
    std::swap(b[c], b[piv]);
    for (size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (size_t c = n; c-- > 0;) {
    for (size_t k = c + 1; k < n; ++k) b[c] -= a[c][k] * b[k];
    b[c] /= a[c][c];
  }
  return true;
}

// Weighted ridge regression of the local correction (at most 8 unknowns).
constexpr size_t kMaxUnknowns = 8;
using Coefficients = std::array<double, kMaxUnknowns>;
struct Row {
  Coefficients z{};  // 1, dx (4), layout indicators
  double y = 0;      // log(measured / analytical)
  double w = 0;
};

double predict(const Coefficients& c, const Row& r, size_t n) {
  double v = 0;
  for (size_t j = 0; j < n; ++j) v += c[j] * r.z[j];
  return v;
}

bool local_fit(const std::vector<Row>& rows, size_t n, Coefficients& out) {
  std::array<std::array<double, kMaxUnknowns>, kMaxUnknowns> a{};
  Coefficients b{};
  double wsum = 0;
  for (const Row& r : rows) {
    wsum += r.w;
    for (size_t i = 0; i < n; ++i) {
      b[i] += r.w * r.z[i] * r.y;
      for (size_t j = 0; j < n; ++j) a[i][j] += r.w * r.z[i] * r.z[j];
    }
  }
  if (!(wsum > 0)) return false;
  for (size_t j = 1; j < 5; ++j) a[j][j] += kSlopeRidge * wsum;
  // A layout's offset is shrunk relative to the weight of its own points (a[j][j]).
  for (size_t j = 5; j < n; ++j) a[j][j] *= 1 + kLayoutRidge;
  out = b;
  return solve(a, out, n);
}

}  // namespace

Json to_json(const GemmPoint& p) {
  Json j = to_json(p.shape);
  j["time_s"] = p.time_s;
  return j;
}

uint64_t gemm_shape_hash(const GemmShape& s) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(static_cast<uint64_t>(s.m));
  mix(static_cast<uint64_t>(s.n));
  mix(static_cast<uint64_t>(s.k));
  mix(static_cast<uint64_t>(s.batch));
  mix(static_cast<uint64_t>(layout_of(s)));
  return h;
}

int gemm_shape_bucket(const GemmShape& s, int buckets) {
  uint64_t x = gemm_shape_hash(s);
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return static_cast<int>(x % static_cast<uint64_t>(std::max(buckets, 1)));
}

GemmModel::GemmModel(GemmEfficiency eff, double peak_flops, double memory_GBps, int64_t sm_count,
                     double bytes_per_element)
    : eff_(eff),
      peak_flops_(peak_flops),
      memory_GBps_(memory_GBps),
      sm_count_(std::max<int64_t>(1, sm_count)),
      bytes_(bytes_per_element) {
  prepare_tiles();
}

void GemmModel::set_efficiency(const GemmEfficiency& eff) {
  eff_ = eff;
  prepare_tiles();
  set_measurements(std::move(points_));
}

void GemmModel::prepare_tiles() {
  tiles_.clear();
  const int64_t area = eff_.tile_m * eff_.tile_n;
  const int64_t side = std::max(eff_.tile_m, eff_.tile_n);
  const double top = tile_intensity(double(eff_.tile_m), double(eff_.tile_n));
  tiles_.push_back({eff_.tile_m, eff_.tile_n, 1.0});
  for (int64_t tm : kTileSides)
    for (int64_t tn : kTileSides) {
      if (tm * tn > area || std::max(tm, tn) > side) continue;
      if (tm == eff_.tile_m && tn == eff_.tile_n) continue;
      const double rel = std::pow(tile_intensity(double(tm), double(tn)) / top, eff_.tile_exponent);
      tiles_.push_back({tm, tn, std::min(1.0, rel)});
    }
}

GemmModel::Terms GemmModel::terms(const GemmShape& s) const {
  const double per_sm = peak_flops_ * eff_.peak_fraction / double(sm_count_);
  const double bandwidth = memory_GBps_ * 1e9 * eff_.memory_fraction;
  const double outputs = double(s.m) * double(s.n) * double(s.batch);
  const double io_bytes = double(bytes_) * double(s.batch) *
                          (double(s.m) * s.k + double(s.k) * s.n + double(s.m) * s.n);
  const double sms = double(sm_count_);
  // The library's choice: the configuration whose bound (compute or memory) plus split-K reduction
  // is smallest.
  double best = std::numeric_limits<double>::infinity();
  Terms chosen;
  for (const Tile& t : tiles_) {
    const int64_t tiles = ceil_div(s.m, t.m) * ceil_div(s.n, t.n) * s.batch;
    const double tile_flops = 2.0 * double(t.m) * double(t.n) / (per_sm * t.rel);
    for (int64_t splits : kSplits) {
      if (splits > 1 && (tiles * splits > 2 * sm_count_ || s.k / splits < kMinSplitK)) break;
      const int64_t k_split = ceil_div(s.k, splits);
      const double units = double(tiles * splits);
      // Waves over the SMs; persistent (stream-K) kernels smooth the last partial wave.
      const double waves = units <= sms ? 1.0
                                        : (1 - eff_.wave_smoothing) * std::ceil(units / sms) +
                                              eff_.wave_smoothing * units / sms;
      const double compute = waves * tile_flops * (double(k_split) + eff_.k_half);
      const double mem = io_bytes / bandwidth;
      // Split-K: a second kernel reads the fp32 partial products and writes the result.
      const double reduce =
          splits > 1
              ? eff_.overhead_s + (4.0 * outputs * double(splits) + bytes_ * outputs) / bandwidth
              : 0;
      const double bound = std::max(compute, mem) + reduce;
      if (bound < best) {
        best = bound;
        chosen = {compute, mem, reduce};
      }
    }
  }
  return chosen;
}

double GemmModel::analytical_s(const GemmShape& s) const {
  const Terms t = terms(s);
  return eff_.overhead_s + p_norm(t.compute, t.memory, eff_.blend) + t.reduce;
}

double GemmModel::clock_elasticity(const GemmShape& s) const {
  const Terms t = terms(s);
  const double bound = p_norm(t.compute, t.memory, eff_.blend);
  const double total = eff_.overhead_s + bound + t.reduce;
  if (!(t.compute > 0) || !(total > 0)) return 0;
  // d log ||(c, m)||_p / d log c = c^p / (c^p + m^p), computed as (c / norm)^p.
  return bound / total * std::pow(t.compute / bound, eff_.blend);
}

void GemmModel::set_measurements(std::vector<GemmPoint> points) {
  // Combine repeated shapes (several calibration files) by their geometric mean, and their clocks
  // by the geometric mean of those recorded.
  struct Repeats {
    GemmShape shape;
    double log_time = 0, log_mhz = 0;
    int times = 0, clocks = 0;
  };
  std::map<uint64_t, Repeats> merged;
  for (const auto& p : points) {
    if (!(p.time_s > 0)) continue;
    Repeats& r = merged[gemm_shape_hash(p.shape)];
    r.shape = p.shape;
    r.log_time += std::log(p.time_s);
    r.times += 1;
    if (p.sm_mhz > 0) {
      r.log_mhz += std::log(p.sm_mhz);
      r.clocks += 1;
    }
  }
  points_.clear();
  features_.clear();
  exact_.clear();
  for (auto& [hash, r] : merged) {
    GemmPoint p{r.shape, std::exp(r.log_time / r.times),
                r.clocks > 0 ? std::exp(r.log_mhz / r.clocks) : 0};
    exact_[hash] = points_.size();
    features_.push_back(feature(p, false));
    points_.push_back(p);
  }
  screen_glitches();
  add_companion_features();
}

GemmModel::Feature GemmModel::feature(const GemmPoint& p, bool companion) const {
  Feature f;
  f.x[0] = std::log2(double(p.shape.m));
  f.x[1] = std::log2(double(p.shape.n));
  f.x[2] = std::log2(double(p.shape.k));
  f.x[3] = std::log2(double(p.shape.batch));
  f.layout = layout_of(p.shape);
  // Against this dtype's analytical time: the companion's time stands for this dtype's.
  f.log_ratio = std::log(p.time_s / analytical_s(p.shape));
  f.companion = companion;
  return f;
}

void GemmModel::set_companion(const GemmModel& other) {
  companion_points_.clear();
  std::set<GemmShape> glitches(other.glitch_shapes_.begin(), other.glitch_shapes_.end());
  for (const GemmPoint& p : other.points_)
    if (!glitches.count(p.shape)) companion_points_.push_back(p);
  std::erase_if(features_, [](const Feature& f) { return f.companion; });
  add_companion_features();
}

void GemmModel::add_companion_features() {
  for (const GemmPoint& p : companion_points_) features_.push_back(feature(p, true));
}

void GemmModel::screen_glitches() {
  glitch_shapes_.clear();
  const size_t n = features_.size();
  if (n <= kGlitchNeighbours) return;
  // The kGlitchNeighbours nearest of each shape, found by sweeping outwards from it along the
  // shapes sorted by log2 m: once log2 m alone is further than the current farthest of the
  // nearest, no shape beyond can be nearer. Equidistant neighbours are taken in the order of
  // their coordinates (then layout), so the screen does not depend on the library's selection
  // algorithm or on the order of the points.
  auto before = [&](size_t a, size_t b) {
    const Feature &fa = features_[a], &fb = features_[b];
    for (int j = 0; j < 4; ++j)
      if (fa.x[j] != fb.x[j]) return fa.x[j] < fb.x[j];
    return fa.layout < fb.layout;
  };
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), before);
  std::vector<size_t> rank(n);
  for (size_t r = 0; r < n; ++r) rank[order[r]] = r;

  struct Near {
    double d2;
    size_t index;
  };
  // A max-heap on (distance, coordinate order): its top is the farthest of the nearest so far.
  auto farther = [&](const Near& a, const Near& b) {
    return a.d2 != b.d2 ? a.d2 < b.d2 : rank[a.index] < rank[b.index];
  };
  std::vector<bool> glitch(n, false);
  std::vector<Near> heap;
  std::array<double, kGlitchNeighbours> ratios{};
  for (size_t r = 0; r < n; ++r) {
    const Feature& f = features_[order[r]];
    heap.clear();
    auto offer = [&](size_t other) {
      const Feature& g = features_[other];
      const Near c{distance2(f.x, f.layout, g.x, g.layout), other};
      if (heap.size() < kGlitchNeighbours) {
        heap.push_back(c);
        std::push_heap(heap.begin(), heap.end(), farther);
      } else if (farther(c, heap.front())) {
        std::pop_heap(heap.begin(), heap.end(), farther);
        heap.back() = c;
        std::push_heap(heap.begin(), heap.end(), farther);
      }
    };
    // Beyond this gap in log2 m a shape is no nearer than the farthest kept one.
    auto within = [&](size_t other) {
      if (heap.size() < kGlitchNeighbours) return true;
      const double dm = features_[other].x[0] - f.x[0];
      return dm * dm <= heap.front().d2;
    };
    for (size_t lo = r, hi = r + 1; lo > 0 || hi < n;) {
      const bool down = lo > 0 && within(order[lo - 1]);
      const bool up = hi < n && within(order[hi]);
      if (!down && !up) break;
      if (down) offer(order[--lo]);
      if (up) offer(order[hi++]);
    }
    for (size_t j = 0; j < kGlitchNeighbours; ++j) ratios[j] = features_[heap[j].index].log_ratio;
    std::sort(ratios.begin(), ratios.end());
    static_assert(kGlitchNeighbours % 2 == 0, "two middles");
    const double median = 0.5 * (ratios[kGlitchNeighbours / 2 - 1] + ratios[kGlitchNeighbours / 2]);
    glitch[order[r]] = f.log_ratio - median > kGlitchLogRatio;
    if (glitch[order[r]]) glitch_shapes_.push_back(points_[order[r]].shape);
  }
  std::vector<Feature> kept;
  for (size_t i = 0; i < n; ++i)
    if (!glitch[i]) kept.push_back(features_[i]);
  features_ = std::move(kept);
}

double GemmModel::log_correction(const GemmShape& s) const {
  if (features_.empty()) return 0;
  const double q[4] = {std::log2(double(s.m)), std::log2(double(s.n)), std::log2(double(s.k)),
                       std::log2(double(s.batch))};
  const int layout = layout_of(s);
  std::vector<std::pair<double, size_t>> near;
  near.reserve(features_.size());
  for (size_t i = 0; i < features_.size(); ++i) {
    const Feature& f = features_[i];
    near.emplace_back(distance2(f.x, f.layout, q, layout, f.companion), i);
  }
  const size_t k = std::min(kNeighbours, near.size());
  std::partial_sort(near.begin(), near.begin() + k, near.end());
  const double nearest = std::sqrt(near[0].first);
  const double h = std::max(kBandwidth, nearest);

  // Unknowns: intercept, 4 slopes, one offset per other layout among the neighbours.
  int layout_col[4] = {-1, -1, -1, -1};
  size_t n = 5;
  std::vector<Row> rows(k);
  for (size_t i = 0; i < k; ++i) {
    const Feature& f = features_[near[i].second];
    if (f.layout != layout && layout_col[f.layout] < 0)
      layout_col[f.layout] = static_cast<int>(n++);
    rows[i].z[0] = 1;
    for (int j = 0; j < 4; ++j) rows[i].z[1 + j] = f.x[j] - q[j];
    if (f.layout != layout) rows[i].z[layout_col[f.layout]] = 1;
    rows[i].y = f.log_ratio;
    rows[i].w = std::exp(-near[i].first / (h * h));
  }
  Coefficients coef{};
  if (!local_fit(rows, n, coef)) {
    double wsum = 0, lsum = 0;
    for (const Row& r : rows) wsum += r.w, lsum += r.w * r.y;
    return lsum / wsum;
  }
  // One robust pass (as LOESS does): neighbours far off the local trend, such as a shape on which
  // the library picked an unlucky kernel, lose their weight.
  std::vector<double> dev;
  for (const Row& r : rows) dev.push_back(std::abs(r.y - predict(coef, r, n)));
  std::vector<double> sorted = dev;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  const double scale = 6 * std::max(sorted[sorted.size() / 2], 0.005);
  for (size_t i = 0; i < k; ++i) {
    const double u = std::min(1.0, dev[i] / scale);
    rows[i].w *= (1 - u * u) * (1 - u * u);
  }
  Coefficients robust{};
  if (local_fit(rows, n, robust)) coef = robust;
  double value = coef[0];
  // No extrapolation beyond the (layout-adjusted) ratios of the neighbours that carry weight.
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, wmax = 0;
  for (const Row& r : rows) wmax = std::max(wmax, r.w);
  for (const Row& r : rows) {
    if (r.w < 1e-3 * wmax) continue;
    double adjusted = r.y;
    for (size_t j = 5; j < n; ++j) adjusted -= r.z[j] * coef[j];
    lo = std::min(lo, adjusted);
    hi = std::max(hi, adjusted);
  }
  if (lo <= hi) value = std::clamp(value, lo, hi);
  if (nearest > kFadeStart) value *= std::exp(-std::pow((nearest - kFadeStart) / kFadeScale, 2));
  return value;
}

double GemmModel::time_s(const GemmShape& s) const {
  if (auto it = exact_.find(gemm_shape_hash(s));
      it != exact_.end() && points_[it->second].shape == s)
    return points_[it->second].time_s;
  return analytical_s(s) * std::exp(log_correction(s));
}

}  // namespace hetplan
