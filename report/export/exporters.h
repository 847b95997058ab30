// Exports of a strategy to the frameworks people train with: Megatron-LM command-line arguments,
// a DeepSpeed config and a torchtitan config. What a framework cannot express is said, never
// silently dropped: `approximations` were written as the nearest setting, `unsupported` could not
// be written at all. See docs/exports.md for the flag mapping.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "costmodel/model.h"
#include "report/stage_layout.h"
#include "search/strategy.h"

namespace hetplan {

struct ExportResult {
  std::string text;                         // the file
  std::vector<std::string> approximations;  // written, but not exactly what hetplan modelled
  std::vector<std::string> unsupported;     // could not be written
};

struct ExportOptions {
  // torchtitan: write pipeline_parallel_split_points (versions before module_fqns_per_model_part)
  // instead of module_fqns_per_model_part.
  bool torchtitan_split_points = false;
};

struct ExporterSpec {
  std::string_view format;  // "megatron", "deepspeed", "torchtitan"
  std::string_view writes;  // one line for --help
  ExportResult (*run)(const ModelSpec& model, const Strategy& s, const ExportOptions& options);
};

const std::vector<ExporterSpec>& exporters();
// Throws InputError listing the known formats.
const ExporterSpec& find_exporter(std::string_view format);

ExportResult export_megatron(const ModelSpec& model, const Strategy& s, const ExportOptions& o);
ExportResult export_deepspeed(const ModelSpec& model, const Strategy& s, const ExportOptions& o);
ExportResult export_torchtitan(const ModelSpec& model, const Strategy& s, const ExportOptions& o);

// Pieces shared by the exporters.
namespace export_detail {

// The first transformer block; adds to `out.unsupported` when the model is not
// [embedding, identical blocks, head].
const LayerSpec* uniform_block(const ModelSpec& model, ExportResult& out);

// The pipeline's (virtual) stages in layer order, pp x chunks of them: the strategy's ranges
// (chunks = 1), or blocks split as evenly as possible over pp x chunks with the first ones one
// block larger. Empty when pp = 1, or when the strategy leaves the partition to hetplan
// (`*from_strategy` false then; the frameworks' default even split is used).
std::vector<StageBlocks> pipeline_segments(const ModelSpec& model, const Strategy& s,
                                           ExportResult& out, bool* from_strategy = nullptr);

// "dp 2 x tp 2 x pp 2 = 8 GPUs, micro-batch 4, global batch 64, 1f1b, recompute selective"
std::string strategy_summary(const Strategy& s);

}  // namespace export_detail
}  // namespace hetplan
