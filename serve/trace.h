// Request traces for the serving simulation: arrival times and lengths. Two generators: Poisson
// arrivals with lengths uniform around their means (hetplan's default), and Helix's (its
// artifact's simulator/trace_generator): lengths drawn as pairs from a measured trace (Azure's
// LLM inference conversation trace), arrivals drawn per interval from a measured arrival-rate
// series rescaled to the wanted mean, each interval's arrivals uniform inside it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <utility>
#include <vector>

namespace hetplan::serve {

struct TraceRequest {
  double arrival_s = 0;
  int prompt_tokens = 0;
  int output_tokens = 0;
};

// `requests` Poisson arrivals at `rate_requests_per_s`; prompt and output lengths uniform over
// [mean / 2, 3 mean / 2] (integers, at least 1); a request longer than `max_request_tokens` (> 1)
// gets a shorter output, then prompt.
std::vector<TraceRequest> poisson_trace(int64_t requests, double rate_requests_per_s,
                                        double mean_prompt_tokens, double mean_output_tokens,
                                        int64_t max_request_tokens, uint64_t seed);

// What Helix's generator draws from.
struct MeasuredTrace {
  std::vector<std::pair<int, int>> lengths;  // (prompt, output) tokens of measured requests
  std::vector<double> interval_requests;     // requests that arrived in each interval
  double interval_s = 3;                     // Helix's Azure series: 1200 intervals of 3 s
  double mean_request_tokens() const;        // mean prompt + output over `lengths`
};

// Reads the lengths (CSV lines "prompt,output") and the arrival series (one count per line).
// Throws InputError naming the file and line for bad input.
MeasuredTrace read_measured_trace(const std::filesystem::path& lengths_csv,
                                  const std::filesystem::path& arrivals_csv);

// Helix's generator over `duration_s` (whole intervals): the series is rescaled to
// `rate_requests_per_s` on average; each interval draws one of its values at random, rounds it
// carrying the remainder to the next interval, and places that many arrivals uniformly inside it,
// each with a (prompt, output) pair drawn at random from `lengths`.
std::vector<TraceRequest> helix_trace(const MeasuredTrace& measured, double rate_requests_per_s,
                                      double duration_s, uint64_t seed);

}  // namespace hetplan::serve
