// Where a calibration file's numbers came from (its `context`): the source, the GPU and the
// software it ran on, the command, citations. docs/formats.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "costmodel/document.h"

namespace hetplan {

// Where the numbers came from. `source` is "measured", "datasheet" or "imported:<tool>".
struct Provenance {
  std::string source;
  std::string gpu_type;   // hetplan GPU type key (presets/gpus), e.g. "h100-sxm"
  std::string gpu_name;   // as the driver reports it
  std::string node_type;  // node preset, when the file describes a node's links
  int64_t gpu_count = 0;  // GPUs visible to the calibration
  int64_t sm_count = 0;
  int64_t sm_clock_mhz = 0;
  int64_t memory_clock_mhz = 0;
  int64_t memory_bytes = 0;
  int64_t l2_bytes = 0;
  std::string driver, cuda_runtime, cublas, nccl, cupti;
  std::string host, date, command, hetplan_version;
  std::string notes;  // "; "-separated
  // Free-form citations for datasheet and imported figures: figure name -> source.
  std::map<std::string, std::string> citations;

  void add_note(std::string_view note) {
    if (note.empty()) return;
    if (!notes.empty()) notes += "; ";
    notes += note;
  }
};

Json to_json(const Provenance& p);
Provenance provenance_from_json(ObjectReader r);
// The GPU kind a file's context names: gpu_type, else gpu_name; empty when neither is set.
std::string context_gpu_kind(const Provenance& context);

}  // namespace hetplan
