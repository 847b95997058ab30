// Quantities whole by meaning (bytes, counts) that the cost model computes in double, written to
// JSON as integers: scripts and other tools read "total_bytes": 3371199488, not 3371199488.0.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "costmodel/document.h"

namespace hetplan {

// `v` rounded to the nearest whole number (halves away from zero, std::llround) as a JSON integer.
// The cost model computes bytes in double (a ZeRO shard divides by dp, a tensor-parallel shard by
// tp, a DeepSpeed log gives GiB to two decimals), so a byte count may carry a fraction; the nearest
// whole byte is within half a byte of it. A value that is not finite or does not fit in int64
// stays a JSON number (nlohmann writes a non-finite one as null, as before).
inline Json whole_number_json(double v) {
  if (!std::isfinite(v) || std::fabs(v) >= kInt64DoubleLimit) return Json(v);
  return Json(static_cast<int64_t>(std::llround(v)));
}

// Each value as whole_number_json does, in a JSON array.
inline Json whole_numbers_json(const std::vector<double>& values) {
  Json out = Json::array();
  for (double v : values) out.push_back(whole_number_json(v));
  return out;
}

}  // namespace hetplan
