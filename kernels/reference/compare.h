// How a kernel's output is judged against its CPU reference. Used by the GPU checks and tested on
// the CPU, so the judge itself is known to catch what it must (NaN, unwritten outputs, one bad
// row).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "kernels/dtype.h"

namespace hetplan::kernels {

// Both bounds must hold. rel_l2 bounds ‖got − ref‖₂ / ‖ref‖₂ (METHOD.md: fp32 far under 1e-3,
// bf16 operands 1e-3..1e-2); elementwise bounds max |got − ref| / (|ref| + rms(ref)), which
// catches a few wrong elements that a norm over many would dilute.
// `floor_rms`: the magnitude below which the reference counts as zero: errors are judged
// relative to max(rms(ref), floor_rms). An output whose exact value is 0 (attention's dq and dk
// for a single key) gets the scale of the other outputs or inputs this way, instead of a
// relative error of x / 0.
struct Tolerance {
  double rel_l2;
  double elementwise;
  double floor_rms = 0;
};

// Default bounds for an output stored as `t` and computed in fp32: the rounding of the store
// (2^-9 relative for bf16, 2^-12 for fp16) with headroom for a different summation order.
Tolerance default_tolerance(DType t);

// The verdict on one output tensor.
struct Comparison {
  bool passed = true;
  int64_t count = 0;             // elements compared
  int64_t nonfinite = 0;         // NaN or Inf in `got` (poisoned outputs that were never written)
  int64_t first_nonfinite = -1;  // index of the first one, -1 when none
  double rel_l2 = 0;             // ‖got − ref‖₂ / max(‖ref‖₂, floor_rms √count)
  double elementwise = 0;        // max |got − ref| / (|ref| + max(rms(ref), floor_rms))
  int64_t worst_index = -1;      // where `elementwise` was reached
  double worst_got = 0, worst_want = 0;
  Tolerance tolerance{};
  std::string name;

  // One line: name, errors against their bounds, the worst element.
  std::string summary() const;
};

// Compares `got` (the kernel's output, widened to fp32) with `want` (the reference, in double).
// A non-finite value in `got` fails unless `want` holds a non-finite value at the same index.
Comparison compare(std::string name, std::span<const float> got, std::span<const double> want,
                   Tolerance tol);

// Several outputs: passes when all pass; the summary lists each.
struct CheckResult {
  bool passed = true;
  std::string detail;  // one line per output compared, or why the check could not run

  void add(const Comparison& c);
  void fail(const std::string& why);
  double worst_rel_l2 = 0;  // largest rel_l2 over the outputs
};

}  // namespace hetplan::kernels
