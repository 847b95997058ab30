// What torchtitan's two configuration forms share: the Python Trainer.Config of current torchtitan
// (torchtitan_export.cpp) and the TOML job config of releases before its February 2026 refactor
// (torchtitan_toml_export.cpp). Both build the pipeline with torch.distributed.pipelining.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "report/export/exporters.h"

namespace hetplan::export_detail::torchtitan {

// The torch.distributed.pipelining schedule for the strategy's; where there is none, the nearest
// one with the same stages per rank and placement, and a "not expressed" entry.
std::string schedule_name(const Strategy& s, ExportResult& out);

// "Not expressed" when PyTorch's schedule refuses the strategy's micro-batches per step
// (torch/distributed/pipelining/schedules.py): 1F1B needs at least pp of them; Interleaved1F1B and
// InterleavedZeroBubble run them in max(1, M / pp) rounds and need M to be a multiple of that.
void check_microbatches(const Strategy& s, std::string_view schedule, ExportResult& out);

// A stage's torchtitan module names: tok_embeddings, layers.<i>, norm and `head` (the output
// projection: "lm_head" in current torchtitan, "output" before 2026-04-27).
std::vector<std::string> stage_modules(const StageBlocks& b, std::string_view head);

// The notes both forms add for what torchtitan runs differently from hetplan's prediction
// (selective recomputation, unfused attention, gradient reduction, gradient accumulation).
void common_notes(const Strategy& s, ExportResult& out);

// Why neither form writes a strategy's LoRA.
inline constexpr std::string_view kTorchtitanLora =
    "torchtitan's LoRAConverter (torchtitan/components/lora.py at b5bcd76c6) adapts wq, wk and wv "
    "apart and keeps a column-parallel layer's A replicated: not the adapters hetplan predicted";
// What the current Trainer.Config cannot say of context and expert parallelism, and the
// low-precision recipe, which torchtitan applies where the model registry builds the model
// (quantization=[...Converter.Config()]): instructions with the converters to name there.
void python_config_notes(const ModelSpec& model, const Strategy& s, ExportResult& out);

// The model shape to pick in torchtitan, which defines shapes in code: "24 layers, hidden 1024, 16
// heads", and a remark when the model has no rotary embeddings (torchtitan's models do).
std::string shape_text(const LayerSpec& layer, int64_t blocks);

// "# " comment lines: the notes, what is not expressed, the instructions and the placement (as
// lines, and as hetplan_rank_devices / hetplan_node_rank). Fills out.placement.
std::string comment_lines(const Strategy& s, const ExportOptions& o, ExportResult& out);

}  // namespace hetplan::export_detail::torchtitan
