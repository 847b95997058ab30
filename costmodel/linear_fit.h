// The one fit of a fixed cost plus a rate, y = fixed + slope x, for every measured time hetplan
// reads that way: a memory-bound kernel (launch overhead + bytes / bandwidth), a collective
// (latency + bytes / bandwidth) and a layer's correction (fixed + rate x predicted op time).
//
// What is minimised: the sum over points of weight x ((fixed + slope x) / y - 1)^2, the relative
// residuals, so that a small time counts as much as a large one (`weight` is 1 unless a caller
// down-weights a stray point, as the collectives' Huber rounds do). Both terms are kept >= 0.
//
// The rule for when a fixed term can be told from a slope: the points' x must span a ratio of at
// least kFixedTermMinSpread = 1.25 (largest / smallest x, all x > 0). That is low enough for two
// tensor widths of a layer (tp 1 and 2: the shard's predicted ops shrink about 1.8x, not 2x) or
// two micro-batches to carry a line; its price is noise: two points at x and r x, each off by a
// relative sigma, give the fixed term an error of about sqrt(2) sigma r / (r - 1) of the smaller
// y: 7 sigma at r = 1.25, 3 sigma at r = 2.
// Where x spans less, the fit is a slope through the origin (y proportional to x). Where the free
// line's fixed term comes out negative, the best fit with it >= 0 is again the slope through the
// origin; where its slope comes out <= 0, it is a constant (slope 0); where both bounds are
// broken, the better of the two. A free fixed term within 1e-9 of the largest y is the rounding
// of an exact proportion: it is 0 and the line stands. `form` says which line was taken.
#pragma once

#include <cstdint>
#include <vector>

namespace hetplan {

// Largest over smallest x under which a fit has no fixed term (see above).
inline constexpr double kFixedTermMinSpread = 1.25;

// One measured point; x and y > 0 (others are skipped), `weight` >= 0 scales its residual.
struct FitPoint {
  double x = 0;
  double y = 0;
  double weight = 1;
};

// Which line the fit settled on.
enum class FitForm {
  kLine,           // fixed and slope both fitted, both >= 0
  kThroughOrigin,  // fixed = 0: x spans under kFixedTermMinSpread, or the free fixed term was < 0
  kConstant,       // slope = 0: the free slope was <= 0
  kNone,           // no usable point
};

struct FixedSlopeFit {
  double fixed = 0;
  double slope = 0;
  FitForm form = FitForm::kNone;
  double x_spread = 0;  // largest / smallest x of the usable points
  // The line without the bounds, where x spans enough (else both 0): why a bound was taken.
  double free_fixed = 0;
  double free_slope = 0;
  // |fit / y - 1| over the usable points, whatever their weights.
  int64_t points = 0;
  double rms_rel_residual = 0;
  double median_rel_residual = 0;
  double max_rel_residual = 0;

  double at(double x) const { return fixed + slope * x; }
  bool fixed_identifiable() const { return x_spread >= kFixedTermMinSpread; }
};

// Fits y = fixed + slope x to `points` by the rule above.
FixedSlopeFit fit_fixed_plus_slope(const std::vector<FitPoint>& points);
// The slope through the origin alone (fixed = 0), for a caller that needs a slope however the
// points lie (a kernel always has a bandwidth).
FixedSlopeFit fit_through_origin(const std::vector<FitPoint>& points);

}  // namespace hetplan
