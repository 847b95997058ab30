// Pipeline stages in the terms frameworks use. hetplan's layers are the embedding (layer 0), the
// transformer blocks (1..L) and the LM head (L + 1); Megatron-LM, DeepSpeed and torchtitan count
// transformer blocks per stage and put the embedding and head on the first and last stage.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/model.h"
#include "search/strategy.h"

namespace hetplan {

// What one pipeline stage (or virtual stage) holds.
struct StageBlocks {
  bool embedding = false;
  int64_t first_block = 0;  // 0-based transformer block index
  int64_t blocks = 0;
  bool head = false;
};

// Checks that `model` is [embedding, blocks..., head]; returns the problem or "".
std::string layer_structure_problem(const ModelSpec& model);
// Where `model` is a hybrid of Mamba-2, attention, MLP and MoE layers (layers of one mixer):
// that the DeepSpeed, torchtitan and Sailor exports cannot write it, with its pattern
// (Megatron-Core's M, *, -, E; the Megatron export writes it); "" otherwise.
std::string hybrid_export_problem(const ModelSpec& model);

// Megatron-LM's even split: num_blocks / stages blocks each, embedding on the first stage and head
// on the last. Empty when the blocks do not divide.
std::vector<StageBlocks> even_split(int64_t num_blocks, int64_t stages);

// Stages holding `counts[i]` blocks each, embedding on the first and head on the last.
std::vector<StageBlocks> split_by_counts(const std::vector<int64_t>& counts);

// The strategy's explicit stage ranges in block terms; empty when the strategy leaves the
// partition to hetplan. Throws InputError when the ranges do not tile [0, num_blocks + 1].
std::vector<StageBlocks> strategy_stage_blocks(const Strategy& s, int64_t num_blocks);

// hetplan stage specs (layer ranges only) for the given split.
std::vector<StageSpec> to_stage_specs(const std::vector<StageBlocks>& stages);

}  // namespace hetplan
