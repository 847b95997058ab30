// The measurements file: iteration times and peak memory of real training runs, each tied to the
// strategy it ran. Written by `hetplan measure` (the PyTorch reference harness) and by the log
// importers (`hetplan import --format megatron|deepspeed`), read by `hetplan report`. Versioned
// JSON; see docs/formats.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/clocks.h"
#include "costmodel/document.h"
#include "costmodel/stats.h"

namespace hetplan {

inline constexpr const char* kMeasurementsFormat = "hetplan-measurements";
inline constexpr int kMeasurementsSchemaVersion = 1;

// Where and how the runs were made: host, GPU, date, command, framework and library versions.
struct MeasurementContext {
  std::string host, date, command, hetplan_version;
  std::string gpu_type;  // hetplan GPU type key (presets/gpus), e.g. "h100-sxm"
  std::string gpu_name;  // as the driver reports it
  int64_t gpu_count = 0;
  std::string framework;                        // "pytorch", "megatron-lm", "deepspeed", ...
  std::string framework_version;                // as the framework reports it
  std::map<std::string, std::string> versions;  // other libraries: torch, cuda, nccl, driver, ...
  std::vector<std::string> inputs;              // the logs an importer read
  std::string notes;
};

// What a peak-memory figure counts. "allocated": the framework's allocated tensors at their peak
// (torch.cuda.max_memory_allocated); "reserved": its caching allocator's pools
// (max_memory_reserved); "device": the whole device in use (NVML / nvidia-smi, with the CUDA
// context and library buffers).
inline constexpr const char* kPeakMemoryKinds[] = {"allocated", "reserved", "device"};

// One measured run of one strategy.
struct Measurement {
  std::string model;    // model preset or name, as `hetplan predict --model` was given it
  std::string cluster;  // cluster preset or description; "" when not known
  Json strategy;        // a strategy object (search/strategy.h), read with strategy_from_json
  std::optional<Distribution> iteration_s;  // absent only when the run failed (oom or error)
  std::vector<double> iteration_samples_s;  // the kept iterations, when the writer keeps them
  int64_t warmup_iterations = 0;            // iterations skipped before the distribution
  std::vector<double> peak_memory_bytes;    // per pipeline stage or rank; empty = not measured
  std::string peak_memory_kind = "allocated";
  std::string source;  // "measured:<harness>" or "imported:<tool>"
  bool oom = false;    // the run ran out of device memory
  std::string error;   // another failure, when it did not complete
  std::string origin;  // where it came from inside the inputs ("train.log:120-480")
  std::string notes;
  // The GPU's SM clock during the timed iterations (NVML; costmodel/clocks.h), where the harness
  // read it.
  std::optional<ClockSummary> clocks;
  // Keys whose values the writer filled in by default rather than read from the run: of the
  // measurement ("peak_memory_kind") or of its strategy ("strategy.grad_accumulation_fusion").
  std::vector<std::string> assumed;
  std::string key_path;  // where it was read ("measurements[3]"); set by the reader
};

struct MeasurementsFile {
  MeasurementContext context;
  std::vector<Measurement> measurements;
  std::string origin;  // path it was read from
};

Json to_json(const MeasurementContext& c);
Json to_json(const Measurement& m);
Json to_json(const MeasurementsFile& file);

MeasurementContext measurement_context_from_json(ObjectReader r);
Measurement measurement_from_json(ObjectReader r);
MeasurementsFile measurements_from_document(const Document& doc);

MeasurementsFile load_measurements(const std::filesystem::path& path);
// Writes atomically (temporary file, then rename).
void save_measurements(const MeasurementsFile& file, const std::filesystem::path& path);

// Largest per-stage or per-rank peak; 0 when not measured.
double max_peak_memory(const Measurement& m);

}  // namespace hetplan
