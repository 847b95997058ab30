#include "profiler/common/gemm_plan.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace hetplan::profiler {
namespace {

// Rough dense rates on an H100 SXM for the estimate only (datasheet peaks de-rated to what
// cuBLAS reaches on large shapes; the progress ETA corrects itself from real times).
double rate_flops(Dtype d) {
  switch (d) {
    case Dtype::kFp8:
      return 1000e12;
    case Dtype::kBf16:
    case Dtype::kFp16:
      return 600e12;
    case Dtype::kTf32:
      return 300e12;
    case Dtype::kFp32:
    case Dtype::kFp4:  // never swept (profiler/common/dtypes.cpp refuses it)
      return 50e12;
  }
  return 50e12;
}

constexpr double kBandwidth_Bps = 3.0e12;
constexpr double kLaunch_s = 4e-6;
// Per shape: heuristic query, check, CUPTI trace, pilot, and the capture and instantiation of
// its timing graph. Measured on the H100 (2026-11-23): the 3888-shape grid took 91-101 s with
// eager timing, which 4 ms per shape predicted (96 s), and 140 s graph-timed: 11 ms more each.
constexpr double kOverhead_s = 15e-3;

// Largest FLOPs per product kept in the grid (about 25 ms per launch at the rates above).
double flop_cap(Dtype d) { return rate_flops(d) * 25e-3; }

std::vector<int64_t> powers_of_four(int64_t lo, int64_t hi) {
  std::vector<int64_t> out;
  for (int64_t v = lo; v <= hi; v *= 4) out.push_back(v);
  return out;
}

void add_cube(std::vector<GemmCase>& out, Dtype d, const std::vector<int64_t>& ms,
              const std::vector<int64_t>& ns, const std::vector<int64_t>& ks, bool ta, bool tb) {
  for (int64_t m : ms)
    for (int64_t n : ns)
      for (int64_t k : ks) {
        GemmCase c{d, GemmShape{m, n, k, 1, ta, tb}, "grid"};
        if (c.shape.flops() <= flop_cap(d)) out.push_back(c);
      }
}

}  // namespace

std::vector<int64_t> log_sizes(int64_t lo, int64_t hi, bool half_steps) {
  std::vector<int64_t> out;
  for (int64_t p = lo; p <= hi; p *= 2) {
    out.push_back(p);
    if (half_steps && p * 2 <= hi) out.push_back(p + p / 2);
  }
  return out;
}

std::vector<GemmCase> gemm_grid(bool quick, const std::vector<Dtype>& dtypes) {
  std::vector<GemmCase> out;
  for (Dtype d : dtypes) {
    if (quick) {
      const std::vector<int64_t> s = d == Dtype::kBf16 ? std::vector<int64_t>{16, 128, 1024, 8192}
                                                       : std::vector<int64_t>{128, 1024, 8192};
      add_cube(out, d, s, s, s, true, false);
      continue;
    }
    const auto p2 = log_sizes(16, 16384, false);
    const auto p4 = powers_of_four(16, 16384);
    switch (d) {
      case Dtype::kBf16: {
        add_cube(out, d, log_sizes(16, 16384, true), p2, p2, true, false);
        // NN and NT (the backward's input- and weight-gradient GEMMs as frameworks call them) in
        // doubling steps. In 4x steps (until 2026-11-24) their held-out error on the H100 was
        // 3.94% / 12.86% (NN) and 6.65% / 17.23% (NT) median / p95 against TN's 1.96% / 7.71%:
        // their own trend, such as running ~10% slower than TN at K = 256 and ~2% at K = 1024,
        // showed only at points 4x apart (docs/benchmarks.md, "Still to be measured" item 16).
        const auto cube = log_sizes(256, 16384, false);
        add_cube(out, d, cube, cube, cube, false, false);
        add_cube(out, d, cube, cube, cube, false, true);
        break;
      }
      case Dtype::kFp16:
      case Dtype::kFp8:
      case Dtype::kTf32:
      case Dtype::kFp32:
        // M and N in doubling steps, K in 4x steps. With M in 4x steps too (tf32 and fp32 until
        // 2026-11-23) a held-out shape's nearest measured neighbours were 4x away, and the fit's
        // held-out error on the H100 was 7.4% (fp32) and 4.8% (tf32) median against 2.6% for
        // fp16. N in 4x steps: on the H100's bf16 table restricted to this grid, N in 2x steps
        // took the held-out error of the same 78 shapes from 2.81% / 9.22% (median / p95) to
        // 1.80% / 5.97%, where K in 2x steps as well gained nothing more (docs/benchmarks.md).
        add_cube(out, d, p2, p2, p4, true, false);
        break;
      case Dtype::kFp4:  // never swept (profiler/common/dtypes.cpp refuses it)
        break;
    }
  }
  return out;
}

std::string gemm_key(Dtype dtype, const GemmShape& s) {
  return fmt::format("gemm/{}/{}x{}x{}x{}/{}{}", to_string(dtype), s.m, s.n, s.k, s.batch,
                     s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N');
}

std::string gemm_shape_label(const GemmShape& s) {
  std::string text = fmt::format("{}x{}x{}", s.m, s.n, s.k);
  if (s.batch > 1) text += fmt::format(" x{}", s.batch);
  return text + fmt::format(" {}{}", s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N');
}

std::string gemm_label(Dtype dtype, const GemmShape& s) {
  return fmt::format("{} {}", to_string(dtype), gemm_shape_label(s));
}

double gemm_bytes(Dtype dtype, const GemmShape& s) {
  const double in = dtype_bytes(dtype);
  const double out = dtype == Dtype::kFp8 ? 2.0 : in;  // fp8 products write bf16
  return static_cast<double>(s.batch) *
         ((static_cast<double>(s.m) * s.k + static_cast<double>(s.k) * s.n) * in +
          static_cast<double>(s.m) * s.n * out);
}

double gemm_timing_target_s(bool quick) { return quick ? 5e-3 : 20e-3; }

double estimate_gemm_s(Dtype dtype, const GemmShape& shape, bool quick) {
  const double launch_s =
      std::max(shape.flops() / rate_flops(dtype), gemm_bytes(dtype, shape) / kBandwidth_Bps) +
      kLaunch_s;
  // Timed samples (at least 3 launches), plus 2 warm-up launches, the checked run and the traced
  // run.
  return kOverhead_s + std::max(gemm_timing_target_s(quick), 3 * launch_s) + 4 * launch_s;
}

Json case_to_spec(const GemmCase& c) {
  Json j = to_json(c.shape);
  j["dtype"] = to_string(c.dtype);
  j["origins"] = Json::array({c.origin});
  return j;
}

std::vector<PlanItem> gemm_items(const std::vector<GemmCase>& cases, const std::string& section,
                                 bool quick) {
  std::vector<PlanItem> out;
  std::map<std::string, size_t> index;
  for (const auto& c : cases) {
    const std::string key = gemm_key(c.dtype, c.shape);
    auto it = index.find(key);
    if (it != index.end()) {
      Json& origins = out[it->second].spec["origins"];
      if (std::find(origins.begin(), origins.end(), c.origin) == origins.end())
        origins.push_back(c.origin);
      continue;
    }
    index[key] = out.size();
    out.push_back({section, key, gemm_label(c.dtype, c.shape),
                   estimate_gemm_s(c.dtype, c.shape, quick), case_to_spec(c)});
  }
  return out;
}

GemmCase gemm_case_from_spec(const Json& spec) {
  GemmCase c;
  parse_dtype(spec.at("dtype").get<std::string>(), c.dtype);
  c.shape.m = spec.at("m").get<int64_t>();
  c.shape.n = spec.at("n").get<int64_t>();
  c.shape.k = spec.at("k").get<int64_t>();
  c.shape.batch = spec.at("batch").get<int64_t>();
  c.shape.trans_a = spec.at("trans_a").get<bool>();
  c.shape.trans_b = spec.at("trans_b").get<bool>();
  std::string origin;
  for (const auto& o : spec.at("origins")) {
    if (!origin.empty()) origin += ';';
    origin += o.get<std::string>();
  }
  c.origin = origin.empty() ? "grid" : origin;
  return c;
}

}  // namespace hetplan::profiler
