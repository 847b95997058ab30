// Megatron-LM's ways of writing a pipeline partition, read (importer) and written (exporter):
// the even split, --decoder-first/last-pipeline-num-layers, and --pipeline-model-parallel-layout
// ("E|(tt|)*3,tL": E embedding, t transformer layer, L loss/output, stages split by "|",
// virtual stage v of pipeline rank r at position v * pp + r; see
// megatron/core/transformer/pipeline_parallel_layer_layout.py).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "report/stage_layout.h"

namespace hetplan {

using LayoutFail = std::function<void(const std::string&)>;  // throws

// Stages of the even or first/last split (`first`/`last` < 0: not given). Calls `fail` when the
// blocks do not divide as Megatron-LM requires.
std::vector<StageBlocks> megatron_stage_split(int64_t blocks, int64_t pp, int64_t first,
                                              int64_t last, const LayoutFail& fail);

// All pp x vpp segments of a layout string, in the string's order. Calls `fail` for characters
// other than E, t, L, a misplaced E or L, an empty segment or a segment count not a multiple of pp.
std::vector<StageBlocks> parse_megatron_layout(const std::string& layout, int64_t pp,
                                               const LayoutFail& fail);

// The layout string of segments ("Ettt|tttt|tttL"), runs of t written as t*n when n > 3.
std::string format_megatron_layout(const std::vector<StageBlocks>& segments);

// --decoder-first/last-pipeline-num-layers values that give `stages` (chunks = 1), when it is
// "uniform except the first and/or last stage"; nullopt otherwise. {-1, -1} = the even split.
std::optional<std::pair<int64_t, int64_t>> megatron_first_last(
    const std::vector<StageBlocks>& stages);

}  // namespace hetplan
