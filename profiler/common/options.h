// Options of `hetplan calibrate`: parsed by cli/cmd_calibrate.cpp, read by every section.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "costmodel/dtype.h"

namespace hetplan::profiler {

struct CalibrateOptions {
  std::filesystem::path out;              // the calibration file; its journal is `out` + ".journal"
  bool quick = false;                     // coarse sweeps, under 2 minutes on an H100
  bool resume = false;                    // continue the journal instead of starting afresh
  bool gemm = false;                      // generic GEMM grid
  bool kernels = false;                   // our kernels (kernels/ registry) and the copy probe
  bool collectives = false;               // NCCL collectives, p2p and host-device copies (issue 6)
  std::vector<std::string> layer_models;  // --layers MODEL: layer GEMMs and per-layer F/B/W
  int device = 0;
  std::vector<Dtype> dtypes;  // empty: every dtype the GPU supports
  std::vector<int64_t> micro_batches = {1, 2, 4, 8};
  std::vector<int64_t> tensor_widths = {1, 2, 4, 8};
  int64_t seq_len = 0;        // 0: each model's own sequence length
  int64_t stop_after = 0;     // > 0: stop after that many new measurements, as on SIGINT (tests)
  bool cupti = true;          // --no-cupti turns kernel tracing off
  bool clocks = true;         // --no-clocks: do not read the SM clock during timed regions
  bool retry_failed = false;  // with --resume: measure journalled failures again
  std::string command_line;

  // No section flag given: run every section.
  bool all_sections() const { return !gemm && !kernels && !collectives && layer_models.empty(); }
  bool run_gemm() const { return gemm || all_sections(); }
  bool run_kernels() const { return kernels || all_sections(); }
  bool run_collectives() const { return collectives || all_sections(); }
  std::filesystem::path journal_path() const { return out.string() + ".journal"; }
};

// Models whose layers a run with no section flag calibrates (GEMMs and per-layer F/B/W): one
// GPT-2-style and one LLaMA-style block family, so both block styles are always measured.
inline const std::vector<std::string>& default_layer_models() {
  static const std::vector<std::string> kModels = {"gpt2-medium", "llama2-7b"};
  return kModels;
}

}  // namespace hetplan::profiler
