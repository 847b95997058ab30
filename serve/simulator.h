// Discrete-event simulation of serving a request trace on a placement (serve/trace.h: Poisson
// arrivals with lengths around their means, or Helix's generator), per-request paths chosen by the
// flow's IWRR
// weights with KV-cache admission, batched execution on every machine with the per-layer times,
// and links with bandwidth (FIFO) and latency. Reports throughput, prompt latency (time to the
// first token) and per-token decode latency.
#pragma once

#include <cstdint>

#include "serve/capacity.h"
#include "serve/routing.h"
#include "serve/trace.h"

namespace hetplan::serve {

struct SimulationConfig {
  int64_t requests = 1000;
  double rate_requests_per_s = 1;  // Poisson arrival rate
  // Lengths are uniform over [mean / 2, 3 mean / 2] (integers, at least 1).
  double mean_prompt_tokens = 750;
  double mean_output_tokens = 240;
  uint64_t seed = 1;
  // The model's context: a drawn request longer than this gets a shorter output (then prompt).
  // 0: no cap.
  int64_t max_request_tokens = 0;
  // Decode batch per machine and step: the capacity model's typical batch (true: the simulation
  // can never beat the max flow) or the largest batch the profile measured (false: optimistic,
  // like vLLM's max_num_seqs).
  bool model_batch_limit = true;
  // The trace to serve; empty: poisson_trace() from the fields above.
  std::vector<TraceRequest> trace;
  // > 0: also measure as Helix's simulator does, over [0, window_s]: output tokens after each
  // request's first that complete in it, per second, and the prompt latency of the requests
  // whose first token comes in it.
  double window_s = 0;
};

// Mean, median and 95th percentile of a latency (seconds).
struct LatencyStats {
  double mean_s = 0, p50_s = 0, p95_s = 0;
};

struct SimulationResult {
  int64_t requests = 0;
  int64_t completed = 0;
  int64_t rejected = 0;                       // could never fit the KV cache of any path
  double duration_s = 0;                      // first arrival to last completion
  double throughput_tokens_per_s = 0;         // prompt + output tokens over the duration
  double decode_throughput_tokens_per_s = 0;  // output tokens over the duration
  LatencyStats prompt_latency;                // arrival to first token
  LatencyStats decode_latency;                // per output token after the first
  LatencyStats admission_wait;                // arrival to admission (KV cache)
  int64_t batches = 0;
  double window_s = 0;                               // 0: no window measured
  double window_decode_throughput_tokens_per_s = 0;  // decode tokens done in the window / window
  LatencyStats window_prompt_latency;                // first tokens in the window
};

// Simulates `config` on `placement` with the routing from its max flow.
SimulationResult simulate_serving(const ServingProblem& problem, const Placement& placement,
                                  const RoutingTable& routing, const SimulationConfig& config);

}  // namespace hetplan::serve
