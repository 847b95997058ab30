// Command line of hetplan_kernel_metrics (no CUDA: the CPU tests cover it).
#pragma once

#include <string>
#include <vector>

namespace hetplan::profiler::metrics {

// Which cases to profile and at which of their shapes: "bench" (all benchmark shapes), "first",
// "last" (the first or last benchmark shape) or "test" (the small test shapes).
struct Pick {
  std::string filter;  // a substring of a case name, or a case family
  std::string shapes = "bench";
};

// The cuBLASLt GEMM anchor, a pseudo-case beside the registry's (square bf16 product).
inline constexpr const char* kGemmCaseName = "cublaslt_gemm_bf16";
inline constexpr long long kGemmAnchorSize = 4096;

struct Options {
  std::vector<Pick> picks;          // what to profile; default_picks() when no --filter
  std::vector<std::string> groups;  // metric groups; empty: all
  std::string json_path;
  bool counters = true;  // false: --no-counters (event timings only)
  bool list = false;     // list the cases and shapes a run would profile, run nothing
  bool list_metrics = false;
  bool help = false;
  int runs = 10;           // event-timed runs per case
  double max_seconds = 0;  // stop starting cases after this long (0: no limit)
  int device = 0;
};

// The default selection: the attention backward (bf16) at the benchmark's shapes, the copy probe
// at its largest (a memory-bound anchor whose DRAM bytes are known), the cuBLASLt GEMM anchor,
// and the attention forward at the benchmark's shapes.
std::vector<Pick> default_picks();

// Parses argv[1..]. Throws InputError naming the option and what it expects.
Options parse_options(const std::vector<std::string>& args);
std::string usage();

// Whether the case `name` of `family` is selected by `filter`.
bool pick_matches(const std::string& filter, const std::string& name, const std::string& family);
// Indices of the shapes `policy` keeps out of `count` (bench) shapes; "test" is resolved by the
// caller (it keeps every test shape).
std::vector<size_t> pick_shape_indices(const std::string& policy, size_t count);

}  // namespace hetplan::profiler::metrics
