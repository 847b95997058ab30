// A gate that holds a stream while the host enqueues a region, so that the region's kernels run
// back to back on the device however slowly the host launches them. CUPTI's kernel tracing makes
// every launch cost the host tens of microseconds (measured on the H100, 2026-11-23: 21 us of idle
// device per launch of a 3 us GEMM; ten traced launches of a 172 us product took 5.7 ms); without
// the gate the traced region's time is the host's, and the event-vs-CUPTI cross-check compares
// nothing.
//
// The gate is a one-thread kernel that spins until the host opens it (a flag in mapped pinned
// memory) or until its timeout passes, so that a region larger than the stream's launch queue
// (the host then blocks in a launch while the device waits for the host) cannot hang: it runs on
// ungated, and `expired()` says so. The same idea as nvbench's blocking kernel; this is our own.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace hetplan::profiler {

// Name fragment of the gate's kernel, so that traces can leave it out.
inline constexpr const char* kStreamGateKernel = "hold_stream";

class StreamGate {
 public:
  // Enqueues the closed gate on `stream`.
  StreamGate(cudaStream_t stream, double timeout_s = 0.2);
  // Opens the gate if still closed and waits for the stream.
  ~StreamGate();
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;

  // Lets the stream run what was enqueued behind the gate.
  void open();
  // After the stream has passed the gate: whether it ran out of time before open() (the region
  // then did not run back to back).
  bool expired() const;

 private:
  cudaStream_t stream_;
  volatile int* flags_ = nullptr;  // [0]: opened by the host; [1]: the gate timed out
  bool opened_ = false;
};

}  // namespace hetplan::profiler
