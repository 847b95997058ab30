#include "serve/trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <string>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan::serve {
namespace {

namespace fs = std::filesystem;

// Uniform in [0, 1) from 53 random bits.
double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

int uniform_length(std::mt19937_64& rng, double mean) {
  const int lo = std::max(1, static_cast<int>(std::ceil(mean / 2)));
  const int hi = std::max(lo, static_cast<int>(std::floor(1.5 * mean)));
  return lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

// Whole numbers >= 0 separated by commas, one row per non-empty line.
std::vector<std::vector<double>> read_rows(const fs::path& path, size_t columns,
                                           const char* expected) {
  std::ifstream in(path);
  if (!in) throw InputError(path.string(), "", "cannot open the file (does it exist?)");
  std::vector<std::vector<double>> rows;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::vector<double> row;
    size_t at = 0;
    bool ok = true;
    while (ok && at <= line.size()) {
      const size_t comma = std::min(line.find(',', at), line.size());
      const std::string cell = line.substr(at, comma - at);
      size_t used = 0;
      double x = 0;
      try {
        x = std::stod(cell, &used);
      } catch (const std::exception&) {
        ok = false;
      }
      ok = ok && cell.find_first_not_of(" \t", used) == std::string::npos && std::isfinite(x) &&
           x >= 0 && x == std::floor(x);
      row.push_back(x);
      at = comma + 1;
    }
    if (!ok || row.size() != columns)
      throw InputError(path.string(), fmt::format("line {}", line_no),
                       fmt::format("expected {}, found '{}'", expected, line));
    rows.push_back(std::move(row));
  }
  if (rows.empty()) throw InputError(path.string(), "", fmt::format("no rows ({})", expected));
  return rows;
}

}  // namespace

std::vector<TraceRequest> poisson_trace(int64_t requests, double rate_requests_per_s,
                                        double mean_prompt_tokens, double mean_output_tokens,
                                        int64_t max_request_tokens, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TraceRequest> trace;
  trace.reserve(std::max<int64_t>(requests, 0));
  double t = 0;
  for (int64_t r = 0; r < requests; ++r) {
    t += -std::log(1.0 - uniform(rng)) / rate_requests_per_s;
    TraceRequest req;
    req.arrival_s = t;
    req.prompt_tokens = uniform_length(rng, mean_prompt_tokens);
    req.output_tokens = uniform_length(rng, mean_output_tokens);
    if (max_request_tokens > 1 && req.prompt_tokens + req.output_tokens > max_request_tokens) {
      req.output_tokens =
          static_cast<int>(std::max<int64_t>(1, max_request_tokens - req.prompt_tokens));
      req.prompt_tokens = static_cast<int>(max_request_tokens - req.output_tokens);
    }
    trace.push_back(req);
  }
  return trace;
}

double MeasuredTrace::mean_request_tokens() const {
  double sum = 0;
  for (const auto& [prompt, output] : lengths) sum += prompt + output;
  return lengths.empty() ? 0 : sum / lengths.size();
}

MeasuredTrace read_measured_trace(const fs::path& lengths_csv, const fs::path& arrivals_csv) {
  MeasuredTrace t;
  for (const auto& row :
       read_rows(lengths_csv, 2, "'prompt tokens,output tokens' (whole numbers)")) {
    if (row[0] < 1 || row[1] < 1 || row[0] > 1e7 || row[1] > 1e7)
      throw InputError(
          lengths_csv.string(), "",
          fmt::format("expected lengths of 1 to 1e7 tokens, found {:g},{:g}", row[0], row[1]));
    t.lengths.emplace_back(static_cast<int>(row[0]), static_cast<int>(row[1]));
  }
  double sum = 0;
  for (const auto& row : read_rows(arrivals_csv, 1, "one whole number of requests")) {
    t.interval_requests.push_back(row[0]);
    sum += row[0];
  }
  if (!(sum > 0))
    throw InputError(arrivals_csv.string(), "", "expected some interval with requests > 0");
  return t;
}

std::vector<TraceRequest> helix_trace(const MeasuredTrace& measured, double rate_requests_per_s,
                                      double duration_s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  double series_mean = 0;
  for (double x : measured.interval_requests) series_mean += x;
  series_mean /= measured.interval_requests.size();
  const double scale = rate_requests_per_s * measured.interval_s / series_mean;
  const int64_t intervals =
      static_cast<int64_t>(std::ceil(duration_s / measured.interval_s - 1e-9));
  std::uniform_int_distribution<size_t> pick_rate(0, measured.interval_requests.size() - 1);
  std::uniform_int_distribution<size_t> pick_length(0, measured.lengths.size() - 1);
  std::vector<TraceRequest> trace;
  double carry = 0;
  for (int64_t i = 0; i < intervals; ++i) {
    const double raw = scale * measured.interval_requests[pick_rate(rng)] + carry;
    const double count = std::nearbyint(raw);
    carry = raw - count;
    std::vector<double> times;
    for (int64_t r = 0; r < static_cast<int64_t>(count); ++r)
      times.push_back((i + uniform(rng)) * measured.interval_s);
    std::sort(times.begin(), times.end());
    for (double t : times) {
      const auto& [prompt, output] = measured.lengths[pick_length(rng)];
      trace.push_back({t, prompt, output});
    }
  }
  return trace;
}

}  // namespace hetplan::serve
